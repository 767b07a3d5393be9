/**
 * Webhook account operations the spec leaves out: changing a platform's
 * callback address, listing deliveries with their attempts and last error,
 * and asking for a redelivery (same delivery id and body).
 */
import { defineRoute, mount, op, pageLimit } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { Delivery } from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import type { DeliveryRecord } from '../store/types.js';
import { NoBody, currentPlatformView, iso, ownedPlatform, parsePage } from '../http/resources.js';
import { checkCallbackUrl } from './registration.js';

/** Delivery list page sizes. */
export const DELIVERY_LIMITS = { default: 25, max: 200 } as const;
const STATES = ['pending', 'delivered', 'dead', 'disabled'];

const CallbackBody = Type.Object(
  { callback_url: Type.Union([Type.String({ maxLength: 2048 }), Type.Null()]) }, { additionalProperties: false });
const ListQuery = Type.Object({
  platform_id: Type.Optional(Type.String({ maxLength: 100 })),
  state: Type.Optional(Type.String({ maxLength: 16 })),
  limit: Type.Optional(Type.String({ maxLength: 10 })),
  cursor: Type.Optional(Type.String({ maxLength: 32 })),
}, { additionalProperties: false });
const IdParam = (name: string) => Type.Object({ [name]: Type.String({ maxLength: 100 }) });

function deliveryView(d: DeliveryRecord): Static<typeof Delivery> {
  return {
    delivery_id: d.id, platform_id: d.platformId, connection_id: d.connectionId, event: d.eventType, state: d.state,
    attempts: d.attempts, next_attempt_at: d.state === 'pending' ? iso(d.nextAttemptAt) : null,
      last_status: d.lastStatus,
    last_error: d.lastError, delivered_at: iso(d.deliveredAt), created_at: iso(d.createdAt),
  };
}

/** The routes of this file, each defined once (api/route.ts). */
export const WEBHOOKS_ROUTES = {
  setCallbackUrl: defineRoute({
    method: 'PUT', url: '/v1/service/platforms/:platform_id/callback', auth: 'session_csrf',
    permission: 'platforms_manage',
    schema: { params: IdParam('platform_id'), body: CallbackBody, tags: ['webhooks'] },
    operation: op('setCallbackUrl', 'Set the webhook callback address',
      'Sets or clears (null) where webhooks go; re-enables a disabled callback. A published platform keeps one.',
      S.Platform, ['platform_not_found', 'invalid_callback_url', 'callback_url_required']),
  }),
  listWebhookDeliveries: defineRoute({
    method: 'GET', url: '/v1/service/webhooks/deliveries', auth: 'session', permission: 'audit_read',
    schema: { querystring: ListQuery, tags: ['webhooks'] },
    operation: {
      ...op('listWebhookDeliveries', 'List webhook deliveries',
        'Newest first, with cursor pagination (`limit` 1–200, default 25) and filters `platform_id` and `state`.',
          S.DeliveryPage),
      query: pageLimit(DELIVERY_LIMITS),
    },
  }),
  getWebhookDelivery: defineRoute({
    method: 'GET', url: '/v1/service/webhooks/deliveries/:delivery_id', auth: 'session', permission: 'audit_read',
    schema: { params: IdParam('delivery_id'), tags: ['webhooks'] },
    operation: op('getWebhookDelivery', 'Read a webhook delivery', 'One delivery with every attempt.', S.DeliveryDetail,
      ['delivery_not_found']),
  }),
  redeliverWebhook: defineRoute({
    method: 'POST', url: '/v1/service/webhooks/deliveries/:delivery_id/redeliver', auth: 'session_csrf',
    permission: 'platforms_manage',
    schema: { body: NoBody, params: IdParam('delivery_id'), tags: ['webhooks'] },
    operation: op('redeliverWebhook', 'Redeliver a webhook',
      'Queues the same delivery (same id and body) again.', S.Redelivery, [
        'delivery_not_found', 'callback_not_configured']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the webhook account routes. */
export async function registerWebhookRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, WEBHOOKS_ROUTES.setCallbackUrl, async (request) => {
    const accountId = request.session!.accountId;
    const p = await ownedPlatform(ctx, accountId, (request.params as { platform_id: string }).platform_id);
    const url = (request.body as { callback_url: string | null }).callback_url;
    if (url !== null) checkCallbackUrl(ctx, url);
    if (!(await ctx.store.platforms.setCallbackUrl(p.id, url))) {
      throw new ServiceError('callback_url_required', 'A published platform keeps a callback URL; unpublish it first.');
    }
    ctx.nudgeWebhooks();
    return currentPlatformView(ctx, accountId, p.id);
  });

  mount(app, WEBHOOKS_ROUTES.listWebhookDeliveries, async (request) => {
    const q = request.query as { platform_id?: string; state?: string; limit?: string; cursor?: string };
    const { limit, before } = parsePage(q, DELIVERY_LIMITS);
    if (q.state !== undefined && !STATES.includes(q.state)) throw new ServiceError(
      'invalid_request', `state must be one of ${STATES.join(', ')}.`, { field: 'querystring.state' });
    const rows = await ctx.store.outbox.listDeliveries({
      accountId: request.session!.accountId, limit: limit + 1,
      ...(q.platform_id ? { platformId: q.platform_id } : {}), ...(q.state ? { state: q.state } : {}), ...(
        before !== undefined ? { before } : {}),
    });
    const page = rows.slice(0, limit);
    return { deliveries: page.map(deliveryView), next_cursor: rows.length > limit ? String(page[
      page.length - 1]!.seq) : null };
  });

  mount(app, WEBHOOKS_ROUTES.getWebhookDelivery, async (request) => {
    const d = await ctx.store.outbox.getDelivery((request.params as { delivery_id: string }).delivery_id);
    if (!d || d.accountId !== request.session!.accountId) throw new ServiceError('delivery_not_found');
    const attempts = await ctx.store.outbox.listAttempts(d.id);
    return {
      ...deliveryView(d),
      attempt_history: attempts.map(
        (a) => ({ attempt: a.attempt, attempted_at: iso(a.attemptedAt), status: a.status, error: a.error,
          duration_ms: a.durationMs })),
    };
  });

  mount(app, WEBHOOKS_ROUTES.redeliverWebhook, async (request) => {
    const d = await ctx.store.outbox.getDelivery((request.params as { delivery_id: string }).delivery_id);
    if (!d || d.accountId !== request.session!.accountId) throw new ServiceError('delivery_not_found');
    const p = await ctx.store.platforms.getPlatform(d.platformId);
    if (!p?.callbackUrl) throw new ServiceError('callback_not_configured');
    await ctx.store.outbox.redeliver(d.id, ctx.clock());
    ctx.nudgeWebhooks();
    return { delivery_id: d.id, state: 'pending', redelivery_requested_at: iso(ctx.clock()) };
  });
}
