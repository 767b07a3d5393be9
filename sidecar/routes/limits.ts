/**
 * The usage read of a certificate's limits (issue 23, docs/api.md "Budgets
 * and rate limits"): for `budget` and `max_calls`, what the allowed calls
 * used in the current calendar window (UTC) and what is left. The counters are
 * the ones verify debits in its commit transaction, so the read agrees with
 * the audit's `budget_debit` / `calls_debit` details.
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { CertificateUsage } from '../api/schemas.js';
import { amountMicros } from '../../src/amount.js';
import type { Constraints } from '../../src/constraints.js';
import { formatMicros, windowOf } from '../../src/limits.js';
import type { ServiceContext } from '../context.js';
import { iso, ownedCertificate } from '../http/resources.js';

const IdParam = Type.Object({ cert_id: Type.String({ maxLength: 100 }) });

/** The end of a window as the API shows it (`total` has none). */
const end = (t: number): string | null => (Number.isFinite(t) ? iso(t) : null);

/** The usage of certificate `certId` with `constraints` at `now`. */
export async function certificateUsage(
  ctx: ServiceContext, certId: string, constraints: Constraints | null,
    now: number): Promise<Static<typeof CertificateUsage>> {
  const b = constraints?.budget;
  const m = constraints?.max_calls;
  const bw = b ? windowOf(b.period, now) : null;
  const mw = m ? windowOf(m.period, now) : null;
  const counters = [
    ...(bw ? [{ kind: 'budget' as const, windowStart: bw.start }] : []),
    ...(mw ? [{ kind: 'calls' as const, windowStart: mw.start }] : []),
  ];
  const used = counters.length ? await ctx.store.usage.usage(certId, counters) : [];
  const spent = bw ? used[0]! : 0;
  const calls = mw ? used[bw ? 1 : 0]! : 0;
  const limit = b ? Number(amountMicros(b.amount)) : 0;
  return {
    cert_id: certId,
    budget: b && bw ? {
      amount: b.amount, currency: b.currency, period: b.period, window_start: iso(bw.start)!, window_end: end(bw.end),
      spent: formatMicros(spent), left: formatMicros(Math.max(0, limit - spent)), spent_micros: spent,
        left_micros: Math.max(0, limit - spent),
    } : null,
    max_calls: m && mw ? {
      count: m.count, period: m.period, window_start: iso(mw.start)!, window_end: end(mw.end), used: calls,
        left: Math.max(0, m.count - calls),
    } : null,
  };
}

/** The routes of this file, each defined once (api/route.ts). */
export const LIMITS_ROUTES = {
  getCertificateUsage: defineRoute({
    method: 'GET', url: '/v1/service/delegations/:cert_id/usage', auth: 'session', permission: 'audit_read',
    schema: { params: IdParam, tags: ['delegations'] },
    operation: op('getCertificateUsage', 'Read a certificate\'s budget and rate usage',
      'Spent and left of `budget` and `max_calls` in the current calendar window (UTC).', S.CertificateUsage, [
        'certificate_not_found']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the usage read. */
export async function registerLimitRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, LIMITS_ROUTES.getCertificateUsage, async (request) => {
    const cert = await ownedCertificate(
      ctx, request.session!.accountId, (request.params as { cert_id: string }).cert_id);
    return certificateUsage(ctx, cert.id, cert.constraints as Constraints | null, ctx.clock());
  });
}
