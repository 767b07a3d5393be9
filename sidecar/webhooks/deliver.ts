/**
 * One attempt's HTTP delivery for the webhook worker (`worker.ts`): checks the
 * callback URL, builds and sends the signed POST (fresh timestamp, exact body
 * bytes) through the SSRF-safe agent, reads the response, and classifies the
 * outcome into the delivery's next outbox state — `delivered` on a 2xx,
 * `disabled` on a 410, otherwise a retry on the schedule of `schedule.ts`
 * (honouring `Retry-After`) or `dead` after the last attempt. Redirects are
 * never followed. Error descriptions are short and secret-free: an SSRF
 * refusal never reveals what a name resolved to (operators get it in the log).
 */
import type { Agent } from 'undici';
import type { DeliveryRecord } from '../store/types.js';
import { WEBHOOK_USER_AGENT, signWebhook } from '../../src/webhooks.js';
import { validateCallbackUrl } from '../../src/callback-url.js';
import { nextAttemptAt, parseRetryAfter } from './schedule.js';
import type { DeliveryResult, WorkerLogger } from './types.js';

/**
 * The abort reason the worker's `stop()` gives in-flight deliveries after its
 * grace period; {@link sendSigned} reports such an abort as `stopped`.
 */
export const STOP = Symbol('worker stopping');

/** undici, loaded with the first send: a sidecar that sends no webhook does not load it (~0.25 CPU s). */
let undici: Promise<typeof import('undici')> | undefined;

/** What {@link sendSigned} needs for one attempt of one delivery. */
export interface SendInput {
  /** The delivery's id, sent as `X-Service-Delivery-Id`. */
  deliveryId: string;
  /** The platform's callback URL, checked again before each attempt. */
  callbackUrl: string;
  /** The opened (plaintext) body; sent exactly. */
  body: Uint8Array;
  /** Its media type (default `application/json`; the audit push export sends `application/x-ndjson`). */
  contentType?: string;
  /** The opened webhook secret of the platform. */
  secret: Uint8Array;
  /** When the attempt started (Unix ms); its whole seconds are the signed timestamp. */
  attemptedAt: number;
  /** Lifts the https and private-address rules (development and tests only). */
  allowInsecure: boolean;
  /** Deadline for the response headers (connect included) and body reads. */
  timeoutMs: number;
  /** The SSRF-safe agent (connect-time address checks). */
  dispatcher: Agent;
  /** Aborted with {@link STOP} when the worker stops. */
  stopSignal: AbortSignal;
  /** Current time in Unix ms (for an HTTP-date `Retry-After`). */
  clock: () => number;
  /** Where the SSRF refusal warning goes. */
  log: WorkerLogger;
  /** The delivery's log fields (for the SSRF warning). */
  logCtx: object;
}

/**
 * What one send produced: the status (null when there was no answer), a
 * secret-free error (null on a 2xx) and the `Retry-After` delay of a non-2xx
 * answer; or `stopped` when the worker's stop aborted the request.
 */
export type SendOutcome =
  | { stopped: false; status: number | null; error: string | null; retryAfterMs: number | null }
  | { stopped: true };

/**
 * Sends one signed attempt: refuses a callback URL that fails
 * {@link validateCallbackUrl}, otherwise POSTs the body with the signature
 * headers and reads a little of the answer so the connection can be reused.
 * Never throws for a network, timeout or SSRF failure (they become `error`).
 */
export async function sendSigned(input: SendInput): Promise<SendOutcome> {
  const { body, stopSignal, timeoutMs } = input;
  let status: number | null = null;
  let error: string | null = null;
  let retryAfterMs: number | null = null;

  const check = validateCallbackUrl(input.callbackUrl, input.allowInsecure);
  if (!check.ok) {
    error = `callback URL refused: ${check.reason}`;
  } else {
    const timestamp = Math.floor(input.attemptedAt / 1000);
    const headers = {
      'content-type': input.contentType ?? 'application/json',
      'user-agent': WEBHOOK_USER_AGENT,
      'x-service-delivery-id': input.deliveryId,
      'x-service-timestamp': String(timestamp),
      'x-service-signature': signWebhook(input.secret, timestamp, body),
    };
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new Error(`timeout after ${timeoutMs} ms`)), timeoutMs);
    const signal = AbortSignal.any([timeout.signal, stopSignal]);
    try {
      const { request } = await (undici ??= import('undici'));
      const res = await request(input.callbackUrl, {
        method: 'POST',
        headers,
        body: Buffer.from(body.buffer, body.byteOffset, body.byteLength),
        dispatcher: input.dispatcher,
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      status = res.statusCode;
      if (status >= 300 && status < 400) {
        const loc = res.headers['location'];
        error = `redirect not followed${loc ? ` (Location: ${String(loc).slice(0, 200)})` : ''}`;
      } else if (status < 200 || status >= 300) {
        error = `HTTP ${status}`;
      }
      if (status < 200 || status >= 300) {
        retryAfterMs = parseRetryAfter(res.headers['retry-after'], input.clock());
      }
      // The answer body is not used; read a little of it so the connection can be reused.
      await res.body.dump({ limit: 64 * 1024, signal }).catch(() => undefined);
    } catch (err) {
      if (stopSignal.aborted && stopSignal.reason === STOP) {
        clearTimeout(timer);
        return { stopped: true };
      }
      const failure = timeout.signal.aborted ? timeout.signal.reason : err;
      error = describeError(failure);
      // The stored error is shown to the account holder: never reveal what a name resolves to
      // inside the network, nor whether it resolves at all. Operators get the detail in the log.
      if (error === DESTINATION_NOT_ALLOWED) {
        input.log.warn({ ...input.logCtx, detail: String((failure as Error).message ?? failure).slice(0, 500) },
          isSsrfBlock(failure) ? 'webhook target refused by the SSRF guard' : 'webhook target host name does not resolve');
      }
    } finally {
      clearTimeout(timer);
    }
  }
  return { stopped: false, status, error, retryAfterMs };
}

/** The outbox state one finished attempt leads to ({@link classifyOutcome}). */
export interface Classified {
  state: DeliveryRecord['state'];
  result: DeliveryResult;
  /** The next attempt time (Unix ms) when `pending`; `finishedAt` otherwise. */
  next: number;
  /** The error to record: null when delivered, a fixed text on a 410, else the send's error. */
  error: string | null;
}

/**
 * Classifies a finished attempt: 2xx → `delivered`; 410 → `disabled`;
 * anything else → `pending` at {@link nextAttemptAt} (honouring
 * `retryAfterMs`), or `dead` when the schedule is spent.
 */
export function classifyOutcome(
  attempt: number,
  finishedAt: number,
  sent: { status: number | null; error: string | null; retryAfterMs: number | null },
  random: () => number,
): Classified {
  const { status, retryAfterMs } = sent;
  let error = sent.error;
  const ok = status !== null && status >= 200 && status < 300;
  let state: DeliveryRecord['state'];
  let next = finishedAt;
  let result: DeliveryResult;
  if (ok) {
    state = 'delivered';
    result = 'delivered';
    error = null;
  } else if (status === 410) {
    state = 'disabled';
    result = 'disabled';
    error = 'HTTP 410: callback disabled';
  } else {
    const at = nextAttemptAt(attempt, finishedAt, retryAfterMs, random);
    if (at === null) {
      state = 'dead';
      result = 'dead';
    } else {
      state = 'pending';
      result = 'failed';
      next = at;
    }
  }
  return { state, result, next, error };
}

/** True when the failure (or its cause) is a refusal of the SSRF guard. */
function isSsrfBlock(err: unknown): boolean {
  const code = (e: unknown): unknown => (e as { code?: unknown } | null)?.code;
  return code(err) === 'SSRF_BLOCKED' || code((err as { cause?: unknown } | null)?.cause) === 'SSRF_BLOCKED';
}

/** Codes of a host name that does not resolve (getaddrinfo / c-ares). */
const DNS_FAILURES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_NODATA', 'ENODATA', 'ESERVFAIL', 'EREFUSED']);

/**
 * The one recorded error for a host that is not public OR does not resolve: telling the two
 * apart would let an account holder probe which internal host names exist.
 */
export const DESTINATION_NOT_ALLOWED = 'destination_not_allowed: the callback host is not a reachable public address';

/** True when the failure (or its cause) is a failed host-name lookup. */
function isDnsFailure(err: unknown): boolean {
  const code = (e: unknown): unknown => (e as { code?: unknown } | null)?.code;
  const c = code(err) ?? code((err as { cause?: unknown } | null)?.cause);
  return typeof c === 'string' && DNS_FAILURES.has(c);
}

/** A short, secret-free description of a request failure (SSRF refusals and DNS failures as one outcome). */
function describeError(err: unknown): string {
  if (isSsrfBlock(err) || isDnsFailure(err)) return DESTINATION_NOT_ALLOWED;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const cause = (err as { cause?: unknown }).cause;
    let s = typeof code === 'string' ? `${code}: ${err.message}` : err.message;
    if (cause instanceof Error && !s.includes(cause.message)) s += ` (${cause.message})`;
    return s.slice(0, 500);
  }
  return String(err).slice(0, 500);
}
