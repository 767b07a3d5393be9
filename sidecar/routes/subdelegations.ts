/**
 * Sub-delegation (issue 33, docs/certificates.md "Sub-delegation"): an agent
 * hands another agent of its own connection a part of its authority, with
 * its platform's API key. The child certificate is signed with the
 * delegating agent's custodial key, names its parent (id, hash, depth) and
 * grants nothing the parent does not (src/narrowing.ts); the parent must
 * grant the right to delegate (`max_delegation_depth`). Who consents: the
 * account holder, once, by granting that right on the parent; the platform
 * holding both agents (same connection, so the same platform and account)
 * issues the child. Across connections or platforms nothing is issued
 * (403 `delegation_cross_connection`).
 */
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import { canonicalize } from '../../src/canonical.js';
import { CERT_TYPE, certificateHash, signCertificate } from '../../src/certificate.js';
import type { CertificatePayload, DelegationCertificate } from '../../src/certificate.js';
import { delegationRightOf, depthOf, grantOf } from '../../src/chain.js';
import { constraintsFrom } from './proposals.js';
import { createSigner } from '../../src/crypto/hybrid.js';
import { ServiceError } from '../../src/errors.js';
import { checkNarrowing } from '../../src/narrowing.js';
import { AAD } from '../secrets.js';
import { buildEvent } from '../events.js';
import type { ServiceContext } from '../context.js';
import { loadVerifiedChain } from '../decide/chain.js';
import type { AgentRecord, CertificateRecord } from '../store/types.js';
import { iso, ownedCertificate, requireScopes } from '../http/resources.js';
import { certificateView, delegationKeyStatement, parseTimestamp } from './delegations.js';
import { delegationRight } from './revocation.js';

const Params = Type.Object({ connection_id: Type.String({ maxLength: 100 }),
  agent_id: Type.String({ maxLength: 100 }) });
const Body = Type.Object({
  to_agent_id: Type.String({ maxLength: 100 }),
  scopes: Type.Array(Type.Unknown(), { maxItems: 256 }),
  expires_at: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
  constraints: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
  max_delegation_depth: Type.Optional(Type.Unknown()),
  parent_cert_id: Type.Optional(Type.String({ maxLength: 100 })),
}, { additionalProperties: false });
type BodyT = { to_agent_id: string; scopes: unknown[]; expires_at?: string | null;
  constraints?: Record<string, unknown> | null; max_delegation_depth?: unknown; parent_cert_id?: string };

/** The routes of this file, each defined once (api/route.ts). */
export const SUBDELEGATIONS_ROUTES = {
  subDelegate: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/agents/:agent_id/delegations', auth: 'api_key',
    schema: { params: Params, body: Body, tags: ['delegations'] },
    operation: {
      ...op('subDelegate', 'Sub-delegate to another agent',
        'The agent of the path hands `to_agent_id` (an agent of the same connection) a part of its authority: '
          + 'scopes a subset, every constraint at least as strict, an expiry no later (absent: the parent\'s). '
          + 'The parent (`parent_cert_id`, default the agent\'s newest active certificate) must grant the right to '
          + 'delegate. Signed with the agent\'s custodial key. Event delegation.approved.',
        S.SubDelegation, ['connection_not_found', 'agent_not_found', 'certificate_not_found', 'no_active_delegation',
          'delegation_cross_connection', 'delegation_not_permitted', 'delegation_depth_exceeded', 'delegation_widens',
          'empty_scope', 'invalid_scopes', 'invalid_expiry', 'invalid_constraints', 'invalid_delegation_depth',
          ]),
      bodyMembers: {
        constraints: Type.Union([Type.Ref('Constraints'), Type.Null()], {
          description: 'Constraints (docs/constraints.md), each at least as strict as the parent\'s; '
            + 'null or `{}`: none.' }),
        max_delegation_depth: Type.Integer({ minimum: 0, description: 'The right to delegate further: at most the '
          + 'parent\'s minus one; 0 or absent: none.' }),
      },
    },
  }),
  listChildCertificates: defineRoute({
    method: 'GET', url: '/v1/service/delegations/:cert_id/children', auth: 'session', permission: 'read',
    schema: { params: Type.Object({ cert_id: Type.String({ maxLength: 100 }) }), tags: ['delegations'] },
    operation: op('listChildCertificates', 'List a certificate\'s sub-delegations',
      'The certificates sub-delegated directly under this one (any status), oldest first; each has its own '
        + 'children (a tree the account holder can revoke from any node).', S.CertificateList,
      ['certificate_not_found']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** The agent's certificate to delegate from, with its verified chain (leaf first). */
async function parentChain(ctx: ServiceContext, agent: AgentRecord, certId: string | undefined,
  now: number): Promise<DelegationCertificate[]> {
  let rec: Pick<CertificateRecord, 'id' | 'certSha256' | 'status' | 'expiresAt'> | undefined;
  if (certId !== undefined) {
    const r = await ctx.store.delegations.getCertificate(certId);
    if (!r || r.agentId !== agent.id) throw new ServiceError('certificate_not_found', undefined,
      { field: 'body.parent_cert_id' });
    rec = r;
  } else {
    rec = await ctx.store.delegations.activeCertificateForAgent(agent.id);
  }
  if (!rec || rec.status !== 'approved' || ctx.caches.statusOf(rec.id) === 'revoked'
    || (rec.expiresAt !== null && rec.expiresAt <= now)) throw new ServiceError('no_active_delegation');
  const loaded = await loadVerifiedChain(ctx, rec.id, rec.certSha256, agent.id);
  // A stored chain that does not verify: nothing it says is trusted.
  if ('error' in loaded) throw new Error(`certificate ${rec.id} of agent ${agent.id} does not verify`);
  for (const link of loaded.chain.slice(1)) {
    if (ctx.caches.statusOf(link.payload.cert_id) === 'revoked') throw new ServiceError('no_active_delegation');
  }
  return loaded.chain;
}

/** The right the parent passes on, or the refusal: none granted, or the chain's depth reached. */
function checkRight(ctx: ServiceContext, chain: DelegationCertificate[]): number {
  const p = chain[0]!.payload;
  const depth = depthOf(p) + 1;
  if (depth > ctx.config.maxDelegationDepth) {
    throw new ServiceError('delegation_depth_exceeded',
      `The service allows chains ${ctx.config.maxDelegationDepth} deep.`,
      { depth, max_depth: ctx.config.maxDelegationDepth });
  }
  if (delegationRightOf(p) >= 1) return delegationRightOf(p);
  // A sub-delegated parent whose right ran out because its own parent's did: the chain's depth is reached.
  const above = chain[1]?.payload;
  if (above !== undefined && delegationRightOf(above) === 1) {
    throw new ServiceError('delegation_depth_exceeded', `The chain allows no certificate at depth ${depth}.`,
      { depth });
  }
  throw new ServiceError('delegation_not_permitted');
}

/** The requested expiry: absent → the parent's; null → none; else a future timestamp. */
function requestedExpiry(value: string | null | undefined, parent: CertificatePayload, now: number): number | null {
  if (value === undefined) return parent.expires_at === null ? null : Date.parse(parent.expires_at);
  if (value === null) return null;
  const t = parseTimestamp(value);
  if (t === null || t <= now) throw new ServiceError('invalid_expiry', undefined, { field: 'body.expires_at' });
  return t;
}

/** Registers the sub-delegation routes. */
export async function registerSubDelegationRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, SUBDELEGATIONS_ROUTES.listChildCertificates, async (request) => {
    const certId = (request.params as { cert_id: string }).cert_id;
    const cert = await ownedCertificate(ctx, request.session!.accountId, certId);
    return { certificates: (await ctx.store.delegations.childCertificates(cert.id)).map(certificateView) };
  });

  mount(app, SUBDELEGATIONS_ROUTES.subDelegate, async (request) => {
    const auth = request.apiKey!;
    const params = request.params as { connection_id: string; agent_id: string };
    const b = request.body as BodyT;
    if (params.connection_id !== auth.connectionId) throw new ServiceError('connection_not_found');
    const agent = await ctx.store.platforms.getAgent(params.agent_id);
    if (!agent || agent.connectionId !== auth.connectionId) throw new ServiceError('agent_not_found');
    const target = await ctx.store.platforms.getAgent(b.to_agent_id);
    if (!target || target.accountId !== agent.accountId) throw new ServiceError('agent_not_found',
      'No such agent.', { field: 'body.to_agent_id' });
    if (target.connectionId !== agent.connectionId) throw new ServiceError('delegation_cross_connection');
    if (target.id === agent.id) throw new ServiceError('invalid_request', 'An agent cannot delegate to itself.',
      { field: 'body.to_agent_id' });
    const now = ctx.clock();
    const chain = await parentChain(ctx, agent, b.parent_cert_id, now);
    const parent = chain[0]!.payload;
    const parentRight = checkRight(ctx, chain);
    const right = delegationRight(b.max_delegation_depth, ctx.config.maxDelegationDepth, 'body.max_delegation_depth');
    if (b.scopes.length === 0) throw new ServiceError('empty_scope', undefined, { field: 'body.scopes' });
    const scopes = [...requireScopes(b.scopes, 'body.scopes')].sort();
    const expiresAt = requestedExpiry(b.expires_at, parent, now);
    const constraints = constraintsFrom(b.constraints, 'body.constraints');
    const depth = depthOf(parent) + 1;
    if (right > parentRight - 1 || depth + right > ctx.config.maxDelegationDepth) {
      throw new ServiceError('delegation_widens', `max_delegation_depth: at most ${Math.min(parentRight - 1,
        ctx.config.maxDelegationDepth - depth)} here.`,
        { member: 'max_delegation_depth', detail: 'the parent\'s right' });
    }
    const narrow = checkNarrowing({ scopes, constraints, expiresAt }, grantOf(parent));
    if (!narrow.ok) throw new ServiceError('delegation_widens', `${narrow.member}: ${narrow.detail}.`,
      { member: narrow.member, detail: narrow.detail });

    const certId = `cert-${crypto.randomUUID()}`;
    const requestId = crypto.randomUUID();
    // The account holder whose delegation this is: the chain's (its root certificate's issuer).
    const holder = parent.issuer.account_id;
    const payload: CertificatePayload = {
      v: 1, typ: CERT_TYPE, cert_id: certId, request_id: requestId,
      issuer: { account_id: parent.issuer.account_id, agent_id: agent.id,
        public_key: JSON.parse(agent.publicKey) as CertificatePayload['issuer']['public_key'] },
      subject: { agent_id: target.id, public_key: JSON.parse(target.publicKey) as CertificatePayload['subject'][
        'public_key'] },
      connection_id: agent.connectionId, scopes, constraints,
      issued_at: new Date(now).toISOString(), expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
      ...(right > 0 ? { max_delegation_depth: right } : {}),
      parent: { cert_id: parent.cert_id, cert_sha256: certificateHash(chain[0]!), depth },
    };
    const seed = ctx.box.open(agent.secretEnc, AAD.agentSecret(agent.id));
    const signer = createSigner(seed);
    seed.fill(0);
    const cert = signCertificate(payload, signer);
    const certSha256 = certificateHash(cert);
    const conn = await ctx.store.platforms.getConnection(agent.connectionId);
    if (!conn || conn.status !== 'active') throw new ServiceError('connection_not_found');
    const record: CertificateRecord = {
      id: certId, requestId, accountId: holder, connectionId: agent.connectionId, agentId: target.id,
      approvedScope: scopes, constraints, certJson: canonicalize(cert), certSha256, status: 'approved', issuedAt: now,
      expiresAt, revokedAt: null, revokeReason: null, parentCertId: parent.cert_id, depth, maxDelegationDepth: right,
    };
    const ok = await ctx.store.delegations.issueSubDelegation({
      id: requestId, connectionId: agent.connectionId, accountId: holder, agentId: target.id,
      requestedScopes: scopes, proposedConstraints: null, state: 'approved', certId, decidedAt: now, createdAt: now,
    }, record, buildEvent(ctx, {
      type: 'delegation.approved', accountId: holder, platformId: conn.platformId, connectionId: conn.id, now,
      fields: { request_id: requestId, connection_id: conn.id, org_id: holder, agent_id: target.id,
        approved_scope: scopes, cert_json: cert,
        delegation_key_statement: delegationKeyStatement(payload, certSha256) },
    }));
    if (!ok) throw new ServiceError('no_active_delegation', 'The parent certificate was revoked concurrently.');
    ctx.nudgeWebhooks();
    return {
      cert_id: certId, request_id: requestId, parent_cert_id: parent.cert_id, depth, agent_id: target.id,
      delegated_by: agent.id, connection_id: conn.id, approved_scope: scopes, constraints, issued_at: payload.issued_at,
      expires_at: iso(expiresAt), max_delegation_depth: right, status: 'approved', cert_sha256: certSha256,
      cert_json: cert as unknown as Record<string, unknown>,
    };
  });
}
