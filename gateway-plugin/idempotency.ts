/**
 * The gateway's side of the idempotency ledger (docs/gateway.md#idempotency): which requests need
 * an `Idempotency-Key`, the key and the request hash sent to verify, the ledger member of verify's
 * allow, and the recorded answer (captured on the way to the agent, replayed to repeats).
 *
 * - A route's `idempotency` setting: `required` (a mutating request without a valid key is 400
 *   `idempotency_key_required`), `optional` (a key is used when sent) or `off` (the header is
 *   forwarded untouched). Default: `required` for a route whose scope moves money (`payments:*`),
 *   `off` otherwise. Only POST, PUT, PATCH and DELETE are keyed; MCP, A2A and public routes never.
 * - The request hash is SHA-256 of `METHOD \n path \n query \n SHA-256(body)` (hex), so the same
 *   key with another method, path, query or body is another request (422 `idempotency_key_reused`).
 * - A claimed request's answer is recorded (status, headers, body up to
 *   `IDEMPOTENCY_LIMITS.bodyBytes`; a larger body is recorded as omitted) before the agent's
 *   response ends, so a repeat sent after the answer replays it.
 */
import { createHash } from 'node:crypto';
import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';
import { ServiceError } from '../src/errors.js';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_LIMITS } from '../src/protocol.js';
import type { RecordedResponse, VerifyIdempotency } from '../src/protocol.js';
import { fail } from './validate.js';

/** A route's idempotency setting (see the file header). */
export type IdempotencyMode = 'required' | 'optional' | 'off';

/** The methods that are keyed. */
export const KEYED_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** What verify's allow says about the ledger: forward and record under `claimId`, or replay `response`. */
export type LedgerAnswer =
  | { readonly status: 'claimed'; readonly claimId: string }
  | { readonly status: 'replay'; readonly response: RecordedResponse };

/** Validates a route's `idempotency` setting; `undefined` is the default for its scope. */
export function checkIdempotencyMode(
  value: unknown, path: string, route: { scope: string | undefined; rpc: boolean; shadow: boolean },
): IdempotencyMode {
  if (value === undefined) {
    return route.scope?.startsWith('payments:') === true && !route.rpc && !route.shadow ? 'required' : 'off';
  }
  if (value !== 'required' && value !== 'optional' && value !== 'off') {
    fail(path, 'must be "required", "optional" or "off"');
  }
  if (value === 'off') return value;
  if (route.scope === undefined) fail(path, 'a public route has no idempotency ledger (it needs a verified agent)');
  if (route.rpc) fail(path, 'is not supported on MCP and A2A routes');
  if (route.shadow) fail(path, 'needs mode "enforce" (a shadow route forwards refused requests)');
  return value;
}

/**
 * The request's `Idempotency-Key`, or undefined when it has none; more than one, or one that is
 * not 1–255 printable ASCII characters, is 400 `idempotency_key_required`.
 */
export function readIdempotencyKey(rawHeaders: readonly string[]): string | undefined {
  let key: string | undefined;
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== IDEMPOTENCY_KEY_HEADER) continue;
    seen += 1;
    key = rawHeaders[i + 1];
  }
  if (seen === 0) return undefined;
  if (seen > 1 || key === undefined || !IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new ServiceError('idempotency_key_required', 'Send exactly one Idempotency-Key header of 1-255 printable '
      + 'ASCII characters.');
  }
  return key;
}

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** The request hash of the ledger (see the file header). */
export function requestHash(method: string, path: string, query: string | undefined, body: Buffer): string {
  return sha256(`${method}\n${path}\n${query ?? ''}\n${sha256(body)}`);
}

/** The verify block for `key`; the lease covers the upstream's timeout and a margin. */
export function idempotencyBlock(key: string, hash: string, upstreamTimeoutMs: number): VerifyIdempotency {
  const lease = Math.ceil(upstreamTimeoutMs / 1000) + 30;
  return { key, request_sha256: hash, lease_seconds: Math.min(IDEMPOTENCY_LIMITS.maxLeaseSeconds, lease) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]{1,128}$/;
const HEADER_TEXT = /^[\t\x20-\x7e]*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The ledger member of a verify allow, checked before anything of it reaches a response; undefined when bad. */
export function parseLedgerAnswer(value: unknown): LedgerAnswer | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const v = value as { status?: unknown; claim_id?: unknown; response?: unknown };
  if (v.status === 'claimed') {
    const ok = typeof v.claim_id === 'string' && UUID.test(v.claim_id);
    return ok ? { status: 'claimed', claimId: v.claim_id as string } : undefined;
  }
  if (v.status !== 'replay' || v.response === null || typeof v.response !== 'object') return undefined;
  const r = v.response as Partial<Record<keyof RecordedResponse, unknown>>;
  if (typeof r.status !== 'number' || !Number.isInteger(r.status) || r.status < 200 || r.status > 599) return undefined;
  if (typeof r.body !== 'string' || !BASE64.test(r.body) || typeof r.body_omitted !== 'boolean') return undefined;
  if (!Array.isArray(r.headers) || r.headers.length > IDEMPOTENCY_LIMITS.headers) return undefined;
  const headers: [string, string][] = [];
  for (const h of r.headers as unknown[]) {
    if (!Array.isArray(h) || h.length !== 2) return undefined;
    const [name, text] = h as unknown[];
    if (typeof name !== 'string' || !HEADER_NAME.test(name) || typeof text !== 'string' || !HEADER_TEXT.test(text)) {
      return undefined;
    }
    headers.push([name, text]);
  }
  return { status: 'replay', response: { status: r.status, headers, body: r.body, body_omitted: r.body_omitted } };
}

/** Response headers not recorded: the connection's, the framing's, and the gateway's own per-request ones. */
const UNRECORDED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'x-request-id',
  'trailer', 'upgrade', 'proxy-connection']);

/** The headers of an answer as the ledger keeps them: lowercase names, bounded in count and length. */
export function recordedHeaders(
  headers: Readonly<Record<string, string | number | readonly string[] | undefined>>,
): [string, string][] {
  const out: [string, string][] = [];
  for (const [rawName, value] of Object.entries(headers)) {
    const name = rawName.toLowerCase();
    if (value === undefined || UNRECORDED.has(name) || !HEADER_NAME.test(name)) continue;
    for (const v of Array.isArray(value) ? value : [String(value)]) {
      if (out.length >= IDEMPOTENCY_LIMITS.headers) return out;
      if (v.length <= IDEMPOTENCY_LIMITS.headerValueLength && HEADER_TEXT.test(v)) out.push([name, v]);
    }
  }
  return out;
}

/**
 * A pass-through for a claimed request's answer: every chunk goes on at once, and a copy (up to the
 * ledger's body bound) is kept; before the stream ends, `record` is called with the body (or
 * `undefined` when it was over the bound) and the end waits for it.
 */
export class LedgerTap extends Transform {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  readonly #record: (body: Buffer | undefined) => Promise<void>;

  constructor(record: (body: Buffer | undefined) => Promise<void>) {
    super();
    this.#record = record;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#size += chunk.length;
    if (this.#size <= IDEMPOTENCY_LIMITS.bodyBytes) this.#chunks.push(chunk);
    else this.#chunks.length = 0;
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    const body = this.#size <= IDEMPOTENCY_LIMITS.bodyBytes ? Buffer.concat(this.#chunks) : undefined;
    this.#record(body).then(() => done(), () => done());
  }
}
