/**
 * Lifecycle events for the webhook outbox: builds the event body (spec 6.2
 * fields plus `delivery_id` and `occurred_at`) and seals it, ready to be
 * enqueued in the same transaction as the state change it describes.
 */
import crypto from 'node:crypto';
import type { ServiceContext } from './context.js';
import type { OutboxEventInput } from './store/types.js';
import { AAD } from './secrets.js';
import type { WebhookEventType } from '../src/webhooks.js';

/** Builds one sealed outbox event. */
export function buildEvent(ctx: ServiceContext, e: {
  type: WebhookEventType; accountId: string; platformId: string; connectionId: string | null; fields: Record<string, unknown>; now: number;
}): OutboxEventInput {
  const id = crypto.randomUUID();
  const body = JSON.stringify({ event: e.type, delivery_id: id, occurred_at: new Date(e.now).toISOString(), ...e.fields });
  return {
    id, accountId: e.accountId, platformId: e.platformId, connectionId: e.connectionId, eventType: e.type,
    bodyEnc: ctx.box.seal(new TextEncoder().encode(body), AAD.outboxBody(id)), createdAt: e.now,
  };
}
