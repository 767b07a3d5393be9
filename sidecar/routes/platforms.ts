/**
 * Platform, connection and agent routes: registration (spec endpoint 6),
 * agent creation (endpoint 7), and the operations the spec leaves out —
 * listing and reading, editing a platform's name and description (audited;
 * docs/organisations.md, "Publishing"), API-key rotation and connection removal.
 */
import { ONBOARDED, defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../src/errors.js';
import { canonicalize } from '../../src/canonical.js';
import { generateHybridKeyPair, publicKeyToJson } from '../../src/crypto/hybrid.js';
import { AAD } from '../secrets.js';
import { buildEvent } from '../events.js';
import { newApiKey } from '../auth/api-key.js';
import { API_KEY_LIFETIME_MS, registerPlatform } from './registration.js';
import { removeConnectionNow } from './connect.js';
import type { PlatformBodyValue } from './registration.js';
import type { ServiceContext } from '../context.js';
import {
  NoBody, TEXT_RULES, agentView, connectionView, currentPlatformView, iso, ownedConnection, ownedPlatform, platformView,
  requireText,
} from '../http/resources.js';
import { adminEvent } from './organisations.js';
import { adminRow } from '../audit/admin-events.js';

/** An organisation may register this many platforms. */
export const ORGANISATION_PLATFORM_LIMIT = 100;
/** A personal account may register one draft platform. */
export const PERSONAL_PLATFORM_LIMIT = 1;
/** The only custody mode: the service generates and holds the agent's keys. */
export const CUSTODY_MODE = 'custodial';

const PlatformBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  surface_type: Type.String({ maxLength: 64 }),
  default_allowed_scopes: Type.Array(Type.Unknown(), { maxItems: 256 }),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
  callback_url: Type.Optional(Type.Union([Type.String({ maxLength: 2048 }), Type.Null()])),
}, { additionalProperties: false });
const EditBody = Type.Object({
  name: Type.Optional(Type.String({ maxLength: 200 })),
  description: Type.Optional(Type.String({ maxLength: 2000 })),
}, {
  additionalProperties: false, description: 'At least one of `name` and `description`; `""` removes the description.',
});
const AgentBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  agent_type: Type.String({ maxLength: 64 }),
}, { additionalProperties: false });
const IdParam = (name: string) => Type.Object({ [name]: Type.String({ maxLength: 100 }) });

/** The routes of this file, each defined once (api/route.ts). */
export const PLATFORMS_ROUTES = {
  registerPersonalPlatform: defineRoute({
    method: 'POST', url: '/v1/service/platforms/personal', auth: 'session_csrf', permission: 'platforms_manage',
    schema: { body: PlatformBody, tags: ['platforms'] },
    operation: op('registerPersonalPlatform', 'Register a personal platform (spec 4.6)',
      'Creates the platform, its connection and API key. The three secrets appear only in this response.',
      S.PlatformRegistration, ['invalid_scopes', 'invalid_callback_url', 'platform_limit_reached',
        'account_type_not_supported', ...ONBOARDED]),
  }),
  registerPlatform: defineRoute({
    method: 'POST', url: '/v1/service/platforms', auth: 'session_csrf', permission: 'platforms_manage',
    schema: { body: PlatformBody, tags: ['platforms'] },
    operation: op('registerPlatform', 'Register an organisation\'s platform',
      'As the personal registration, in an organisation workspace, up to 100 platforms '
        + '(docs/organisations.md). The three secrets appear only in this response.',
      S.PlatformRegistration, ['invalid_scopes', 'invalid_callback_url', 'platform_limit_reached',
        'account_type_not_supported']),
  }),
  listPlatforms: defineRoute({
    method: 'GET', url: '/v1/service/platforms', auth: 'session', permission: 'read',
    schema: { tags: ['platforms'] },
    operation: op('listPlatforms', 'List platforms', 'The account\'s platforms, without secrets.', S.PlatformList),
  }),
  getPlatform: defineRoute({
    method: 'GET', url: '/v1/service/platforms/:platform_id', auth: 'session', permission: 'read',
    schema: { params: IdParam('platform_id'), tags: ['platforms'] },
    operation: op('getPlatform', 'Read a platform', 'One platform, without secrets.', S.Platform, [
      'platform_not_found']),
  }),
  updatePlatform: defineRoute({
    method: 'PATCH', url: '/v1/service/platforms/:platform_id', auth: 'session_csrf', permission: 'platforms_manage',
    schema: { params: IdParam('platform_id'), body: EditBody, tags: ['platforms'] },
    operation: op('updatePlatform', 'Edit a platform',
      'Sets `name` and/or `description` (at least one; the registration\'s text rules). A published platform\'s '
        + 'directory entry shows the change at once; its description cannot be emptied (`409 description_required`; '
        + 'unpublish first). Audit event `platform.updated`.',
      S.Platform, ['platform_not_found', 'description_required']),
  }),
  listConnections: defineRoute({
    method: 'GET', url: '/v1/service/connections', auth: 'session', permission: 'read',
    schema: { tags: ['connections'] },
    operation: op('listConnections', 'List connections', 'The account\'s connections.', S.ConnectionList),
  }),
  getConnection: defineRoute({
    method: 'GET', url: '/v1/service/connections/:connection_id', auth: 'session', permission: 'read',
    schema: { params: IdParam('connection_id'), tags: ['connections'] },
    operation: op('getConnection', 'Read a connection', 'One connection.', S.Connection, ['connection_not_found']),
  }),
  rotateApiKey: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/rotate-key', auth: 'session_csrf',
    permission: 'platforms_manage',
    schema: { body: NoBody, params: IdParam('connection_id'), tags: ['connections'] },
    operation: op('rotateApiKey', 'Rotate the API key',
      'Issues a new key (shown once); the old key stops at once or after SIDECAR_API_KEY_GRACE_SECONDS. Event '
        + 'connection.key_rotated.',
      S.KeyRotation, ['connection_not_found']),
  }),
  removeConnection: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/remove', auth: 'session_csrf',
    permission: 'platforms_manage',
    schema: { body: NoBody, params: IdParam('connection_id'), tags: ['connections'] },
    operation: op('removeConnection', 'Remove a connection',
      'Its keys stop working, its certificates are revoked and its pending requests denied. Event connection.removed.',
      S.ConnectionRemoval, ['connection_not_found']),
  }),
  createAgent: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/agents', auth: 'api_key',
    schema: { params: IdParam('connection_id'), body: AgentBody, tags: ['agents'] },
    operation: op('createAgent', 'Create an agent (spec 4.7)',
      'Creates a custodial agent: the service generates and keeps its hybrid keypair. Flat JSON answer.',
      S.AgentCreated, ['connection_not_found', 'invalid_agent_type']),
  }),
  listConnectionAgents: defineRoute({
    method: 'GET', url: '/v1/service/connections/:connection_id/agents', auth: 'api_key',
    schema: { params: IdParam('connection_id'), tags: ['agents'] },
    operation: op('listConnectionAgents', 'List the connection\'s agents',
      'The agents of the API key\'s own connection.', S.AgentList, ['connection_not_found']),
  }),
  listAgents: defineRoute({
    method: 'GET', url: '/v1/service/agents', auth: 'session', permission: 'read',
    schema: { tags: ['agents'] },
    operation: op('listAgents', 'List agents', 'The account\'s agents.', S.AgentList),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers platform, connection and agent routes. */
export async function registerPlatformRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, PLATFORMS_ROUTES.registerPersonalPlatform, async (request) => {
    const accountId = request.session!.accountId;
    const account = await ctx.store.accounts.getAccount(accountId);
    if (!account || account.onboardingStep !== 'complete') throw new ServiceError('onboarding_incomplete');
    if (account.accountType !== 'individual') throw new ServiceError(
      'account_type_not_supported', 'Personal platforms are for individual accounts.');
    return registerPlatform(ctx, accountId, request.body as PlatformBodyValue,
      { limit: PERSONAL_PLATFORM_LIMIT, orgName: null, actorId: request.session!.personId });
  });

  mount(app, PLATFORMS_ROUTES.registerPlatform, async (request) => {
    const accountId = request.session!.accountId;
    const org = await ctx.store.accounts.getAccount(accountId);
    if (org?.accountType !== 'organization' || request.session!.organisationId === null) throw new ServiceError(
      'account_type_not_supported', 'Switch to an organisation to register its platforms; a personal account has one.');
    return registerPlatform(ctx, accountId, request.body as PlatformBodyValue,
      { limit: ORGANISATION_PLATFORM_LIMIT, orgName: org.orgName ?? null, actorId: request.session!.personId });
  });

  mount(app, PLATFORMS_ROUTES.listPlatforms, async (request) => {
    const accountId = request.session!.accountId;
    const conns = await ctx.store.platforms.listConnections(accountId);
    const platforms = await ctx.store.platforms.listPlatforms(accountId);
    return { platforms: platforms.map((p) => platformView(p, conns.find((c) => c.platformId === p.id)?.id ?? null)) };
  });

  mount(app, PLATFORMS_ROUTES.getPlatform, async (request) => {
    const accountId = request.session!.accountId;
    const p = await ownedPlatform(ctx, accountId, (request.params as { platform_id: string }).platform_id);
    const conns = await ctx.store.platforms.listConnections(accountId);
    return platformView(p, conns.find((c) => c.platformId === p.id)?.id ?? null);
  });

  mount(app, PLATFORMS_ROUTES.updatePlatform, async (request) => {
    const s = request.session!;
    const b = request.body as { name?: string; description?: string };
    if (b.name === undefined && b.description === undefined) throw new ServiceError(
      'invalid_request', 'Give name, description or both.', { field: 'body' });
    const edit = {
      ...(b.name !== undefined ? { name: requireText(b.name, 'body.name', TEXT_RULES.name) } : {}),
      ...(b.description !== undefined
        ? { description: requireText(b.description, 'body.description', TEXT_RULES.description) } : {}),
    };
    const platformId = (request.params as { platform_id: string }).platform_id;
    const r = await ctx.store.platforms.updatePlatform(platformId, s.accountId, edit, (before, after) => {
      const changed = (['name', 'description'] as const).filter((k) => before[k] !== after[k]);
      return changed.length === 0 ? [] : [adminEvent(ctx, s.accountId, 'platform.updated', s.personId, {
        platform_id: before.id, changed, ...Object.fromEntries(changed.map((k) => [k, after[k]])) })];
    });
    if (r.outcome === 'not_found') throw new ServiceError('platform_not_found');
    if (r.outcome === 'description_required') throw new ServiceError('description_required',
      'A published platform keeps a description; unpublish it first to remove it.', { field: 'body.description' });
    return currentPlatformView(ctx, s.accountId, platformId);
  });

  mount(app, PLATFORMS_ROUTES.listConnections, async (request) => {
    return { connections: (await ctx.store.platforms.listConnections(request.session!.accountId)).map(connectionView) };
  });

  mount(app, PLATFORMS_ROUTES.getConnection, async (request) => {
    return connectionView(await ownedConnection(ctx, request.session!.accountId, (request.params as {
      connection_id: string }).connection_id));
  });

  mount(app, PLATFORMS_ROUTES.rotateApiKey, async (request) => {
    const accountId = request.session!.accountId;
    const conn = await ownedConnection(ctx, accountId, (request.params as { connection_id: string }).connection_id);
    if (conn.status !== 'active') throw new ServiceError('connection_not_found', 'The connection was removed.');
    const now = ctx.clock();
    const key = newApiKey(ctx);
    const graceUntil = ctx.config.apiKeyGraceSeconds > 0 ? now + ctx.config.apiKeyGraceSeconds * 1000 : null;
    // Cached authentications of this connection's keys are dropped before and after the rotation
    // commits: none read before it can be cached after it, and none outlives this response.
    ctx.caches.apiKeys.invalidateConnection(conn.id);
    const prev = await ctx.store.platforms.rotateApiKey(conn.id,
      { id: crypto.randomUUID(), connectionId: conn.id, prefix: key.prefix, digest: key.digest, status: 'active',
        validUntil: now + API_KEY_LIFETIME_MS, createdAt: now },
      graceUntil,
      (previousPrefix) => buildEvent(
        ctx, { type: 'connection.key_rotated', accountId, platformId: conn.platformId, connectionId: conn.id, now,
        fields: { connection_id: conn.id, api_key_prefix: key.prefix, previous_prefix: previousPrefix } }),
      (previousPrefix) => [adminRow(ctx, accountId, 'connection.key_rotated', {
        actor_account_id: request.session!.personId, connection_id: conn.id, platform_id: conn.platformId,
        api_key_prefix: key.prefix, previous_prefix: previousPrefix, previous_key_valid_until: iso(graceUntil),
      }, conn.id)]);
    ctx.caches.apiKeys.invalidateConnection(conn.id);
    if (!prev) throw new ServiceError('connection_not_found', 'The connection was removed.');
    ctx.nudgeWebhooks();
    return {
      connection_id: conn.id, api_key: key.key, api_key_prefix: key.prefix, expires_at: iso(now + API_KEY_LIFETIME_MS),
      previous_prefix: prev.prefix, previous_key_valid_until: iso(graceUntil),
    };
  });

  mount(app, PLATFORMS_ROUTES.removeConnection, async (request) => {
    const accountId = request.session!.accountId;
    return removeConnectionNow(ctx, await ownedConnection(ctx, accountId,
      (request.params as { connection_id: string }).connection_id), { person: request.session!.personId });
  });

  mount(app, PLATFORMS_ROUTES.createAgent, async (request) => {
    const auth = request.apiKey!;
    const connectionId = (request.params as { connection_id: string }).connection_id;
    if (connectionId !== auth.connectionId) throw new ServiceError(
      'connection_not_found', 'Agents can only be created under the API key\'s own connection.');
    const b = request.body as { name: string; agent_type: string };
    const name = requireText(b.name, 'body.name', TEXT_RULES.name);
    if (b.agent_type !== 'api_agent') throw new ServiceError(
      'invalid_agent_type', undefined, { field: 'body.agent_type' });
    const id = crypto.randomUUID();
    const kp = generateHybridKeyPair();
    await ctx.store.platforms.createAgent({
      id, connectionId, accountId: auth.accountId, name, agentType: b.agent_type, custodyMode: CUSTODY_MODE,
      publicKey: canonicalize(publicKeyToJson(kp.publicKey)), secretEnc: ctx.box.seal(
        kp.secretSeed, AAD.agentSecret(id)), createdAt: ctx.clock(),
    });
    kp.secretSeed.fill(0);
    return { agent_id: id, name, agent_type: b.agent_type, custody_mode: CUSTODY_MODE, public_key_json: publicKeyToJson(
      kp.publicKey) };
  });

  mount(app, PLATFORMS_ROUTES.listConnectionAgents, async (request) => {
    const connectionId = (request.params as { connection_id: string }).connection_id;
    if (connectionId !== request.apiKey!.connectionId) throw new ServiceError('connection_not_found');
    return { agents: (await ctx.store.platforms.listAgents({ connectionId })).map(agentView) };
  });

  mount(app, PLATFORMS_ROUTES.listAgents, async (request) => {
    return { agents: (await ctx.store.platforms.listAgents({ accountId: request.session!.accountId })).map(agentView) };
  });
}
