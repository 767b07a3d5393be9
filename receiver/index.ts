/**
 * `agent-authz/receiver`: verify and deduplicate the service's signed
 * webhooks in your application (spec 6.3). See docs/webhooks.md.
 *
 * ```ts
 * import http from 'node:http';
 * import { createWebhookReceiver, createNodeWebhookHandler } from 'agent-authz/receiver';
 *
 * const receiver = createWebhookReceiver({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   dedupFile: './webhook-deliveries.db',
 *   onEvent: async (event) => { await saveEvent(event); },   // store/queue only
 * });
 * http.createServer(createNodeWebhookHandler(receiver)).listen(8080);
 * ```
 */
export { createWebhookReceiver, headerValue, receiverError } from './core.ts';
export type {
  ReceiverErrorCode, WebhookContext, WebhookHeaders, WebhookReceiver, WebhookReceiverOptions, WebhookRequest, WebhookResponse,
} from './core.ts';
export { MemoryDedupStore } from './dedup.ts';
export type { DedupStore } from './dedup.ts';
export { SqliteDedupStore } from './dedup-sqlite.ts';
export type { SqliteDedupOptions } from './dedup-sqlite.ts';
export { createNodeWebhookHandler, webhookFastifyPlugin, readRawBody, DEFAULT_MAX_BODY_BYTES } from './http.ts';
export type { AdapterOptions } from './http.ts';
export {
  WEBHOOK_EVENT_TYPES, WEBHOOK_HEADERS, WEBHOOK_TOLERANCE_SECONDS, WEBHOOK_USER_AGENT,
  isTimestampFresh, isWebhookEventType, signWebhook, verifyWebhookSignature,
} from '../src/webhooks.ts';
export type {
  ConnectionCreatedEvent, ConnectionKeyRotatedEvent, ConnectionRemovedEvent, DelegationApprovedEvent,
  DelegationDeniedEvent, DelegationRevokedEvent, WebhookEnvelope, WebhookEvent, WebhookEventType,
} from '../src/webhooks.ts';
