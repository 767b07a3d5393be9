/**
 * Audit read (spec endpoint 14) with cursor pagination and filters (type,
 * agent, time range, decision, reason, scope, certificate), and the usage read
 * (balance and counts), which the spec leaves out. The NDJSON export of a time
 * range is `audit-export.ts`.
 */
import { defineRoute, mount, op, pageLimit } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { AuditEvent } from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import type { AuditEventRecord } from '../store/types.js';
import { iso, parsePage } from '../http/resources.js';
import { VERIFY_PRICE_MICROS } from '../decide/billing.js';
import { DECISION_REASONS } from '../../src/decisions.js';
import { queryRange, registerAuditExportRoute } from './audit-export.js';

/** Audit page sizes. */
export const AUDIT_LIMITS = { default: 25, max: 200 } as const;
/** Audit event types that can be filtered on. */
export const AUDIT_EVENT_TYPES = [
  'proof.presented', 'proof.verified', 'proof.rejected', 'approval.requested', 'approval.granted', 'approval.denied',
    'approval.expired', 'access.evaluated',
  // administrative events of an organisation (docs/organisations.md)
  'organization.created', 'member.invited', 'member.joined', 'member.role_changed', 'member.removed', 'member.left',
  'invitation.revoked', 'workspace.switched', 'platform.updated', 'platform.created', 'platform.published',
  'platform.unpublished', 'domain.claimed', 'domain.verified', 'domain.lapsed', 'connection.created',
  'connection.removed', 'connection.key_rotated',
] as const;

const AuditQuery = Type.Object({
  limit: Type.Optional(Type.String({ maxLength: 10 })),
  cursor: Type.Optional(Type.String({ maxLength: 32 })),
  event_type: Type.Optional(Type.String({ maxLength: 64 })),
  agent_id: Type.Optional(Type.String({ maxLength: 100 })),
  from: Type.Optional(Type.String({ maxLength: 40, description: 'ISO 8601 time; events at or after it.' })),
  to: Type.Optional(Type.String({ maxLength: 40, description: 'ISO 8601 time; events before it.' })),
  decision: Type.Optional(Type.String({ maxLength: 16, description: '`allow` or `deny`.' })),
  reason: Type.Optional(Type.String({ maxLength: 64,
    description: 'A decision reason (docs/errors.md, "Decision reasons").' })),
  scope: Type.Optional(Type.String({ maxLength: 200, description: 'The required scope, exactly.' })),
  cert_id: Type.Optional(Type.String({ maxLength: 100 })),
}, { additionalProperties: false });

/** The audit read's query string. */
type AuditQueryString = {
  limit?: string; cursor?: string; event_type?: string; agent_id?: string; from?: string; to?: string;
  decision?: string; reason?: string; scope?: string; cert_id?: string };

/** The API view of an audit event. */
export function auditView(e: AuditEventRecord): Static<typeof AuditEvent> {
  return {
    event_id: e.id, event_type: e.eventType, occurred_at: iso(e.createdAt), connection_id: e.connectionId,
    agent_id: e.agentId, cert_id: e.certId, required_scope: e.requiredScope, details: e.details,
  };
}

const dollars = (micros: number): string => (micros / 1_000_000).toFixed(6);

/** The routes of this file, each defined once (api/route.ts). */
export const AUDIT_ROUTES = {
  listAuditEvents: defineRoute({
    method: 'GET', url: '/v1/service/audit/personal', auth: 'session', permission: 'audit_read',
    schema: { querystring: AuditQuery, tags: ['audit'] },
    operation: { ...op('listAuditEvents', 'Read audit events (spec 4.14)',
      'Newest first, with cursor pagination (`limit` 1–200, default 25) and filters: `event_type`, `agent_id`, '
        + '`from` and `to` (ISO 8601; from inclusive, to exclusive), `decision`, `reason`, `scope`, `cert_id`.',
          S.AuditPage), query: pageLimit(AUDIT_LIMITS) },
  }),
  getUsage: defineRoute({
    method: 'GET', url: '/v1/service/usage/personal', auth: 'session', permission: 'audit_read',
    schema: { tags: ['audit'] },
    operation: op('getUsage', 'Read credits and usage', 'The balance and the verify counts.', S.Usage),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the audit and usage routes. */
export async function registerAuditRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, AUDIT_ROUTES.listAuditEvents, async (request) => {
    const q = request.query as AuditQueryString;
    const { limit, before } = parsePage(q, AUDIT_LIMITS);
    if (q.event_type !== undefined && !(AUDIT_EVENT_TYPES as readonly string[]).includes(q.event_type)) {
      throw new ServiceError('invalid_request', `event_type must be one of ${AUDIT_EVENT_TYPES.join(', ')}.`, {
        field: 'querystring.event_type' });
    }
    if (q.decision !== undefined && q.decision !== 'allow' && q.decision !== 'deny') {
      throw new ServiceError('invalid_request', 'decision must be allow or deny.', { field: 'querystring.decision' });
    }
    if (q.reason !== undefined && !Object.hasOwn(DECISION_REASONS, q.reason)) {
      throw new ServiceError('invalid_request', 'reason is not a decision reason (docs/errors.md).', {
        field: 'querystring.reason' });
    }
    const rows = await ctx.store.proofs.listAudit({
      accountId: request.session!.accountId, limit: limit + 1, ...queryRange(q),
      ...(before !== undefined ? { before } : {}), ...(q.event_type ? { eventType: q.event_type } : {}), ...(
        q.agent_id ? { agentId: q.agent_id } : {}),
      ...(q.decision ? { decision: q.decision } : {}), ...(q.reason ? { reason: q.reason } : {}), ...(
        q.scope ? { scope: q.scope } : {}),
      ...(q.cert_id ? { certId: q.cert_id } : {}),
    });
    const page = rows.slice(0, limit);
    const more = rows.length > limit;
    return { events: page.map(auditView), next_cursor: more ? String(page[page.length - 1]!.seq) : null };
  });

  await registerAuditExportRoute(app, ctx);

  mount(app, AUDIT_ROUTES.getUsage, async (request) => {
    const a = await ctx.store.accounts.getAccount(request.session!.accountId);
    if (!a) throw new ServiceError('auth_required');
    return {
      account_id: a.id, balance_micros: a.creditsMicros, balance_dollars: dollars(a.creditsMicros),
      price_per_verify_micros: VERIFY_PRICE_MICROS, verify_calls: a.verifyCalls, allows: a.verifyAllows,
        denies: a.verifyDenies,
      remaining_verify_calls: Math.floor(a.creditsMicros / VERIFY_PRICE_MICROS),
    };
  });
}
