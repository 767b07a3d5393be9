/**
 * Shared request helpers: loading a resource the caller owns (answering 404
 * for missing and foreign ones alike, so ids of other accounts are not
 * revealed), scope-list validation, and ISO time formatting.
 */
import { ServiceError } from '../../src/errors.js';
import { MAX_SCOPES_PER_LIST, invalidScopes } from '../../src/scopes.js';
import { Type } from '@sinclair/typebox';
import { checkText } from '../../src/text.js';
import type { TextRule } from '../../src/text.js';
import type { ServiceContext } from '../context.js';
import type { AgentRecord, CertificateRecord, ConnectionRecord, DelegationRequestRecord, PlatformRecord } from '../store/types.js';
import type { Static } from '@sinclair/typebox';
import type { Agent, Connection, Platform } from '../api/schemas.js';

/** ISO 8601 UTC of a Unix-ms time (null stays null). */
export function iso(t: number | null): string | null {
  return t === null ? null : new Date(t).toISOString();
}

/**
 * The body schema of an operation that takes none: no body, an empty body or `{}`. Any member is
 * refused with 400 `invalid_request` naming it, like every other body (docs/api.md).
 */
export const NoBody = Type.Union([Type.Object({}, { additionalProperties: false }), Type.Null()], { title: 'NoBody' });

/** The text rules of the human-readable fields (src/text.ts; docs/api.md, "Text fields"). */
export const TEXT_RULES = {
  personName: { max: 100 },
  name: { max: 200 },
  description: { max: 2000, multiline: true, optional: true },
  reason: { max: 500, multiline: true, optional: true },
} as const satisfies Record<string, TextRule>;

/** A human-readable field, checked and normalised by the text rule, or 400 `invalid_request` naming it. */
export function requireText(value: string, field: string, rule: TextRule): string {
  const r = checkText(value, rule);
  if (!r.ok) throw new ServiceError('invalid_request', `${field} ${r.reason}.`, { field });
  return r.value;
}

/** Validates a scope list: non-empty, bounded, every entry in the vocabulary; returns it deduplicated. */
export function requireScopes(list: unknown[], field: string): string[] {
  if (list.length === 0) throw new ServiceError('invalid_scopes', `${field} must not be empty.`, { field, invalid_scopes: [] });
  if (list.length > MAX_SCOPES_PER_LIST) throw new ServiceError('invalid_request', `${field} has more than ${MAX_SCOPES_PER_LIST} scopes.`, { field });
  const bad = invalidScopes(list);
  if (bad.length) throw new ServiceError('invalid_scopes', `Not in the scope vocabulary: ${bad.join(', ')}.`, { field, invalid_scopes: bad });
  return [...new Set(list as string[])];
}

/** The caller's platform, or 404. */
export async function ownedPlatform(ctx: ServiceContext, accountId: string, id: string): Promise<PlatformRecord> {
  const p = await ctx.store.platforms.getPlatform(id);
  if (!p || p.accountId !== accountId) throw new ServiceError('platform_not_found');
  return p;
}

/** The caller's connection, or 404. */
export async function ownedConnection(ctx: ServiceContext, accountId: string, id: string): Promise<ConnectionRecord> {
  const c = await ctx.store.platforms.getConnection(id);
  if (!c || c.accountId !== accountId) throw new ServiceError('connection_not_found');
  return c;
}

/** The caller's agent, or 404. */
export async function ownedAgent(ctx: ServiceContext, accountId: string, id: string): Promise<AgentRecord> {
  const a = await ctx.store.platforms.getAgent(id);
  if (!a || a.accountId !== accountId) throw new ServiceError('agent_not_found');
  return a;
}

/** The caller's delegation request, or 404. */
export async function ownedRequest(ctx: ServiceContext, accountId: string, id: string): Promise<DelegationRequestRecord> {
  const r = await ctx.store.delegations.getRequest(id);
  if (!r || r.accountId !== accountId) throw new ServiceError('request_not_found');
  return r;
}

/** The caller's certificate, or 404. */
export async function ownedCertificate(ctx: ServiceContext, accountId: string, id: string): Promise<CertificateRecord> {
  const c = await ctx.store.delegations.getCertificate(id);
  if (!c || c.accountId !== accountId) throw new ServiceError('certificate_not_found');
  return c;
}

/** Public view of a platform (never its secrets). */
export function platformView(p: PlatformRecord, connectionId: string | null): Static<typeof Platform> {
  return {
    platform_id: p.id, connection_id: connectionId, name: p.name, description: p.description, surface_type: p.surfaceType,
    publish_state: p.publishState, default_allowed_scopes: p.defaultAllowedScopes, callback_url: p.callbackUrl,
    callback_disabled_at: iso(p.callbackDisabledAt), expires_at: iso(p.expiresAt), created_at: iso(p.createdAt),
  };
}

/** The view of platform `platformId` (re-read), with the id of its owner's connection to it. */
export async function currentPlatformView(ctx: ServiceContext, accountId: string, platformId: string):
  Promise<Static<typeof Platform>> {
  const p = (await ctx.store.platforms.getPlatform(platformId))!;
  const conns = await ctx.store.platforms.listConnections(accountId);
  return platformView(p, conns.find((c) => c.platformId === p.id)?.id ?? null);
}

/** Public view of a connection. */
export function connectionView(c: ConnectionRecord): Static<typeof Connection> {
  return {
    connection_id: c.id, platform_id: c.platformId, allowed_scopes: c.allowedScopes, status: c.status,
    removed_at: iso(c.removedAt), created_at: iso(c.createdAt),
  };
}

/** Public view of an agent (the flat shape of spec 2.2, plus connection and time). */
export function agentView(a: AgentRecord): Static<typeof Agent> {
  return {
    agent_id: a.id, name: a.name, agent_type: a.agentType, custody_mode: a.custodyMode,
    public_key_json: JSON.parse(a.publicKey) as Record<string, unknown>, connection_id: a.connectionId, created_at: iso(a.createdAt),
  };
}

/**
 * Parses the `limit` and `cursor` query parameters of a listing: `limit` an integer from 1 to
 * `limits.max` (default `limits.default`), `cursor` the opaque `next_cursor` of the previous
 * page. Refuses anything else with `invalid_request` naming the parameter.
 */
export function parsePage(q: { limit?: string; cursor?: string }, limits: { default: number; max: number }): { limit: number; before?: number } {
  let limit = limits.default;
  if (q.limit !== undefined) {
    if (!/^\d{1,4}$/.test(q.limit) || Number(q.limit) < 1 || Number(q.limit) > limits.max) {
      throw new ServiceError('invalid_request', `limit must be an integer from 1 to ${limits.max}.`, { field: 'querystring.limit' });
    }
    limit = Number(q.limit);
  }
  if (q.cursor === undefined) return { limit };
  if (!/^\d{1,15}$/.test(q.cursor)) throw new ServiceError('invalid_request', 'cursor is not valid.', { field: 'querystring.cursor' });
  return { limit, before: Number(q.cursor) };
}
