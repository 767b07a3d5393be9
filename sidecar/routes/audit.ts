/**
 * Audit read (spec endpoint 14) with cursor pagination and filters, and the
 * usage read (balance and counts), which the spec leaves out.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { AuditEvent } from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import type { AuditEventRecord } from '../store/types.js';
import { iso, parsePage } from '../http/resources.js';
import { VERIFY_PRICE_MICROS } from '../decide/billing.js';

/** Audit page sizes. */
export const AUDIT_LIMITS = { default: 25, max: 200 } as const;
/** Audit event types that can be filtered on. */
export const AUDIT_EVENT_TYPES = [
  'proof.presented', 'proof.verified', 'proof.rejected', 'approval.requested', 'approval.granted', 'approval.denied', 'approval.expired',
] as const;

const AuditQuery = Type.Object({
  limit: Type.Optional(Type.String({ maxLength: 10 })),
  cursor: Type.Optional(Type.String({ maxLength: 32 })),
  event_type: Type.Optional(Type.String({ maxLength: 64 })),
  agent_id: Type.Optional(Type.String({ maxLength: 100 })),
}, { additionalProperties: false });

/** The API view of an audit event. */
export function auditView(e: AuditEventRecord): Static<typeof AuditEvent> {
  return {
    event_id: e.id, event_type: e.eventType, occurred_at: iso(e.createdAt), connection_id: e.connectionId,
    agent_id: e.agentId, cert_id: e.certId, required_scope: e.requiredScope, details: e.details,
  };
}

const dollars = (micros: number): string => (micros / 1_000_000).toFixed(6);

/** Registers the audit and usage routes. */
export async function registerAuditRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  app.get('/v1/service/audit/personal', { schema: { querystring: AuditQuery, tags: ['audit'] }, config: { auth: 'session' } }, async (request) => {
    const q = request.query as { limit?: string; cursor?: string; event_type?: string; agent_id?: string };
    const { limit, before } = parsePage(q, AUDIT_LIMITS);
    if (q.event_type !== undefined && !(AUDIT_EVENT_TYPES as readonly string[]).includes(q.event_type)) {
      throw new ServiceError('invalid_request', `event_type must be one of ${AUDIT_EVENT_TYPES.join(', ')}.`, { field: 'querystring.event_type' });
    }
    const rows = await ctx.store.proofs.listAudit({
      accountId: request.session!.accountId, limit: limit + 1,
      ...(before !== undefined ? { before } : {}), ...(q.event_type ? { eventType: q.event_type } : {}), ...(q.agent_id ? { agentId: q.agent_id } : {}),
    });
    const page = rows.slice(0, limit);
    const more = rows.length > limit;
    return { events: page.map(auditView), next_cursor: more ? String(page[page.length - 1]!.seq) : null };
  });

  app.get('/v1/service/usage/personal', { schema: { tags: ['audit'] }, config: { auth: 'session' } }, async (request) => {
    const a = await ctx.store.accounts.getAccount(request.session!.accountId);
    if (!a) throw new ServiceError('auth_required');
    return {
      account_id: a.id, balance_micros: a.creditsMicros, balance_dollars: dollars(a.creditsMicros),
      price_per_verify_micros: VERIFY_PRICE_MICROS, verify_calls: a.verifyCalls, allows: a.verifyAllows, denies: a.verifyDenies,
      remaining_verify_calls: Math.floor(a.creditsMicros / VERIFY_PRICE_MICROS),
    };
  });
}
