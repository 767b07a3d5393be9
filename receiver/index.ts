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
export { createWebhookReceiver, headerValue, receiverError } from './core.js';
export type {
  ReceiverErrorCode, WebhookContext, WebhookHeaders, WebhookReceiver, WebhookReceiverOptions, WebhookRequest, WebhookResponse,
} from './core.js';
export { MemoryDedupStore } from './dedup.js';
export type { DedupStore } from './dedup.js';
export { SqliteDedupStore } from './dedup-sqlite.js';
export type { SqliteDedupOptions } from './dedup-sqlite.js';
export { createNodeWebhookHandler, webhookFastifyPlugin, readRawBody, DEFAULT_MAX_BODY_BYTES } from './http.js';
export type { AdapterOptions } from './http.js';
export {
  WEBHOOK_EVENT_TYPES, WEBHOOK_HEADERS, WEBHOOK_TOLERANCE_SECONDS, WEBHOOK_USER_AGENT,
  isTimestampFresh, isWebhookEventType, signWebhook, verifyWebhookSignature,
} from '../src/webhooks.js';
export type {
  ApprovalAction, ApprovalDeniedEvent, ApprovalEventBase, ApprovalExpiredEvent, ApprovalGrantedEvent, ApprovalRequestedEvent,
  ConnectionCreatedEvent, ConnectionKeyRotatedEvent, ConnectionRemovedEvent, DelegationApprovedEvent,
  DelegationDeniedEvent, DelegationRevokedEvent, WebhookEnvelope, WebhookEvent, WebhookEventType,
} from '../src/webhooks.js';
