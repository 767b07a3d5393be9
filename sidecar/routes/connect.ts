/**
 * Connections made by account holders (issue 32; docs/organisations.md, "Connections"): a
 * signed-in account holder connects their workspace to a published platform within its scopes,
 * and the platform learns the new connection's API key only from the signed `connection.created`
 * webhook (as an app learns of an installation); with that key the platform asks for delegations
 * for its agents, which the account holder's approvers grant (fewer scopes if they like) or deny;
 * either side removes the connection. Connecting and removing are audit events of both workspaces.
 */
import crypto from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import { buildEvent } from '../events.js';
import { newApiKey } from '../auth/api-key.js';
import { AAD } from '../secrets.js';
import type { ConnectionRecord, DelegationRequestRecord } from '../store/types.js';
import { NoBody, connectionView, iso, requireScopes } from '../http/resources.js';
import { API_KEY_LIFETIME_MS } from './registration.js';
import { requestView } from './delegations.js';
import { constraintsFrom } from './proposals.js';
import { connectionRows } from '../audit/admin-events.js';
import type { AdminActor } from '../audit/admin-events.js';

const ConnectBody = Type.Object({ allowed_scopes: Type.Array(Type.Unknown(), { maxItems: 256 }) },
  { additionalProperties: false });
const RequestBody = Type.Object({
  agent_id: Type.String({ maxLength: 100 }), scopes: Type.Array(Type.Unknown(), { maxItems: 256 }),
  constraints: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
}, { additionalProperties: false });
const PlatformParam = Type.Object({ platform_id: Type.String({ maxLength: 100 }) });
const ConnParam = Type.Object({ connection_id: Type.String({ maxLength: 100 }) });

/** The routes of this file, each defined once (api/route.ts). */
export const CONNECT_ROUTES = {
  connectPlatform: defineRoute({
    method: 'POST', url: '/v1/service/directory/:platform_id/connect', auth: 'session_csrf',
    permission: 'platforms_manage', schema: { params: PlatformParam, body: ConnectBody, tags: ['connections'] },
    operation: op('connectPlatform', 'Connect to a published platform',
      'Creates a connection of the session\'s workspace to the platform with `allowed_scopes` (within the platform\'s '
        + 'scopes). Its API key goes to the platform in the signed `connection.created` webhook and nowhere else.',
      S.Connection, ['platform_not_found', 'invalid_scopes', 'scope_not_offered', 'already_connected']),
  }),
  requestDelegation: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/delegation-requests', auth: 'api_key',
    schema: { params: ConnParam, body: RequestBody, tags: ['delegations'] },
    operation: {
      ...op('requestDelegation', 'Ask the account holder for a delegation',
        'With the connection\'s API key: asks for `scopes` (within the connection\'s `allowed_scopes`) for one of the '
          + 'connection\'s agents, proposing `constraints` if it likes. The account holder\'s approvers approve it '
          + '(fewer scopes, the proposed constraints or stricter ones) or deny it.',
        S.DelegationRequest, ['connection_not_found', 'agent_not_found', 'invalid_scopes', 'scope_not_offered',
          'invalid_constraints']),
      bodyMembers: { constraints: Type.Union([Type.Ref('Constraints'), Type.Null()], {
        description: 'Proposed constraints (docs/constraints.md); null, `{}` or absent: none.' }) },
    },
  }),
  disconnectPlatform: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/disconnect', auth: 'api_key',
    schema: { params: ConnParam, body: NoBody, tags: ['connections'] },
    operation: op('disconnectPlatform', 'Remove the connection (the platform\'s side)',
      'With the connection\'s API key: removes it as the account holder\'s removal does (its keys stop working, its '
        + 'certificates are revoked, its pending requests denied; event connection.removed).',
      S.ConnectionRemoval, ['connection_not_found']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Scopes within `offered`, or 400 `scope_not_offered` naming the others. */
function within(list: unknown[], offered: readonly string[], field: string): string[] {
  const scopes = requireScopes(list, field);
  const extra = scopes.filter((s) => !offered.includes(s));
  if (extra.length > 0) {
    throw new ServiceError('scope_not_offered', `Not offered: ${extra.join(', ')}.`, { field, scopes: extra });
  }
  return scopes;
}

/**
 * Removes `conn` (either side, `actor`): revokes its certificates, denies its requests, tells the platform, and
 * writes `connection.removed` into the audit chains of the connection's workspace and the platform's publisher.
 */
export async function removeConnectionNow(
  ctx: ServiceContext, conn: ConnectionRecord, actor: AdminActor,
): Promise<Static<typeof S.ConnectionRemoval>> {
  if (conn.status === 'removed') {
    return { connection_id: conn.id, status: 'removed', removed_at: iso(conn.removedAt), revoked_cert_ids: [] };
  }
  const accountId = conn.accountId;
  const now = ctx.clock();
  const publisherId = (await ctx.store.platforms.getPlatform(conn.platformId))?.accountId ?? accountId;
  ctx.caches.apiKeys.invalidateConnection(conn.id);
  const revoked = await ctx.store.platforms.removeConnection(conn.id, now, (certs, denied) => [
    ...certs.map((c) => buildEvent(ctx, { type: 'delegation.revoked', accountId, platformId: conn.platformId,
      connectionId: conn.id, now,
      fields: { cert_id: c.certId, agent_id: c.agentId, connection_id: conn.id, org_id: accountId,
        reason: 'connection_removed' } })),
    ...denied.map((r) => buildEvent(ctx, { type: 'delegation.denied', accountId, platformId: conn.platformId,
      connectionId: conn.id, now,
      fields: { request_id: r.requestId, connection_id: conn.id, org_id: accountId, agent_id: r.agentId,
        reason: 'connection_removed' } })),
    buildEvent(ctx, { type: 'connection.removed', accountId, platformId: conn.platformId, connectionId: conn.id, now,
      fields: { connection_id: conn.id, org_id: accountId, removed_at: iso(now) } }),
  ], (certs, denied) => connectionRows(ctx, conn, publisherId, 'connection.removed', actor,
    { revoked_cert_ids: certs.map((c) => c.certId), denied_request_ids: denied.map((r) => r.requestId) }));
  ctx.caches.apiKeys.invalidateConnection(conn.id);
  for (const c of revoked ?? []) ctx.caches.markRevoked(c.certId);
  ctx.nudgeWebhooks();
  const revokedIds = (revoked ?? []).map((c) => c.certId);
  return { connection_id: conn.id, status: 'removed', removed_at: iso(now), revoked_cert_ids: revokedIds };
}

/** Registers the connect routes. */
export async function registerConnectRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, CONNECT_ROUTES.connectPlatform, async (request) => {
    const accountId = request.session!.accountId;
    const platformId = (request.params as { platform_id: string }).platform_id;
    const p = await ctx.store.platforms.getPlatform(platformId);
    if (!p || p.publishState !== 'published') throw new ServiceError('platform_not_found');
    const scopes = within((request.body as { allowed_scopes: unknown[] }).allowed_scopes, p.defaultAllowedScopes,
      'body.allowed_scopes');
    const account = await ctx.store.accounts.getAccount(accountId);
    const now = ctx.clock();
    const conn: ConnectionRecord = {
      id: crypto.randomUUID(), platformId: p.id, accountId, allowedScopes: scopes, status: 'active', removedAt: null,
      createdAt: now,
    };
    const key = newApiKey(ctx);
    const webhookSecret = Buffer.from(ctx.box.open(p.webhookSecretEnc, AAD.webhookSecret(p.id))).toString('utf8');
    const event = buildEvent(ctx, {
      type: 'connection.created', accountId: p.accountId, platformId: p.id, connectionId: conn.id, now,
      fields: {
        connection_id: conn.id, platform_id: p.id, org_id: accountId,
        org_name: account?.orgName ?? [account?.firstName, account?.lastName].filter(Boolean).join(' ') ?? '',
        allowed_scopes: scopes, callback_url: p.callbackUrl, api_key: key.key, webhook_signing_secret: webhookSecret,
      },
    });
    const apiKey = { id: crypto.randomUUID(), connectionId: conn.id, prefix: key.prefix, digest: key.digest,
      status: 'active' as const, validUntil: now + API_KEY_LIFETIME_MS, createdAt: now };
    const audits = connectionRows(ctx, conn, p.accountId, 'connection.created', { person: request.session!.personId },
      { allowed_scopes: scopes, api_key_prefix: key.prefix });
    const made = await ctx.store.publishing.connect(conn, apiKey, event, audits);
    if (made === 'not_published') throw new ServiceError('platform_not_found');
    if (made === 'already_connected') throw new ServiceError('already_connected');
    ctx.nudgeWebhooks();
    return connectionView(conn);
  });

  mount(app, CONNECT_ROUTES.requestDelegation, async (request) => {
    const auth = request.apiKey!;
    const connectionId = (request.params as { connection_id: string }).connection_id;
    const conn = await ctx.store.platforms.getConnection(connectionId);
    if (!conn || conn.id !== auth.connectionId || conn.status !== 'active') {
      throw new ServiceError('connection_not_found');
    }
    const b = request.body as { agent_id: string; scopes: unknown[]; constraints?: Record<string, unknown> | null };
    const agent = await ctx.store.platforms.getAgent(b.agent_id);
    if (!agent || agent.connectionId !== conn.id) {
      throw new ServiceError('agent_not_found', 'No such agent on this connection.');
    }
    const scopes = within(b.scopes, conn.allowedScopes, 'body.scopes');
    const proposed = constraintsFrom(b.constraints, 'body.constraints');
    const rec: DelegationRequestRecord = {
      id: crypto.randomUUID(), connectionId: conn.id, accountId: conn.accountId, agentId: agent.id,
      requestedScopes: scopes, proposedConstraints: proposed as Record<string, unknown> | null,
      state: 'pending', certId: null, decidedAt: null, createdAt: ctx.clock(),
    };
    await ctx.store.delegations.createRequest(rec);
    return requestView(rec);
  });

  mount(app, CONNECT_ROUTES.disconnectPlatform, async (request) => {
    const auth = request.apiKey!;
    const conn = await ctx.store.platforms.getConnection((request.params as { connection_id: string }).connection_id);
    if (!conn || conn.id !== auth.connectionId) throw new ServiceError('connection_not_found');
    return removeConnectionNow(ctx, conn, { platform: true });
  });
}
