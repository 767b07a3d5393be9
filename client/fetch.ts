/**
 * `createAgentFetch`: a `fetch` for agents whose requests pass an agent-authz
 * gateway (or a proxy using its forward-auth endpoint).
 *
 * Per request:
 * 1. the request (method, URL, headers, body) is read once, so it can be
 *    sent twice; its operation (method, path, MCP tool, body SHA-256) is
 *    computed (operation.ts);
 * 2. `challenge: 'sidecar'` (default): a challenge from the sidecar, present
 *    (binding the proof to that operation unless `bind: false`), and the
 *    request goes out with `X-Service-Proof`;
 *    `challenge: 'server'`: the request goes out without a proof first;
 * 3. a 401 carrying a challenge (`WWW-Authenticate: ServiceProof …
 *    challenge="…"` or `error.challenge`) is presented and the request is
 *    retried ONCE with the new proof;
 * 4. a 403 with reason `approval_required` and an approval id, when
 *    `waitForApproval` is set: the approval's status is polled (approval.ts)
 *    until a person decides, then the request is retried ONCE with a fresh
 *    proof; a denied, expired or used approval, or the end of the wait, is
 *    thrown as an {@link AgentAuthzError} with the reason and the note;
 * 5. a 409 `idempotency_in_flight` (the same request is still being
 *    answered) is retried with a fresh proof after 250, 500, 1000 and 2000 ms;
 * 6. any other gateway refusal (errors.ts: 401 without another try, 403,
 *    422, 503, …) is thrown as an {@link AgentAuthzError}; a 403 is never retried
 *    otherwise. Every other answer, including the API's own errors, is
 *    returned as is.
 *
 * Idempotency (docs/gateway.md#idempotency): a POST, PUT, PATCH or DELETE gets an
 * `Idempotency-Key` (a random UUID) unless it has one or `idempotencyKeys` is false, and
 * every try of step 3–5 sends the same key, so the API acts once.
 */

import { APPROVAL_ID_HEADER, APPROVAL_ID_PATTERN, IDEMPOTENCY_KEY_HEADER, PROOF_HEADER } from '../src/protocol.js';
import { ApprovalWaiter, resolveApprovalWait } from './approval.js';
import type { ApprovalWaitOptions } from './approval.js';
import { AgentAuthzError, gatewayRefusal } from './errors.js';
import { describeOperation } from './operation.js';
import type { AgentOperation } from './operation.js';
import { ProofMaker } from './sidecar.js';

/**
 * Default deadline of each sidecar call (challenge, present) in ms.
 *
 * @example
 * ```ts
 * const agentFetch = createAgentFetch({ ...options, timeoutMs: DEFAULT_SIDECAR_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_SIDECAR_TIMEOUT_MS = 10_000;
/**
 * Default largest request body the client buffers to be able to retry (bytes, 16 MiB).
 *
 * @example
 * ```ts
 * const agentFetch = createAgentFetch({ ...options, maxBodyBytes: 4 * DEFAULT_MAX_BODY_BYTES });
 * ```
 */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

/**
 * Options of {@link createAgentFetch}.
 *
 * @example
 * ```ts
 * const options: AgentFetchOptions = {
 *   sidecarUrl: 'http://127.0.0.1:8700', apiKey: process.env.PLATFORM_API_KEY!,
 *   connectionId: process.env.CONNECTION_ID!, agentId: process.env.AGENT_ID!,
 * };
 * ```
 */
export interface AgentFetchOptions {
  /** Sidecar base URL. */
  sidecarUrl: string | URL;
  /** The platform's API key (the connection the agent belongs to, and the API's gateway verifies for). */
  apiKey: string;
  /** The agent's connection id. */
  connectionId: string;
  /** The agent id. */
  agentId: string;
  /**
   * Where the first challenge comes from: `sidecar` (default; one round trip
   * less, and the body is sent once) or `server` (send without a proof and
   * answer the gateway's 401 challenge; use it when public routes are common).
   */
  challenge?: 'sidecar' | 'server';
  /** Deadline of each sidecar call in ms (default {@link DEFAULT_SIDECAR_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Largest request body buffered (default {@link DEFAULT_MAX_BODY_BYTES}); larger throws a `RangeError`. */
  maxBodyBytes?: number;
  /** The underlying fetch (default: the global `fetch`). */
  fetch?: typeof fetch;
  /**
   * Bind each proof to the operation it is sent with (default `true`; docs/proofs.md): a proof
   * taken off the wire is then good for that method, path or MCP tool and body only. Set
   * `false` only behind a decision point that cannot see the body (NGINX `auth_request`, Caddy
   * `forward_auth`): there a bound proof is denied `operation_mismatch`.
   */
  bind?: boolean;
  /**
   * Wait for a person's step-up approval (`approval_required`) and retry once when granted.
   * Off by default (the refusal is thrown at once with its `approvalId`); `true` or options
   * turn it on, bounded by `timeoutMs` (default 5 minutes) and the approval's expiry.
   */
  waitForApproval?: boolean | ApprovalWaitOptions;
  /**
   * Give every POST, PUT, PATCH and DELETE without an `Idempotency-Key` header a new one (a random
   * UUID), re-sent on this client's retries of the request (default `true`). A key the caller sets
   * is always kept: set your own to make your retries of a call (after a network error) safe too.
   */
  idempotencyKeys?: boolean;
}

/** The methods that get an `Idempotency-Key`. */
const KEYED_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
/** Waits before the retries of a 409 `idempotency_in_flight`, in ms. */
const IN_FLIGHT_RETRY_MS = [250, 500, 1000, 2000];

/**
 * A `fetch` that proves the agent's authority on every request (see {@link createAgentFetch}).
 *
 * @example
 * ```ts
 * const agentFetch: AgentFetch = createAgentFetch(options);
 * const res = await agentFetch('https://api.example.com/v1/items', { method: 'POST', body: JSON.stringify(item) });
 * ```
 */
export type AgentFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

const KEYS = ['sidecarUrl', 'apiKey', 'connectionId', 'agentId', 'challenge', 'timeoutMs', 'maxBodyBytes', 'fetch',
  'bind', 'waitForApproval', 'idempotencyKeys'];
const LABEL = 'agent fetch options:';

function fail(key: string, message: string): never {
  throw new TypeError(`${LABEL} ${key}: ${message}`);
}

function text(o: Record<string, unknown>, key: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '' || !/^[\x21-\x7e]+$/.test(v)) fail(key, 'must be a non-empty string of visible ASCII');
  return v;
}

function int(o: Record<string, unknown>, key: string, fallback: number): number {
  const v = o[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) fail(key, 'must be a positive integer');
  return v;
}

/** Reads a body of at most `max` bytes. */
async function readBody(request: Request, max: number): Promise<Uint8Array<ArrayBuffer> | undefined> {
  if (request.body === null) return undefined;
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel();
      throw new RangeError(`agent fetch: the request body is larger than maxBodyBytes (${max})`);
    }
    chunks.push(value);
  }
  // No Buffer: the client runs outside Node too.
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out;
}

/**
 * A random UUID (v4) for an `Idempotency-Key`: `crypto.randomUUID()`, or from `getRandomValues` where
 * that is missing (a browser page outside a secure context).
 */
function newIdempotencyKey(): string {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === 'function') return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) { reject(signal.reason as Error); return; }
    const timer = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = (): void => { clearTimeout(timer); reject(signal.reason as Error); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The challenge of a 401 answer, from `WWW-Authenticate` or the body. */
function challengeOf(res: Response, body: unknown): string | undefined {
  const www = /challenge="([\x21\x23-\x5b\x5d-\x7e]{1,1024})"/.exec(res.headers.get('www-authenticate') ?? '');
  if (www !== null) return www[1];
  const err = gatewayRefusal(401, body)?.error;
  return typeof err?.challenge === 'string' ? err.challenge : undefined;
}

/** The refusal in a response, as an {@link AgentAuthzError}, or `undefined` for the API's own answers. */
function refusalOf(res: Response, parsed: unknown, operation: AgentOperation): AgentAuthzError | undefined {
  const refusal = gatewayRefusal(res.status, parsed);
  if (refusal === undefined) return undefined;
  const header = res.headers.get(APPROVAL_ID_HEADER) ?? undefined;
  return new AgentAuthzError('gateway', res.status, refusal.error, {
    requestId: res.headers.get('x-request-id') ?? undefined, jsonRpcId: refusal.jsonRpcId, operation,
    approvalId: header !== undefined && APPROVAL_ID_PATTERN.test(header) ? header : undefined,
  });
}

/**
 * Creates a `fetch` for an agent: every request gets a fresh proof of the
 * agent's delegation in `X-Service-Proof`, bound to the request's operation;
 * a 401 with a challenge is answered and retried once; a 403 is never
 * retried, except once after a person granted the step-up approval it names
 * (with `waitForApproval`); gateway refusals throw an {@link AgentAuthzError}
 * with the decision reason. Options are checked at once (a `TypeError`
 * naming the option).
 *
 * @example
 * ```ts
 * import { createAgentFetch, AgentAuthzError } from 'agent-authz/client';
 *
 * const agentFetch = createAgentFetch({
 *   sidecarUrl: 'http://127.0.0.1:8700', apiKey: process.env.PLATFORM_API_KEY!,
 *   connectionId: process.env.CONNECTION_ID!, agentId: process.env.AGENT_ID!,
 * });
 * const res = await agentFetch('https://api.example.com/v1/items/7');
 * ```
 */
export function createAgentFetch(options: AgentFetchOptions): AgentFetch {
  if (options === null || typeof options !== 'object') throw new TypeError(`${LABEL} must be an object`);
  const o = options as unknown as Record<string, unknown>;
  for (const key of Object.keys(o)) if (!KEYS.includes(key)) fail(key, `unknown option (allowed: ${KEYS.join(', ')})`);
  let sidecarUrl: URL;
  try {
    sidecarUrl = new URL(String(options.sidecarUrl));
  } catch {
    fail('sidecarUrl', 'must be an absolute http(s) URL');
  }
  if (sidecarUrl.protocol !== 'http:' && sidecarUrl.protocol !== 'https:') fail('sidecarUrl', 'must be an absolute http(s) URL');
  const mode = options.challenge ?? 'sidecar';
  if (mode !== 'sidecar' && mode !== 'server') fail('challenge', 'must be "sidecar" or "server"');
  if (options.fetch !== undefined && typeof options.fetch !== 'function') fail('fetch', 'must be a function');
  // Always called as a plain function: a browser's fetch refuses a `this` other than the global one ("Illegal
  // invocation"), and the proof maker and the approval waiter would otherwise call it as their own method.
  const given = options.fetch ?? globalThis.fetch;
  const send: typeof fetch = (input, init) => given(input, init);
  const maxBody = int(o, 'maxBodyBytes', DEFAULT_MAX_BODY_BYTES);
  if (options.bind !== undefined && typeof options.bind !== 'boolean') fail('bind', 'must be true or false');
  const bind = options.bind ?? true;
  if (options.idempotencyKeys !== undefined && typeof options.idempotencyKeys !== 'boolean') {
    fail('idempotencyKeys', 'must be true or false');
  }
  const idempotencyKeys = options.idempotencyKeys ?? true;
  const apiKey = text(o, 'apiKey');
  const timeoutMs = int(o, 'timeoutMs', DEFAULT_SIDECAR_TIMEOUT_MS);
  const proofs = new ProofMaker({
    sidecarUrl, apiKey, connectionId: text(o, 'connectionId'), agentId: text(o, 'agentId'), timeoutMs, fetch: send,
  });
  const wait = resolveApprovalWait(options.waitForApproval, fail);
  const approvals = wait === undefined ? undefined : new ApprovalWaiter(sidecarUrl, apiKey, send, timeoutMs, wait);
  const freshProof = async (operation: AgentOperation): Promise<string> => proofs.present(await proofs.challenge(operation), operation, bind);

  return async function agentFetch(input, init) {
    const request = new Request(input, init);
    const body = await readBody(request, maxBody);
    const operation: AgentOperation = describeOperation(request.method, new URL(request.url), body, request.headers.get('content-type'));
    // One key for every try of this request (none added when the caller set one).
    const keyed = idempotencyKeys && KEYED_METHODS.includes(request.method);
    const key = keyed && !request.headers.has(IDEMPOTENCY_KEY_HEADER) ? newIdempotencyKey() : undefined;
    const attempt = (proof: string | undefined): Promise<Response> => {
      const headers = new Headers(request.headers);
      if (key !== undefined) headers.set(IDEMPOTENCY_KEY_HEADER, key);
      if (proof === undefined) headers.delete(PROOF_HEADER);
      else headers.set(PROOF_HEADER, proof);
      return send(request.url, {
        method: request.method, headers, redirect: request.redirect, signal: request.signal,
        ...(body === undefined ? {} : { body }),
      });
    };
    let res = await attempt(mode === 'sidecar' ? await freshProof(operation) : undefined);
    let challenged = false;
    let waited = false;
    let inFlightTries = 0;
    for (;;) {
      if (res.status < 400) return res;
      const raw = await res.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        parsed = undefined;
      }
      const challenge = res.status === 401 && !challenged && !waited ? challengeOf(res, parsed) : undefined;
      if (challenge !== undefined) {
        challenged = true;
        res = await attempt(await proofs.present(challenge, operation, bind));
        continue;
      }
      const refusal = refusalOf(res, parsed, operation);
      const inFlight = refusal?.code === 'idempotency_in_flight';
      if (inFlight && inFlightTries < IN_FLIGHT_RETRY_MS.length) {
        await sleep(IN_FLIGHT_RETRY_MS[inFlightTries++]!, request.signal);
        res = await attempt(await freshProof(operation));
        continue;
      }
      if (refusal !== undefined) {
        if (approvals === undefined || waited || refusal.reason !== 'approval_required' || refusal.approvalId === undefined) throw refusal;
        waited = true;
        await approvals.wait(refusal, request.signal); // throws unless granted
        res = await attempt(await freshProof(operation));
        continue;
      }
      // The body was read (and decoded): hand back an equivalent, unread response.
      const headers = new Headers(res.headers);
      headers.delete('content-encoding');
      headers.delete('content-length');
      return new Response(raw, { status: res.status, statusText: res.statusText, headers });
    }
  };
}
