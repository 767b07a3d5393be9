/**
 * `agent-authz/receiver`: verify and deduplicate the service's signed
 * webhooks in your application (spec 6.3). See docs/webhooks.md.
 *
 * ```ts
 * import http from 'node:http';
 * import { createWebhookReceiver, createNodeWebhookHandler } from 'agent-authz/receiver';
 * import { SqliteDedupStore } from 'agent-authz/receiver/sqlite';
 *
 * const receiver = createWebhookReceiver({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   dedup: new SqliteDedupStore({ file: './webhook-deliveries.db' }),
 *   onEvent: async (event) => { await saveEvent(event); },   // store/queue only
 * });
 * http.createServer(createNodeWebhookHandler(receiver)).listen(8080);
 * ```
 *
 * This entry point loads no native addon: the SQLite dedup store has its own,
 * `agent-authz/receiver/sqlite`.
 */
export { createWebhookReceiver } from './core.js';
export type {
  ReceiverErrorCode, WebhookContext, WebhookHeaders, WebhookReceiver, WebhookReceiverOptions, WebhookRequest, WebhookResponse,
} from './core.js';
export { MemoryDedupStore } from './dedup.js';
export type { DedupStore } from './dedup.js';
export { createNodeWebhookHandler, webhookFastifyPlugin, DEFAULT_MAX_BODY_BYTES } from './http.js';
export type { AdapterOptions, FastifyWebhookOptions } from './http.js';
export { WEBHOOK_EVENT_TYPES, isWebhookEventType, signWebhook } from '../src/webhooks.js';
export type {
  ApprovalAction, ApprovalDeniedEvent, ApprovalEventBase, ApprovalExpiredEvent, ApprovalGrantedEvent, ApprovalRequestedEvent,
  ConnectionCreatedEvent, ConnectionKeyRotatedEvent, ConnectionRemovedEvent, DelegationApprovedEvent,
  DelegationDeniedEvent, DelegationRevokedEvent, WebhookEnvelope, WebhookEvent, WebhookEventType,
} from '../src/webhooks.js';
