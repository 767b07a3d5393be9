/**
 * Step-up approvals (issue 23, docs/api.md "Approvals"): the account holder
 * lists the approvals verify requested, reads one in human terms, approves it
 * or denies it with an optional note (session + CSRF); the agent's platform
 * polls one approval's status with its API key. Every change is an audit row
 * and a webhook (`approval.granted`, `approval.denied`), written with it in
 * one transaction. Approvals past their time are expired (with
 * `approval.expired`) before any of these reads them.
 */
import { defineRoute, mount, op, pageLimit } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { ActionApproval, ActionApprovalStatus } from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import type { ApprovalRecord, ApprovalState } from '../store/types.js';
import { approvalAction, approvalChange } from '../approvals/records.js';
import { expireApprovals } from '../approvals/expiry.js';
import { NoBody, TEXT_RULES, iso, parsePage, requireText } from '../http/resources.js';

/** Approval page sizes. */
export const APPROVAL_LIMITS = { default: 25, max: 200 } as const;
const STATES: readonly ApprovalState[] = ['pending', 'granted', 'denied', 'used', 'expired'];

const IdParam = Type.Object({ approval_id: Type.String({ maxLength: 100 }) });
const ListQuery = Type.Object({
  limit: Type.Optional(Type.String({ maxLength: 10 })),
  cursor: Type.Optional(Type.String({ maxLength: 32 })),
  state: Type.Optional(Type.String({ maxLength: 16 })),
}, { additionalProperties: false });
const DenyBody = Type.Union([Type.Object({ note: Type.Optional(Type.String({ maxLength: 2000 })) }, {
  additionalProperties: false }), Type.Null()]);

/** One line for a person: what the agent wants to do (`payments:send 120.00 USD: POST /v1/payments`). */
export function approvalSummary(a: ApprovalRecord): string {
  const x = approvalAction(a);
  const money = x.amount !== null ? ` ${x.amount}${x.currency !== null ? ` ${x.currency}` : ''}` : '';
  const target = x.tool !== null ? `tool ${x.tool}` : `${x.method ?? '?'} ${x.path ?? '?'}`;
  return `${a.scope}${money}: ${target}${x.tenant !== null ? ` (tenant ${x.tenant})` : ''}`;
}

/** The account holder's view of an approval. */
export function approvalView(a: ApprovalRecord): Static<typeof ActionApproval> {
  return {
    approval_id: a.id, state: a.state, summary: approvalSummary(a), scope: a.scope, action: approvalAction(a),
    agent_id: a.agentId, connection_id: a.connectionId, cert_id: a.certId, context: a.context, operation: a.operation,
    note: a.note, created_at: iso(a.createdAt), expires_at: iso(a.expiresAt), decided_at: iso(a.decidedAt),
      settled_at: iso(a.settledAt),
  };
}

/** The agent's view: where its request stands. */
function statusView(a: ApprovalRecord): Static<typeof ActionApprovalStatus> {
  return { approval_id: a.id, state: a.state, expires_at: iso(a.expiresAt), decided_at: iso(a.decidedAt),
    note: a.note };
}

/** The account's approval (expired first if due), or 404 `approval_not_found` for a missing or foreign one. */
async function ownedApproval(ctx: ServiceContext, accountId: string, id: string): Promise<ApprovalRecord> {
  await expireApprovals(ctx);
  const a = await ctx.store.approvals.getApproval(id);
  if (!a || a.accountId !== accountId) throw new ServiceError('approval_not_found');
  return a;
}

/** Grants or denies a pending approval with its audit row and webhook. */
async function settleApproval(
  ctx: ServiceContext, a: ApprovalRecord, state: 'granted' | 'denied', note: string | null): Promise<ApprovalRecord> {
  if (a.state !== 'pending') throw new ServiceError(
    'approval_not_pending', `The approval is ${a.state}.`, { state: a.state });
  const now = ctx.clock();
  const grantExpiresAt = now + ctx.config.approvalTtlSeconds * 1000;
  const after: ApprovalRecord = state === 'granted'
    ? { ...a, state, decidedAt: now, expiresAt: grantExpiresAt }
    : { ...a, state, decidedAt: now, note, settledAt: now };
  const change = approvalChange(ctx, after, state === 'granted' ? 'approval.granted' : 'approval.denied', now,
    state === 'granted' ? { expires_at: new Date(grantExpiresAt).toISOString() } : { note });
  if (!(await ctx.store.approvals.decideApproval(a.id, { state, now, grantExpiresAt, note }, change))) {
    const current = await ctx.store.approvals.getApproval(a.id);
    throw new ServiceError('approval_not_pending', `The approval is ${current?.state ?? 'gone'}.`, {
      state: current?.state ?? null });
  }
  ctx.nudgeWebhooks();
  return after;
}

/** The routes of this file, each defined once (api/route.ts). */
export const APPROVALS_ROUTES = {
  listApprovals: defineRoute({
    method: 'GET', url: '/v1/service/approvals', auth: 'session', permission: 'read',
    schema: { querystring: ListQuery, tags: ['approvals'] },
    operation: { ...op('listApprovals', 'List step-up approvals',
      'The account\'s approvals, newest first, with cursor pagination (`limit` 1–200, default 25) and `state` '
        + '(`pending` for those waiting). Due ones are expired first.',
      S.ActionApprovalList), query: pageLimit(APPROVAL_LIMITS) },
  }),
  getApproval: defineRoute({
    method: 'GET', url: '/v1/service/approvals/:approval_id', auth: 'session', permission: 'read',
    schema: { params: IdParam, tags: ['approvals'] },
    operation: op('getApproval', 'Read a step-up approval',
      'One approval with its action in human terms (summary, amount, method, path, tool).', S.ActionApproval, [
        'approval_not_found']),
  }),
  grantApproval: defineRoute({
    method: 'POST', url: '/v1/service/approvals/:approval_id/approve', auth: 'session_csrf',
    permission: 'approvals_decide',
    schema: { params: IdParam, body: NoBody, tags: ['approvals'] },
    operation: op('grantApproval', 'Approve an action',
      'Grants a pending approval: exactly one later verify of the same operation allows, within '
        + 'SIDECAR_APPROVAL_TTL_SECONDS. Event approval.granted.',
      S.ActionApproval, ['approval_not_found', 'approval_not_pending']),
  }),
  denyApproval: defineRoute({
    method: 'POST', url: '/v1/service/approvals/:approval_id/deny', auth: 'session_csrf',
    permission: 'approvals_decide',
    schema: { params: IdParam, body: DenyBody, tags: ['approvals'] },
    operation: op('denyApproval', 'Deny an action',
      'Optional body `{note}`. Verifies of the operation answer deny approval_denied. Event approval.denied.',
      S.ActionApproval, ['approval_not_found', 'approval_not_pending']),
  }),
  getApprovalStatus: defineRoute({
    method: 'GET', url: '/v1/service/approvals/:approval_id/status', auth: 'api_key',
    schema: { params: IdParam, tags: ['approvals'] },
    operation: op('getApprovalStatus', 'Poll an approval (API key)',
      'For the agent\'s platform: the state of an approval requested on the API key\'s connection, to wait for a '
        + 'decision before retrying with a fresh proof.',
      S.ActionApprovalStatus, ['approval_not_found']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the approval routes. */
export async function registerApprovalRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, APPROVALS_ROUTES.listApprovals, async (request) => {
    const q = request.query as { limit?: string; cursor?: string; state?: string };
    const { limit, before } = parsePage(q, APPROVAL_LIMITS);
    if (q.state !== undefined && !(STATES as readonly string[]).includes(q.state)) {
      throw new ServiceError('invalid_request', `state must be one of ${STATES.join(', ')}.`, {
        field: 'querystring.state' });
    }
    await expireApprovals(ctx);
    const rows = await ctx.store.approvals.listApprovals({
      accountId: request.session!.accountId, limit: limit + 1,
      ...(before !== undefined ? { before } : {}), ...(
        q.state !== undefined ? { state: q.state as ApprovalState } : {}),
    });
    const page = rows.slice(0, limit);
    return { approvals: page.map(approvalView), next_cursor: rows.length > limit ? String(page[
      page.length - 1]!.seq) : null };
  });

  mount(app, APPROVALS_ROUTES.getApproval, async (request) => {
    return approvalView(await ownedApproval(ctx, request.session!.accountId, (request.params as {
      approval_id: string }).approval_id));
  });

  mount(app, APPROVALS_ROUTES.grantApproval, async (request) => {
    const a = await ownedApproval(
      ctx, request.session!.accountId, (request.params as { approval_id: string }).approval_id);
    return approvalView(await settleApproval(ctx, a, 'granted', null));
  });

  mount(app, APPROVALS_ROUTES.denyApproval, async (request) => {
    const a = await ownedApproval(
      ctx, request.session!.accountId, (request.params as { approval_id: string }).approval_id);
    const raw = (request.body as { note?: string } | null | undefined)?.note;
    const note = raw === undefined ? null : requireText(raw, 'body.note', TEXT_RULES.reason);
    return approvalView(await settleApproval(ctx, a, 'denied', note === '' ? null : note));
  });

  mount(app, APPROVALS_ROUTES.getApprovalStatus, async (request) => {
    await expireApprovals(ctx);
    const a = await ctx.store.approvals.getApproval((request.params as { approval_id: string }).approval_id);
    // Only the connection the approval was requested on (the verifying platform's key) may read it.
    if (!a || a.connectionId !== request.apiKey!.connectionId) throw new ServiceError('approval_not_found');
    return statusView(a);
  });
}
