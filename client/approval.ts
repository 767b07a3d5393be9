/**
 * Waiting for a person's step-up approval (issue 23, docs/api.md "Approvals"):
 * when the gateway refuses a request with reason `approval_required` and an
 * approval id, the client can poll
 * `GET /v1/service/approvals/{approval_id}/status` (the platform's API key)
 * until the approval is no longer pending, within a deadline, and then tell
 * the fetch wrapper to retry once with a fresh proof (granted) or give up
 * with a typed error (denied, expired, used, or still pending at the deadline).
 *
 * Waiting is opt-in (`waitForApproval` of `createAgentFetch`): a fetch that
 * silently blocks for minutes on a person is not what a caller expects. When
 * enabled it is bounded: by `timeoutMs` (default
 * {@link DEFAULT_APPROVAL_TIMEOUT_MS}), by the approval's own `expires_at`,
 * and by the request's `AbortSignal`.
 */

import { API_KEY_HEADER } from '../src/protocol.js';
import { AgentAuthzError, serviceErrorOf } from './errors.js';
import type { ApprovalState } from './errors.js';

/**
 * Default longest wait for a person's decision (ms, 5 minutes).
 *
 * @example
 * ```ts
 * const agentFetch = createAgentFetch({ ...options, waitForApproval: { timeoutMs: 2 * DEFAULT_APPROVAL_TIMEOUT_MS } });
 * ```
 */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 300_000;
/**
 * Default interval between two status reads (ms).
 *
 * @example
 * ```ts
 * const agentFetch = createAgentFetch({ ...options, waitForApproval: { pollIntervalMs: DEFAULT_APPROVAL_POLL_MS * 2 } });
 * ```
 */
export const DEFAULT_APPROVAL_POLL_MS = 2_000;

/**
 * How `createAgentFetch` waits for an approval (`waitForApproval: true` takes every default).
 *
 * @example
 * ```ts
 * const wait: ApprovalWaitOptions = { timeoutMs: 120_000, onPending: (err) => console.log(`approve ${err.approvalId} in the console`) };
 * ```
 */
export interface ApprovalWaitOptions {
  /** Longest wait in ms (default {@link DEFAULT_APPROVAL_TIMEOUT_MS}); never past the approval's `expires_at`. */
  timeoutMs?: number;
  /** Interval between status reads in ms (default {@link DEFAULT_APPROVAL_POLL_MS}, at least 50). */
  pollIntervalMs?: number;
  /** Called once when the wait starts, with the refusal (its `approvalId`, `operation`, `tool`): tell the user what waits. */
  onPending?: (refusal: AgentAuthzError) => void;
}

/** Validated {@link ApprovalWaitOptions}. */
export interface ResolvedApprovalWait {
  readonly timeoutMs: number;
  readonly pollIntervalMs: number;
  readonly onPending: ((refusal: AgentAuthzError) => void) | undefined;
}

const TERMINAL: Record<string, string> = { denied: 'approval_denied', expired: 'approval_expired', used: 'approval_used' };

/** Validates `waitForApproval` (errors through `fail`, which throws a `TypeError`); `undefined`/`false`: no waiting. */
export function resolveApprovalWait(value: unknown, fail: (key: string, message: string) => never): ResolvedApprovalWait | undefined {
  if (value === undefined || value === false) return undefined;
  const o = value === true ? {} : value;
  if (o === null || typeof o !== 'object' || Array.isArray(o)) fail('waitForApproval', 'must be true, false or { timeoutMs, pollIntervalMs, onPending }');
  const r = o as Record<string, unknown>;
  for (const key of Object.keys(r)) if (!['timeoutMs', 'pollIntervalMs', 'onPending'].includes(key)) fail(`waitForApproval.${key}`, 'unknown option');
  const int = (key: string, fallback: number, min: number): number => {
    const v = r[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) fail(`waitForApproval.${key}`, `must be an integer of at least ${min}`);
    return v;
  };
  if (r.onPending !== undefined && typeof r.onPending !== 'function') fail('waitForApproval.onPending', 'must be a function');
  return {
    timeoutMs: int('timeoutMs', DEFAULT_APPROVAL_TIMEOUT_MS, 1),
    pollIntervalMs: int('pollIntervalMs', DEFAULT_APPROVAL_POLL_MS, 50),
    onPending: r.onPending as ResolvedApprovalWait['onPending'],
  };
}

/** Sleeps `ms`, or rejects with the signal's reason when it aborts. */
function sleep(ms: number, signal: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Reads approval status for an agent's platform (`GET /v1/service/approvals/{id}/status`). */
export class ApprovalWaiter {
  readonly #base: string;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #requestTimeoutMs: number;
  readonly #o: ResolvedApprovalWait;

  constructor(sidecarUrl: URL, apiKey: string, send: typeof fetch, requestTimeoutMs: number, options: ResolvedApprovalWait) {
    this.#base = sidecarUrl.href.replace(/\/+$/, '');
    this.#apiKey = apiKey;
    this.#fetch = send;
    this.#requestTimeoutMs = requestTimeoutMs;
    this.#o = options;
  }

  /** One status read: the state and the rest, `undefined` on a transient failure; throws on a definite refusal (401, 404, ...). */
  async #status(refusal: AgentAuthzError, id: string): Promise<Record<string, unknown> | undefined> {
    let res: Response;
    try {
      res = await this.#fetch(`${this.#base}/v1/service/approvals/${encodeURIComponent(id)}/status`, {
        headers: { [API_KEY_HEADER]: this.#apiKey, accept: 'application/json' }, signal: AbortSignal.timeout(this.#requestTimeoutMs),
      });
    } catch {
      return undefined; // network or timeout: try again until the deadline
    }
    const text = await res.text().catch(() => '');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (res.status === 200 && body !== null && typeof body === 'object'
      && typeof (body as Record<string, unknown>).state === 'string') return body as Record<string, unknown>;
    if (res.status >= 500 || res.status === 429 || res.status === 200) return undefined;
    const error = serviceErrorOf(body)?.error ?? { code: 'service_unavailable', message: `The approval status answered ${res.status}.` };
    throw new AgentAuthzError('sidecar', res.status, error,
      { requestId: res.headers.get('x-request-id') ?? undefined, operation: refusal.operation, approvalId: id });
  }

  /**
   * Waits until the approval of `refusal` is decided. Resolves when it is granted (the caller
   * retries once with a fresh proof); throws an {@link AgentAuthzError} with reason
   * `approval_denied` / `approval_expired` / `approval_used` (and the `note`), or the original
   * refusal with `approvalState: 'pending'` at the deadline; rejects when `signal` aborts.
   */
  async wait(refusal: AgentAuthzError, signal: AbortSignal | null): Promise<void> {
    const id = refusal.approvalId;
    if (id === undefined) throw refusal;
    this.#o.onPending?.(refusal);
    let deadline = Date.now() + this.#o.timeoutMs;
    for (let polls = 0; ; polls += 1) {
      const status = await this.#status(refusal, id);
      if (status !== undefined) {
        const state = status.state as string;
        const expires = typeof status.expires_at === 'string' ? Date.parse(status.expires_at) : NaN;
        if (Number.isFinite(expires)) deadline = Math.min(deadline, expires);
        if (state === 'granted') return;
        const reason = TERMINAL[state];
        if (reason !== undefined) {
          throw new AgentAuthzError(refusal.source, refusal.status, { ...refusal.details, reason, approval_id: id }, {
            requestId: refusal.requestId, jsonRpcId: refusal.jsonRpcId, operation: refusal.operation, approvalId: id,
            approvalState: state as ApprovalState, note: typeof status.note === 'string' ? status.note : undefined,
          });
        }
      }
      const left = deadline - Date.now();
      if (left <= 0 || polls > 1_000_000) {
        throw new AgentAuthzError(refusal.source, refusal.status, refusal.details as Record<string, unknown>, {
          requestId: refusal.requestId, jsonRpcId: refusal.jsonRpcId, operation: refusal.operation, approvalId: id, approvalState: 'pending',
        });
      }
      await sleep(Math.min(this.#o.pollIntervalMs, left), signal);
    }
  }
}
