/**
 * Webhook signing and the event payload types (spec section 6).
 *
 * Pure: no I/O. Used by the sidecar's delivery worker to sign and by the
 * receiver helper (`agent-authz/receiver`) to verify. See docs/webhooks.md.
 *
 * Signature rule (spec 6.1):
 *   X-Service-Signature = lowercase hex( HMAC-SHA256(
 *       key     = UTF-8 bytes of the webhook_signing_secret string,
 *       message = timestamp + "." + raw request body bytes ) )
 * where timestamp is the decimal Unix-seconds value sent in X-Service-Timestamp.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Header names of a delivery (as sent; HTTP header names are case-insensitive).
 *
 * ```ts
 * const signature = req.headers[WEBHOOK_HEADERS.signature.toLowerCase()];
 * ```
 */
export const WEBHOOK_HEADERS = {
  contentType: 'Content-Type',
  signature: 'X-Service-Signature',
  timestamp: 'X-Service-Timestamp',
  deliveryId: 'X-Service-Delivery-ID',
  userAgent: 'User-Agent',
} as const;

/** `User-Agent` of every delivery. */
export const WEBHOOK_USER_AGENT = 'agent-authz-webhooks/1';

/**
 * Receivers accept a timestamp only when |now − timestamp| is under this many seconds (spec 6.1, 8).
 *
 * ```ts
 * isTimestampFresh(timestamp, Date.now(), WEBHOOK_TOLERANCE_SECONDS);   // the default tolerance
 * ```
 */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** The event names and their type guard (webhook-events.ts). */
export { WEBHOOK_EVENT_TYPES, isWebhookEventType } from './webhook-events.js';
export type { WebhookEventType } from './webhook-events.js';

/** The event bodies (webhook-events.ts), re-exported so receivers import one module. */
export type {
  WebhookEnvelope, WebhookEvent,
  ConnectionCreatedEvent, ConnectionKeyRotatedEvent, ConnectionRemovedEvent,
  DelegationApprovedEvent, DelegationDeniedEvent, DelegationRevokedEvent,
  ApprovalAction, ApprovalEventBase, ApprovalRequestedEvent, ApprovalGrantedEvent, ApprovalDeniedEvent, ApprovalExpiredEvent,
} from './webhook-events.js';

const toBytes = (v: string | Uint8Array): Uint8Array => (typeof v === 'string' ? Buffer.from(v, 'utf8') : v);

/** The signed message: `timestamp + "." + rawBody` as bytes. */
function hmacOf(secret: string | Uint8Array, timestampSeconds: number | string, rawBody: string | Uint8Array): Buffer {
  return createHmac('sha256', toBytes(secret))
    .update(`${timestampSeconds}.`, 'utf8')
    .update(toBytes(rawBody))
    .digest();
}

/**
 * The `X-Service-Signature` value: lowercase hex HMAC-SHA256 over
 * `timestamp + "." + rawBody` keyed with the UTF-8 bytes of `secret`.
 * Useful to test your own receiver with a signed request.
 *
 * ```ts
 * const ts = Math.floor(Date.now() / 1000);
 * const headers = { 'x-service-timestamp': String(ts), 'x-service-signature': signWebhook(secret, ts, rawBody) };
 * ```
 */
export function signWebhook(secret: string | Uint8Array, timestampSeconds: number, rawBody: string | Uint8Array): string {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) throw new TypeError('timestamp must be non-negative integer seconds');
  return hmacOf(secret, timestampSeconds, rawBody).toString('hex');
}

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const TIMESTAMP = /^[0-9]{1,15}$/;

/**
 * Checks a signature header in constant time. `timestamp` is the header text
 * exactly as received (decimal seconds); `secret` may be a list (rotation).
 * Returns false for any malformed input. Does not check freshness: see
 * {@link isTimestampFresh}.
 *
 * ```ts
 * const ok = verifyWebhookSignature([secret, oldSecret], req.headers['x-service-timestamp'], rawBody, req.headers['x-service-signature'])
 *   && isTimestampFresh(req.headers['x-service-timestamp'], Date.now());
 * ```
 */
export function verifyWebhookSignature(
  secret: string | Uint8Array | readonly (string | Uint8Array)[],
  timestamp: string,
  rawBody: string | Uint8Array,
  signature: string,
): boolean {
  if (!TIMESTAMP.test(timestamp) || !HEX_SHA256.test(signature)) return false;
  const given = Buffer.from(signature, 'hex');
  const secrets = Array.isArray(secret) ? (secret as readonly (string | Uint8Array)[]) : [secret as string | Uint8Array];
  let ok = false;
  for (const s of secrets) {
    // Check every secret (no early exit) so timing does not reveal which one matched.
    if (timingSafeEqual(hmacOf(s, timestamp, rawBody), given)) ok = true;
  }
  return ok;
}

/**
 * True when `timestamp` (decimal Unix seconds) is less than `toleranceSeconds`
 * away from `nowMs`, in either direction.
 *
 * ```ts
 * isTimestampFresh(String(Math.floor(Date.now() / 1000) - 60), Date.now());   // true (one minute old)
 * ```
 */
export function isTimestampFresh(timestamp: string, nowMs: number, toleranceSeconds = WEBHOOK_TOLERANCE_SECONDS): boolean {
  if (!TIMESTAMP.test(timestamp)) return false;
  return Math.abs(nowMs / 1000 - Number(timestamp)) < toleranceSeconds;
}
