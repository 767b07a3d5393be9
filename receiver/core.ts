/**
 * Framework-agnostic core of the webhook receiver helper (spec 6.3).
 *
 * `handleWebhook({ rawBody, headers })` answers, in this order:
 *
 * | Check                                                          | Answer |
 * |----------------------------------------------------------------|--------|
 * | signature or timestamp header missing/malformed, or the signature does not verify | 401 `invalid_signature` |
 * | timestamp 5 minutes or more away from now (either direction)   | 401 `stale_timestamp` |
 * | body not a JSON object with string `event` and `delivery_id`   | 400 `invalid_payload` |
 * | `X-Service-Delivery-ID` missing or not equal to the body's `delivery_id` | 400 `delivery_id_mismatch` |
 * | the same delivery id is being processed right now (concurrent retry) | 503 `delivery_in_progress` |
 * | the dedup store fails                                          | 503 `dedup_unavailable` |
 * | the id was processed before                                    | 204 (handler not called) |
 * | the handler throws / rejects                                   | 500 `handler_failed` (id not recorded: the retry is processed) |
 * | the id cannot be recorded after the handler succeeded          | 503 `dedup_unavailable` (the retry runs the handler again) |
 * | otherwise                                                      | 204 |
 *
 * The delivery id is recorded only after the handler succeeded, so a failed
 * handler leads to a retry that is processed. Processing is therefore
 * at-least-once with a narrow window (handler succeeded, then recording the
 * id failed or the process died): make the handler idempotent by delivery id,
 * or record the id in your own transaction (custom {@link DedupStore}).
 *
 * 400 answers are retried by the service like any non-2xx and end dead-
 * lettered; they mean a sender bug or a forged request with a valid signature
 * (which cannot happen without the secret).
 */
import { isTimestampFresh, isWebhookEventType, verifyWebhookSignature } from '../src/webhooks.js';
import type { WebhookEvent } from '../src/webhooks.js';
import type { DedupStore } from './dedup.js';
import { resolveReceiverOptions } from './options.js';
import { headerValue } from './headers.js';
import type { WebhookHeaders } from './headers.js';

export type { WebhookHeaders } from './headers.js';

/**
 * Input of {@link WebhookReceiver.handleWebhook}: the raw body bytes (the signature covers them
 * exactly; never a re-serialized JSON object) and the headers.
 *
 * ```ts
 * const req: WebhookRequest = { rawBody: Buffer.from(await request.arrayBuffer()), headers: request.headers };
 * ```
 */
export interface WebhookRequest {
  /** The request body exactly as received (bytes; a string is taken as UTF-8). */
  rawBody: Uint8Array | string;
  headers: WebhookHeaders;
}

/**
 * Error codes the receiver answers with (receiver side; not the service's error table).
 *
 * ```ts
 * if (answer.body?.error.code === 'handler_failed') metrics.webhookFailures.inc();
 * ```
 */
export type ReceiverErrorCode =
  | 'invalid_signature'
  | 'stale_timestamp'
  | 'invalid_payload'
  | 'delivery_id_mismatch'
  | 'delivery_in_progress'
  | 'dedup_unavailable'
  | 'handler_failed'
  | 'method_not_allowed'
  | 'body_too_large';

/**
 * The answer to send. `body` is absent for 204.
 *
 * ```ts
 * const { status, headers, body } = await receiver.handleWebhook({ rawBody, headers: req.headers });
 * res.writeHead(status, { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) }).end(body ? JSON.stringify(body) : undefined);
 * ```
 */
export interface WebhookResponse {
  status: number;
  headers?: Record<string, string>;
  body?: { error: { code: ReceiverErrorCode; message: string; status: number } };
}

/**
 * Context passed to the handlers.
 *
 * ```ts
 * onEvent: async (event, { deliveryId, timestamp }) => { await inbox.insert(deliveryId, timestamp, event); },
 * ```
 */
export interface WebhookContext {
  deliveryId: string;
  /** The `X-Service-Timestamp` of this attempt (Unix seconds). */
  timestamp: number;
}

/**
 * Options of {@link createWebhookReceiver}. Validated once when the receiver
 * is created: an unknown key, a value of the wrong type or a missing required
 * option throws a `TypeError` naming it (`receiver options: onEvent: ...`).
 *
 * ```ts
 * const options: WebhookReceiverOptions = {
 *   secret: [process.env.WEBHOOK_SECRET!, process.env.WEBHOOK_SECRET_OLD!], // rotation: any may match
 *   dedup: new SqliteDedupStore({ file: './webhook-deliveries.db' }),       // 'agent-authz/receiver/sqlite'
 *   onEvent: async (event, { deliveryId }) => { await queue.push(deliveryId, event); },
 * };
 * ```
 */
export interface WebhookReceiverOptions {
  /** The `webhook_signing_secret` shown at registration; a list accepts any of them (rotation). */
  secret: string | readonly string[];
  /**
   * Stores or queues the event (update local state only; no business logic
   * here — spec 6.3). Resolve after the event is durably stored; throw to make
   * the service retry.
   */
  onEvent: (event: WebhookEvent, ctx: WebhookContext) => void | Promise<void>;
  /**
   * Events of a kind this library version does not know. Default: acknowledged
   * (204) and recorded without processing.
   */
  onUnknownEvent?: (body: Record<string, unknown>, ctx: WebhookContext) => void | Promise<void>;
  /**
   * Where processed delivery ids are remembered (required). Spec 6.3 asks for
   * a durable store: `SqliteDedupStore` from `agent-authz/receiver/sqlite`, or
   * your own {@link DedupStore} on your database (record the id in the same
   * transaction as the event). {@link MemoryDedupStore} forgets on restart:
   * tests and development only. `receiver.close()` closes it.
   */
  dedup: DedupStore;
  /** Timestamp tolerance in seconds, 1 to 3600 (a difference of this much or more is refused). Default 300. */
  toleranceSeconds?: number;
  /** Clock in Unix milliseconds. Default `Date.now`. */
  clock?: () => number;
  /** Observer of local failures (handler or store errors), for logging. */
  onError?: (err: unknown, ctx: { deliveryId: string; stage: 'dedup' | 'handler' | 'record' }) => void;
}

/**
 * A configured receiver, from {@link createWebhookReceiver}.
 *
 * ```ts
 * const { status, headers, body } = await receiver.handleWebhook({ rawBody, headers: req.headers });
 * // ... send them; on shutdown:
 * await receiver.close();
 * ```
 */
export interface WebhookReceiver {
  /** Verifies, deduplicates and dispatches one delivery; never throws. */
  handleWebhook(req: WebhookRequest): Promise<WebhookResponse>;
  /** Closes the dedup store (once; later calls do nothing). Deliveries after it answer 503 when the store is closed. */
  close(): Promise<void>;
}

const MESSAGES: Record<ReceiverErrorCode, string> = {
  invalid_signature: 'The webhook signature is missing or does not verify.',
  stale_timestamp: 'The webhook timestamp is outside the accepted window.',
  invalid_payload: 'The webhook body is not a valid event.',
  delivery_id_mismatch: 'X-Service-Delivery-ID does not match the body delivery_id.',
  delivery_in_progress: 'This delivery is being processed; retry later.',
  dedup_unavailable: 'The delivery log is unavailable; retry later.',
  handler_failed: 'The event could not be stored; retry later.',
  method_not_allowed: 'Use POST.',
  body_too_large: 'The webhook body is too large.',
};

const STATUS: Record<ReceiverErrorCode, number> = {
  invalid_signature: 401,
  stale_timestamp: 401,
  invalid_payload: 400,
  delivery_id_mismatch: 400,
  delivery_in_progress: 503,
  dedup_unavailable: 503,
  handler_failed: 500,
  method_not_allowed: 405,
  body_too_large: 413,
};

/** The error answer for a receiver code. */
export function receiverError(code: ReceiverErrorCode, headers?: Record<string, string>): WebhookResponse {
  const status = STATUS[code];
  return { status, ...(headers ? { headers } : {}), body: { error: { code, message: MESSAGES[code], status } } };
}

const NO_CONTENT: WebhookResponse = { status: 204 };
const MAX_ID_LENGTH = 200;

/**
 * Creates a receiver: verifies, deduplicates and dispatches the service's
 * signed webhooks (spec 6.3). Serve it with {@link createNodeWebhookHandler},
 * `webhookFastifyPlugin`, or call `handleWebhook` from any framework.
 *
 * ```ts
 * import { createWebhookReceiver } from 'agent-authz/receiver';
 * import { SqliteDedupStore } from 'agent-authz/receiver/sqlite';
 *
 * const receiver = createWebhookReceiver({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   dedup: new SqliteDedupStore({ file: './webhook-deliveries.db' }),
 *   onEvent: async (event) => { await saveEvent(event); },   // store/queue only
 * });
 * ```
 *
 * @throws TypeError naming the option (`receiver options: dedup: is required ...`) on misuse.
 */
export function createWebhookReceiver(opts: WebhookReceiverOptions): WebhookReceiver {
  const { secrets, dedup, toleranceSeconds: tolerance } = resolveReceiverOptions(opts);
  const clock = opts.clock ?? Date.now;
  const processing = new Set<string>();
  let closing: Promise<void> | undefined;
  const report = (err: unknown, deliveryId: string, stage: 'dedup' | 'handler' | 'record'): void => {
    try { opts.onError?.(err, { deliveryId, stage }); } catch { /* the observer must not change the answer */ }
  };

  async function handleWebhook(req: WebhookRequest): Promise<WebhookResponse> {
    const raw = typeof req.rawBody === 'string' ? Buffer.from(req.rawBody, 'utf8') : req.rawBody;
    const signature = headerValue(req.headers, 'x-service-signature');
    const timestamp = headerValue(req.headers, 'x-service-timestamp');
    if (signature === undefined || timestamp === undefined) return receiverError('invalid_signature');
    if (!verifyWebhookSignature(secrets, timestamp, raw, signature)) return receiverError('invalid_signature');
    if (!isTimestampFresh(timestamp, clock(), tolerance)) return receiverError('stale_timestamp');

    let body: unknown;
    try {
      body = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));
    } catch {
      return receiverError('invalid_payload');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return receiverError('invalid_payload');
    const b = body as Record<string, unknown>;
    const id = b['delivery_id'];
    if (typeof b['event'] !== 'string' || typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
      return receiverError('invalid_payload');
    }
    if (headerValue(req.headers, 'x-service-delivery-id') !== id) return receiverError('delivery_id_mismatch');

    if (processing.has(id)) return receiverError('delivery_in_progress', { 'Retry-After': '5' });
    processing.add(id);
    try {
      try {
        if (await dedup.has(id)) return NO_CONTENT;
      } catch (err) {
        report(err, id, 'dedup');
        return receiverError('dedup_unavailable');
      }
      const ctx: WebhookContext = { deliveryId: id, timestamp: Number(timestamp) };
      try {
        if (isWebhookEventType(b['event'])) await opts.onEvent(b as unknown as WebhookEvent, ctx);
        else await opts.onUnknownEvent?.(b, ctx);
      } catch (err) {
        report(err, id, 'handler');
        return receiverError('handler_failed');
      }
      try {
        await dedup.add(id, clock());
      } catch (err) {
        report(err, id, 'record');
        return receiverError('dedup_unavailable');
      }
      return NO_CONTENT;
    } finally {
      processing.delete(id);
    }
  }

  return {
    handleWebhook,
    close() {
      closing ??= (async () => { await dedup.close?.(); })();
      return closing;
    },
  };
}
