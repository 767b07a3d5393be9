/**
 * The two sidecar calls that make a proof for the agent: a challenge
 * (`POST /v1/service/challenge`, with the platform's API key; its connection
 * is the audience the API's gateway verifies for) and present
 * (`POST /v1/service/connections/{c}/agents/{a}/present`, with the operation
 * to bind), which returns the ready-made `X-Service-Proof` value. Failures become {@link AgentAuthzError}s
 * with `source: 'sidecar'` and the sidecar's error code.
 */

import { API_KEY_HEADER, CHALLENGE_PATH } from '../src/protocol.js';
import { AgentAuthzError, serviceErrorOf } from './errors.js';
import { boundOperation } from './operation.js';
import type { AgentOperation } from './operation.js';

/** Settings of a {@link ProofMaker}. */
export interface ProofMakerOptions {
  readonly sidecarUrl: URL;
  readonly apiKey: string;
  readonly connectionId: string;
  readonly agentId: string;
  readonly timeoutMs: number;
  readonly fetch: typeof fetch;
}

/** Makes proofs for one agent. */
export class ProofMaker {
  readonly #o: ProofMakerOptions;
  readonly #base: string;

  constructor(options: ProofMakerOptions) {
    this.#o = options;
    this.#base = options.sidecarUrl.href.replace(/\/+$/, '');
  }

  async #post(path: string, body: unknown, operation: AgentOperation): Promise<Record<string, unknown>> {
    let res: Response;
    try {
      res = await this.#o.fetch(this.#base + path, {
        method: 'POST',
        headers: { [API_KEY_HEADER]: this.#o.apiKey, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
    } catch {
      throw new AgentAuthzError('sidecar', 503, { code: 'service_unavailable', message: 'The sidecar could not be reached to make a proof.' }, { operation });
    }
    const text = await res.text().catch(() => '');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (res.status !== 200 || parsed === null || typeof parsed !== 'object') {
      const error = serviceErrorOf(parsed)?.error ?? { code: 'service_unavailable', message: `The sidecar answered ${res.status}.` };
      throw new AgentAuthzError('sidecar', res.status, error, { requestId: res.headers.get('x-request-id') ?? undefined, operation });
    }
    return parsed as Record<string, unknown>;
  }

  /** A fresh challenge of the API key's connection. */
  async challenge(operation: AgentOperation): Promise<string> {
    const body = await this.#post(CHALLENGE_PATH, undefined, operation);
    if (typeof body.challenge !== 'string') throw new AgentAuthzError('sidecar', 502,
      { code: 'service_unavailable', message: 'The challenge answer has no challenge.' }, { operation });
    return body.challenge;
  }

  /**
   * Presents `challenge` for the agent; returns the `X-Service-Proof` value.
   * `operation` is what the request will do; with `bind` it is signed into
   * the proof (`boundOperation`, docs/proofs.md), so the proof is good for
   * that operation only.
   */
  async present(challenge: string, operation: AgentOperation, bind: boolean): Promise<string> {
    const path = `/v1/service/connections/${encodeURIComponent(this.#o.connectionId)}/agents/${encodeURIComponent(this.#o.agentId)}/present`;
    const bound = bind ? boundOperation(operation) : undefined;
    const body = await this.#post(path, bound === undefined ? { challenge } : { challenge, operation: bound }, operation);
    if (typeof body.proof_header !== 'string') throw new AgentAuthzError('sidecar', 502,
      { code: 'service_unavailable', message: 'The present answer has no proof_header.' }, { operation });
    return body.proof_header;
  }
}
