/**
 * The console's client of the sidecar's public `/v1` API (same origin, so the
 * session cookie goes along by itself). Every state change sends
 * `X-Service-CSRF` with the `service_csrf` cookie, read from `document.cookie`
 * at the moment of the call — so the token the server rotated at sign-in or
 * at the last refresh is always the one sent. Refusals become {@link ApiError}
 * with the API's code, message and extra members; a `401 auth_required`
 * reports the session as expired (after one retry when another tab has just
 * refreshed the session). Nothing is ever written to web storage.
 */

/** The CSRF cookie the page reads (double submit; docs/api.md). */
export const CSRF_COOKIE = 'service_csrf';
/** The header that repeats it. */
export const CSRF_HEADER = 'X-Service-CSRF';

/** A refusal of the API (`{error:{code,message,status,...}}`), or `network_error` when the sidecar is unreachable. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly code: string;
  readonly status: number;
  /** The error's other members (`field`, `tries_left`, `retry_after`, `not_requested`, ...). */
  readonly details: Record<string, unknown>;
  constructor(code: string, status: number, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.code = code;
    this.status = status;
    this.details = details;
  }
}

/** The value of a cookie the page can read, or null. */
export function readCookie(name: string): string | null {
  for (const part of document.cookie.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return null;
}

let expiredHandler: (() => void) | null = null;

/** Sets what happens when a call finds the session gone (the app returns to sign-in). */
export function onSessionExpired(fn: (() => void) | null): void {
  expiredHandler = fn;
}

/** Options of {@link api}. */
export interface CallOptions {
  /** A 401 is an answer, not an expired session (sign-in, the first session read). */
  anonymous?: boolean;
  /** Query parameters; undefined and empty values are left out. */
  query?: Record<string, string | undefined>;
}

/** Calls the API; resolves with the JSON body of a 2xx answer, rejects with {@link ApiError}. */
export async function api<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH', path: string, body?: unknown, o: CallOptions = {}, retried = false): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const csrf = readCookie(CSRF_COOKIE);
  if (method !== 'GET' && csrf) headers[CSRF_HEADER] = csrf;
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(o.query ?? {})) if (v !== undefined && v !== '') qs.set(k, v);
  const url = qs.size ? `${path}?${qs}` : path;
  let res: Response;
  try {
    res = await fetch(url, {
      method, headers, credentials: 'same-origin', cache: 'no-store',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiError('network_error', 0, 'The sidecar could not be reached. Check the connection and try again.');
  }
  const text = await res.text();
  let parsed: unknown = undefined;
  try { parsed = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
  if (res.ok) return parsed as T;
  const e = (parsed as { error?: Record<string, unknown> } | undefined)?.error;
  const { code, message, status: _s, ...details } = e ?? {};
  const err = new ApiError(typeof code === 'string' ? code : `http_${res.status}`, res.status,
    typeof message === 'string' ? message : `The sidecar answered HTTP ${res.status}.`, details);
  if (res.status === 401 && err.code === 'auth_required' && !o.anonymous) {
    // Refused before any handler ran, so a retry is safe: another tab may have refreshed the session.
    if (!retried && readCookie(CSRF_COOKIE) !== csrf) return api<T>(method, path, body, o, true);
    expiredHandler?.();
  }
  throw err;
}

/** A human sentence for an error, with the API's message as the API gives it. */
export function describeError(err: unknown): string {
  if (!(err instanceof ApiError)) return err instanceof Error && err.message ? err.message : 'Something went wrong in the console; reload the page.';
  if (err.code === 'csrf_required' || err.code === 'csrf_invalid') {
    return `The security check of this change failed (${err.code}): ${err.message} Sign out and sign in again, then retry.`;
  }
  if (err.code === 'rate_limited' && typeof err.details.retry_after === 'number') {
    return `${err.message} (wait ${err.details.retry_after} s)`;
  }
  return `${err.message}${err.code.startsWith('http_') || err.code === 'network_error' ? '' : ` (${err.code})`}`;
}
