/**
 * Platform registration (spec endpoint 6), shared by the personal route (one draft platform) and
 * the organisation's (several, docs/organisations.md): the platform, its first connection and API
 * key in one transaction with the `connection.created` webhook and the `platform.created` and
 * `connection.created` audit rows, under a per-workspace limit that the transaction re-checks
 * (concurrent registrations cannot both pass).
 */
import crypto from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import * as S from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import { b64urlEncode } from '../../src/crypto/encoding.js';
import { validateCallbackUrl } from '../../src/callback-url.js';
import { AAD } from '../secrets.js';
import { buildEvent } from '../events.js';
import { newApiKey } from '../auth/api-key.js';
import type { ServiceContext } from '../context.js';
import { TEXT_RULES, iso, requireScopes, requireText } from '../http/resources.js';
import { adminRow, connectionRows } from '../audit/admin-events.js';
import type { ConnectionRecord } from '../store/types.js';

/** Surface types accepted at registration (`agentic_api` is the agent-action surface). */
export const SURFACE_TYPES = ['agentic_api', 'conversational_ai', 'meetings', 'physical_ai'] as const;
/** Lifetime of an API key; the registration's `expires_at` is when its key expires. */
export const API_KEY_LIFETIME_MS = 365 * 86_400_000;

/** A registration body as the routes validate it. */
export interface PlatformBodyValue {
  name: string;
  surface_type: string;
  default_allowed_scopes: unknown[];
  description?: string;
  callback_url?: string | null;
}

/** Checks a callback URL against the registration rules, or throws `invalid_callback_url`. */
export function checkCallbackUrl(ctx: ServiceContext, url: string): void {
  const v = validateCallbackUrl(url, ctx.config.webhookAllowInsecure);
  if (!v.ok) throw new ServiceError(
    'invalid_callback_url', `callback_url is not allowed: ${v.reason}.`, { field: 'body.callback_url' });
}

/**
 * Registers a platform of `accountId` (a workspace) from `b` by the person `actorId`, at most `limit` per
 * workspace; the webhook's `org_name` is `orgName`. Throws `platform_limit_reached` at the limit.
 */
export async function registerPlatform(
  ctx: ServiceContext, accountId: string, b: PlatformBodyValue,
  o: { limit: number; orgName: string | null; actorId: string },
): Promise<Static<typeof S.PlatformRegistration>> {
  if (!(SURFACE_TYPES as readonly string[]).includes(b.surface_type)) {
    throw new ServiceError('invalid_request', `surface_type must be one of ${SURFACE_TYPES.join(', ')}.`, {
      field: 'body.surface_type' });
  }
  const name = requireText(b.name, 'body.name', TEXT_RULES.name);
  const description = requireText(b.description ?? '', 'body.description', TEXT_RULES.description);
  const scopes = requireScopes(b.default_allowed_scopes, 'body.default_allowed_scopes');
  const callbackUrl = b.callback_url ?? null;
  if (callbackUrl !== null) checkCallbackUrl(ctx, callbackUrl);
  const count = await ctx.store.platforms.countPlatforms(accountId);
  if (count >= o.limit) throw new ServiceError('platform_limit_reached');

  const now = ctx.clock();
  const platformId = crypto.randomUUID();
  const connectionId = crypto.randomUUID();
  const key = newApiKey(ctx);
  const signingSecret = `ss_${b64urlEncode(crypto.randomBytes(32))}`;
  const webhookSecret = `whsec_${b64urlEncode(crypto.randomBytes(32))}`;
  const expiresAt = now + API_KEY_LIFETIME_MS;
  const event = buildEvent(ctx, {
    type: 'connection.created', accountId, platformId, connectionId, now,
    fields: {
      connection_id: connectionId, platform_id: platformId, org_id: accountId, org_name: o.orgName ?? name,
      allowed_scopes: scopes, callback_url: callbackUrl, api_key: key.key, webhook_signing_secret: webhookSecret,
    },
  });
  const conn: ConnectionRecord = { id: connectionId, platformId, accountId, allowedScopes: scopes, status: 'active',
    removedAt: null, createdAt: now };
  const created = await ctx.store.platforms.createPlatform(
    {
      id: platformId, accountId, name, description, surfaceType: b.surface_type, publishState: 'draft',
      defaultAllowedScopes: scopes, callbackUrl, callbackDisabledAt: null,
      signingSecretEnc: ctx.box.seal(Buffer.from(signingSecret), AAD.signingSecret(platformId)),
      webhookSecretEnc: ctx.box.seal(Buffer.from(webhookSecret), AAD.webhookSecret(platformId)),
      expiresAt, createdAt: now,
    },
    conn,
    { id: crypto.randomUUID(), connectionId, prefix: key.prefix, digest: key.digest, status: 'active',
      validUntil: expiresAt, createdAt: now },
    event,
    o.limit,
    [adminRow(ctx, accountId, 'platform.created', { actor_account_id: o.actorId, platform_id: platformId, name,
      surface_type: b.surface_type }),
    ...connectionRows(ctx, conn, accountId, 'connection.created', { person: o.actorId },
      { allowed_scopes: scopes, api_key_prefix: key.prefix })],
  );
  // Re-checked inside the transaction: concurrent registrations cannot both pass.
  if (!created) throw new ServiceError('platform_limit_reached');
  ctx.nudgeWebhooks();
  return {
    api_key: key.key, api_key_prefix: key.prefix, connection_id: connectionId, description,
    expires_at: iso(expiresAt)!, name, platform_id: platformId, publish_state: 'draft', signing_secret: signingSecret,
    surface_type: b.surface_type, webhook_signing_secret: webhookSecret,
  };
}
