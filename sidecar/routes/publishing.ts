/**
 * Publishing (issue 32; docs/organisations.md, "Publishing"): an organisation claims a publisher
 * domain and proves it with a DNS TXT record (checked against `SIDECAR_DNS_SERVERS`, re-checked by
 * publishing/recheck.ts); a platform moves between `draft`, `published` and `unpublished` under
 * src/publishing.ts; signed-in account holders read the directory of published platforms. Each
 * change is an audit event of the organisation (docs/audit.md, "Administrative events").
 */
import crypto from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as O from '../api/organisation-schemas.js';
import * as S from '../api/schemas.js';
import { b64urlEncode } from '../../src/crypto/encoding.js';
import { ServiceError } from '../../src/errors.js';
import { canonicalDomain, domainRecordName, domainRecordText } from '../../src/publisher-domain.js';
import { checkPublish, nextPublishState } from '../../src/publishing.js';
import type { PublishState } from '../../src/publishing.js';
import type { ServiceContext } from '../context.js';
import { checkDomain } from '../publishing/dns.js';
import type { PublisherDomainRecord } from '../store/types.js';
import { NoBody, currentPlatformView, iso, ownedPlatform } from '../http/resources.js';
import { sessionOrganisation } from './organisations.js';
import { adminRow, domainCheckRows } from '../audit/admin-events.js';

/** Most platforms the directory lists. */
export const DIRECTORY_LIMIT = 500;

const DomainBody = Type.Object({ domain: Type.String({ maxLength: 300 }) }, { additionalProperties: false });
const PlatformParam = Type.Object({ platform_id: Type.String({ maxLength: 100 }) });
const TAGS = ['organizations'];
const PUBLISH_ERRORS = ['account_type_not_supported', 'platform_not_found', 'publish_state_invalid'] as const;

function domainView(d: PublisherDomainRecord): Static<typeof O.PublisherDomain> {
  const state = d.verifiedAt === null ? 'unverified' : d.lapsedAt === null ? 'verified' : 'lapsed';
  return {
    domain: d.domain, record_name: domainRecordName(d.domain), record_text: domainRecordText(d.token), state,
    claimed_at: iso(d.claimedAt)!, verified_at: iso(d.verifiedAt), lapsed_at: iso(d.lapsedAt),
    checked_at: iso(d.checkedAt),
    last_outcome: d.lastOutcome,
  };
}

/** The routes of this file, each defined once (api/route.ts). */
export const PUBLISHING_ROUTES = {
  claimDomain: defineRoute({
    method: 'PUT', url: '/v1/service/organization/domain', auth: 'session_csrf', permission: 'platforms_manage',
    schema: { body: DomainBody, tags: TAGS },
    operation: op('claimDomain', 'Claim the publisher domain',
      'Claims a domain with a new token (replacing an earlier claim, which unpublishes the organisation\'s platforms '
        + 'until the new one is verified). Publish `record_text` as a TXT record at `record_name`, then verify.',
      O.PublisherDomain, ['account_type_not_supported', 'invalid_domain']),
  }),
  getDomain: defineRoute({
    method: 'GET', url: '/v1/service/organization/domain', auth: 'session', permission: 'read',
    schema: { tags: TAGS },
    operation: op('getDomain', 'Read the publisher domain', 'The claim, its record and its last check.',
      O.PublisherDomain,
      ['account_type_not_supported', 'domain_not_claimed']),
  }),
  verifyDomain: defineRoute({
    method: 'POST', url: '/v1/service/organization/domain/verify', auth: 'session_csrf', permission: 'platforms_manage',
    schema: { body: NoBody, tags: TAGS },
    operation: op('verifyDomain', 'Verify the publisher domain now',
      'Looks the TXT record up; `409 domain_not_verified` (with `outcome`: `absent`, `mismatch` or `unreachable`) '
        + 'when it does not prove the claim, `409 domain_taken` when another organisation holds the domain.',
      O.PublisherDomain, ['account_type_not_supported', 'domain_not_claimed', 'domain_not_verified', 'domain_taken']),
  }),
  publishPlatform: defineRoute({
    method: 'POST', url: '/v1/service/platforms/:platform_id/publish', auth: 'session_csrf',
    permission: 'platforms_manage',
    schema: { params: PlatformParam, body: NoBody, tags: ['platforms'] },
    operation: op('publishPlatform', 'Publish a platform',
      'Lists it in the directory. Needs an organisation with a verified publisher domain, a callback URL and a '
        + 'description.', S.Platform,
      [...PUBLISH_ERRORS, 'publisher_domain_unverified', 'callback_url_required', 'description_required']),
  }),
  unpublishPlatform: defineRoute({
    method: 'POST', url: '/v1/service/platforms/:platform_id/unpublish', auth: 'session_csrf',
    permission: 'platforms_manage', schema: { params: PlatformParam, body: NoBody, tags: ['platforms'] },
    operation: op('unpublishPlatform', 'Unpublish a platform',
      'Removes it from the directory; its connections keep working.', S.Platform, [...PUBLISH_ERRORS]),
  }),
  listDirectory: defineRoute({
    method: 'GET', url: '/v1/service/directory', auth: 'session', permission: 'person',
    schema: { tags: TAGS },
    operation: op('listDirectory', 'The directory of published platforms',
      'Published platforms with their publisher and its verified domain, by name (at most 500).', O.Directory),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the publishing routes. */
export async function registerPublishingRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  const claimOf = async (orgId: string): Promise<PublisherDomainRecord> => {
    const d = await ctx.store.publishing.domainOf(orgId);
    if (d === undefined) throw new ServiceError('domain_not_claimed');
    return d;
  };

  mount(app, PUBLISHING_ROUTES.claimDomain, async (request) => {
    const orgId = sessionOrganisation(request);
    const name = canonicalDomain((request.body as { domain: string }).domain);
    if (name === null) throw new ServiceError('invalid_domain', undefined, { field: 'body.domain' });
    const token = b64urlEncode(crypto.randomBytes(32));
    const by = { actor_account_id: request.session!.personId };
    return domainView(await ctx.store.publishing.claimDomain(orgId, name, token, ctx.clock(), (unpublished) => [
      adminRow(ctx, orgId, 'domain.claimed', { ...by, domain: name }),
      ...unpublished.map((id) => adminRow(ctx, orgId, 'platform.unpublished',
        { ...by, platform_id: id, cause: 'domain_claimed', domain: name })),
    ]));
  });

  mount(app, PUBLISHING_ROUTES.getDomain, async (request) => domainView(await claimOf(sessionOrganisation(request))));

  mount(app, PUBLISHING_ROUTES.verifyDomain, async (request) => {
    const orgId = sessionOrganisation(request);
    const d = await claimOf(orgId);
    const found = await checkDomain(ctx.dns, d.domain, d.token);
    const result = await ctx.store.publishing.recordCheck(orgId, d.token, found.outcome, ctx.clock(),
      (r, unpublished) => domainCheckRows(ctx, orgId, d.domain, found.outcome, { person: request.session!.personId }, r,
        unpublished));
    if (result === 'taken') throw new ServiceError('domain_taken');
    if (found.outcome !== 'verified') {
      throw new ServiceError('domain_not_verified', undefined, { outcome: found.outcome, record_name: found.name });
    }
    return domainView(await claimOf(orgId));
  });

  const move = async (orgId: string, platformId: string, to: PublishState, from: PublishState, personId: string) => {
    const row = adminRow(ctx, orgId, to === 'published' ? 'platform.published' : 'platform.unpublished',
      { actor_account_id: personId, platform_id: platformId, from });
    if (!(await ctx.store.publishing.setPublishState(platformId, orgId, from, to, [row]))) {
      throw new ServiceError('publish_state_invalid', 'The platform\'s publish state changed; read it and try again.');
    }
    return currentPlatformView(ctx, orgId, platformId);
  };

  mount(app, PUBLISHING_ROUTES.publishPlatform, async (request) => {
    const orgId = sessionOrganisation(request);
    const p = await ownedPlatform(ctx, orgId, (request.params as { platform_id: string }).platform_id);
    const d = await ctx.store.publishing.domainOf(orgId);
    const check = checkPublish(p.publishState as PublishState, {
      organisation: true, domainVerified: d !== undefined && d.verifiedAt !== null && d.lapsedAt === null,
      callbackUrl: p.callbackUrl, description: p.description,
    });
    if (!check.ok) throw new ServiceError(check.code);
    return move(orgId, p.id, check.state, p.publishState as PublishState, request.session!.personId);
  });

  mount(app, PUBLISHING_ROUTES.unpublishPlatform, async (request) => {
    const orgId = sessionOrganisation(request);
    const p = await ownedPlatform(ctx, orgId, (request.params as { platform_id: string }).platform_id);
    const next = nextPublishState(p.publishState as PublishState, 'unpublish');
    if (!next.ok) throw new ServiceError(next.code);
    return move(orgId, p.id, next.state, p.publishState as PublishState, request.session!.personId);
  });

  mount(app, PUBLISHING_ROUTES.listDirectory, async () => ({
    platforms: (await ctx.store.publishing.directory(DIRECTORY_LIMIT)).map((e) => ({
      platform_id: e.platformId, name: e.name, description: e.description, surface_type: e.surfaceType,
      scopes: e.defaultAllowedScopes,
      publisher: { organization_id: e.orgId, name: e.orgName, verified_domain: e.domain },
    })),
  }));
}
