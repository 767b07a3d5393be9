/**
 * The gateway's HTTP client for the sidecar: verify, challenge and readiness.
 *
 * One undici keep-alive {@link Pool} per gateway. Every call has a hard
 * deadline that covers connecting, the response headers AND the response
 * body (a sidecar that sends headers and then hangs is a timeout). Calls never
 * throw: they return a {@link VerifyCallResult} that `outcome.ts` maps to the
 * response, so every failure mode ends in a refusal, never in the upstream.
 */

import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import {
  API_KEY_HEADER, CHALLENGE_PATH, IDEMPOTENCY_RECORD_PATH, IDEMPOTENCY_RELEASE_PATH, VERIFY_PATH,
} from '../src/protocol.js';
import type { RecordedResponse, VerifyRequest } from '../src/protocol.js';
import { AUTHZEN_EVALUATION_PATH, AUTHZEN_SEARCH_ACTION_PATH, authzenBody, fromAuthzen } from './authzen.js';

/**
 * Longest sidecar response body read (bytes); longer is a bad response. It holds a verify answer
 * with a replayed answer of the idempotency ledger (its body and headers are bounded, src/protocol.ts).
 */
export const MAX_SIDECAR_RESPONSE_BYTES = 192 * 1024;

/** What one verify call produced. */
export type VerifyCallResult =
  | { readonly kind: 'response'; readonly status: number; readonly contentType: string | undefined; readonly body: string; readonly tooLarge: boolean }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'network' };

/** Settings of a {@link SidecarClient}. */
export interface SidecarClientOptions {
  /** Sidecar base URL (`http(s)://host:port[/base]`). */
  readonly url: URL;
  /** The gateway's API key, sent as `X-Service-API-Key`. */
  readonly apiKey: string;
  /** Deadline of a verify call in ms. */
  readonly verifyTimeoutMs: number;
  /** Deadline of a challenge or readiness call in ms. */
  readonly challengeTimeoutMs: number;
  /** Maximum concurrent connections to the sidecar. */
  readonly connections: number;
  /** `verify` (`POST /v1/service/verify`, the default) or `authzen` (`POST /access/v1/evaluation`, authzen.ts). */
  readonly decisionApi?: 'verify' | 'authzen';
}

/**
 * The verify body (`VerifyRequest` of src/protocol.ts) with the bundle given
 * as JSON text that already passed the strict pre-check (`decodeProofJson` in
 * proof.ts): spliced in as is instead of re-serializing the ~5 KB object.
 */
export type VerifyRequestJson = Omit<VerifyRequest, 'proof_bundle'> & { readonly proofBundleJson: string };

/** The verify body text. */
export function verifyBody(request: VerifyRequest | VerifyRequestJson): string {
  if (!('proofBundleJson' in request)) return JSON.stringify(request);
  const context = request.context === undefined ? '' : `,"context":${JSON.stringify(request.context)}`;
  const idem = request.idempotency === undefined ? '' : `,"idempotency":${JSON.stringify(request.idempotency)}`;
  const scope = JSON.stringify(request.required_scope);
  return `{"proof_bundle":${request.proofBundleJson},"required_scope":${scope}${context}${idem}}`;
}

type Raw = { status: number; contentType: string | undefined; body: string; tooLarge: boolean };

/** Keep-alive client for the sidecar's verify, challenge and readiness APIs. */
export class SidecarClient {
  readonly #pool: Pool;
  readonly #base: string;
  readonly #options: SidecarClientOptions;

  constructor(options: SidecarClientOptions) {
    this.#options = options;
    this.#base = options.url.pathname.replace(/\/+$/, '');
    const slack = Math.max(options.verifyTimeoutMs, options.challengeTimeoutMs) + 1000;
    this.#pool = new Pool(options.url.origin, {
      connections: options.connections,
      keepAliveTimeout: 30_000,
      headersTimeout: slack,
      bodyTimeout: slack,
      connect: { timeout: Math.min(slack, 10_000) },
    });
  }

  /**
   * One request on the pool with undici's dispatch API (no body stream, no AbortSignal: this runs
   * once per proxied request). The deadline covers queueing, connecting, headers and body: when
   * it passes, the call resolves to 'timeout' and the request is aborted as soon as undici hands
   * it a controller (at once when it is already on a socket).
   */
  #call(method: 'GET' | 'POST', path: string, timeoutMs: number, requestId: string, json: string | undefined,
    withKey = true): Promise<Raw | 'timeout' | 'network'> {
    const headers: Record<string, string> = { 'x-request-id': requestId, accept: 'application/json' };
    if (withKey) headers[API_KEY_HEADER] = this.#options.apiKey;
    if (json !== undefined) headers['content-type'] = 'application/json';
    return new Promise((resolve) => {
      let settled = false;
      let controller: Dispatcher.DispatchController | undefined;
      let status = 0;
      let contentType: string | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      let tooLarge = false;
      const finish = (result: Raw | 'timeout' | 'network'): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const timer = setTimeout(() => {
        finish('timeout');
        controller?.abort(new Error('verify deadline'));
      }, timeoutMs);
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
          if (settled) c.abort(new Error('verify deadline'));
        },
        onResponseStart(_c, statusCode, responseHeaders) {
          status = statusCode;
          const ct = responseHeaders['content-type'];
          contentType = Array.isArray(ct) ? ct[0] : ct;
        },
        onResponseData(c, chunk) {
          if (tooLarge) return;
          size += chunk.length;
          if (size > MAX_SIDECAR_RESPONSE_BYTES) {
            tooLarge = true;
            chunks.length = 0;
            finish({ status, contentType, body: '', tooLarge: true });
            c.abort(new Error('sidecar response too large'));
            return;
          }
          chunks.push(chunk);
        },
        onResponseEnd() {
          finish({ status, contentType, body: (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8'), tooLarge: false });
        },
        onResponseError() {
          finish('network');
        },
      };
      try {
        this.#pool.dispatch({ method, path: this.#base + path, headers, body: json ?? null }, handler);
      } catch {
        finish('network');
      }
    });
  }

  /** Calls verify. Never throws. */
  async verify(request: VerifyRequest | VerifyRequestJson, requestId: string): Promise<VerifyCallResult> {
    if (this.#options.decisionApi === 'authzen') return this.#evaluate(request, requestId);
    const r = await this.#call('POST', VERIFY_PATH, this.#options.verifyTimeoutMs, requestId, verifyBody(request));
    if (r === 'timeout' || r === 'network') return { kind: r };
    return { kind: 'response', ...r };
  }

  /** The verify request as an AuthZEN proof verification, its answer read back as verify's (authzen.ts). */
  async #evaluate(request: VerifyRequest | VerifyRequestJson, requestId: string): Promise<VerifyCallResult> {
    const bundleJson = 'proofBundleJson' in request ? request.proofBundleJson
      : JSON.stringify(request.proof_bundle ?? null);
    const body = authzenBody({ required_scope: request.required_scope,
      ...(request.context !== undefined ? { context: request.context } : {}) }, bundleJson);
    const r = await this.#call('POST', AUTHZEN_EVALUATION_PATH, this.#options.verifyTimeoutMs, requestId, body);
    if (r === 'timeout' || r === 'network') return { kind: r };
    if (r.tooLarge) return { kind: 'response', ...r };
    return { kind: 'response', ...r, ...fromAuthzen(r.status, r.body) };
  }

  /**
   * Records the upstream's answer to the request whose verify claimed `claimId` (idempotency.ts);
   * true when the sidecar stored it. Never throws.
   */
  async recordIdempotent(claimId: string, response: RecordedResponse, requestId: string): Promise<boolean> {
    const r = await this.#call('POST', IDEMPOTENCY_RECORD_PATH, this.#options.verifyTimeoutMs, requestId,
      JSON.stringify({ claim_id: claimId, response }));
    return typeof r !== 'string' && r.status === 200;
  }

  /** Releases the claim `claimId` (its request got no upstream answer); true when released. Never throws. */
  async releaseIdempotent(claimId: string, requestId: string): Promise<boolean> {
    const r = await this.#call('POST', IDEMPOTENCY_RELEASE_PATH, this.#options.verifyTimeoutMs, requestId,
      JSON.stringify({ claim_id: claimId }));
    return typeof r !== 'string' && r.status === 200;
  }

  /**
   * The scopes the AuthZEN action search (`POST /access/v1/search/action`, docs/authzen.md) allows
   * `agentId` now on `resource` (every page, at most 20), or `undefined` on any failure. Never throws.
   */
  async searchActions(agentId: string, resource: { type: string; id: string }, requestId: string,
  ): Promise<Set<string> | undefined> {
    const names = new Set<string>();
    let token = '';
    for (let page = 0; page < 20; page++) {
      const body = JSON.stringify({ subject: { type: 'agent', id: agentId }, resource,
        ...(token === '' ? {} : { page: { token } }) });
      const r = await this.#call('POST', AUTHZEN_SEARCH_ACTION_PATH, this.#options.verifyTimeoutMs, requestId, body);
      if (typeof r === 'string' || r.status !== 200 || r.tooLarge) return undefined;
      let answer: { results?: unknown; page?: { next_token?: unknown } };
      try { answer = JSON.parse(r.body) as typeof answer; } catch { return undefined; }
      if (!Array.isArray(answer?.results)) return undefined;
      for (const item of answer.results as unknown[]) {
        const name = (item as { name?: unknown } | null)?.name;
        if (typeof name !== 'string') return undefined;
        names.add(name);
      }
      const next = answer.page?.next_token;
      if (next === '' || next === undefined) return names;
      if (typeof next !== 'string') return undefined;
      token = next;
    }
    return undefined;
  }

  /** Fetches a fresh challenge, or `undefined` on any failure. Never throws. */
  async challenge(requestId: string): Promise<string | undefined> {
    const r = await this.#call('POST', CHALLENGE_PATH, this.#options.challengeTimeoutMs, requestId, undefined);
    if (typeof r === 'string' || r.status !== 200) return undefined;
    try {
      const value = (JSON.parse(r.body) as { challenge?: unknown }).challenge;
      // Must fit in a quoted-string of WWW-Authenticate: visible ASCII without " and \.
      return typeof value === 'string' && /^[\x21\x23-\x5b\x5d-\x7e]{1,1024}$/.test(value) ? value : undefined;
    } catch {
      return undefined;
    }
  }

  /** True when `GET {sidecar}/readyz` answers 200 in time. Never throws. */
  async ready(requestId: string): Promise<boolean> {
    const r = await this.#call('GET', '/readyz', this.#options.challengeTimeoutMs, requestId, undefined, false);
    return typeof r !== 'string' && r.status === 200;
  }

  /** Closes the pool (in-flight calls are aborted). */
  async close(): Promise<void> {
    await this.#pool.destroy().catch(() => undefined);
  }
}
