/**
 * Delegation routes: self-request, approve, revoke (spec endpoints 8–10),
 * and deny, list and read (which the spec leaves out), plus the account's
 * root public key for offline certificate verification.
 *
 * Request states: `pending` → `approved` | `denied`. Certificate states:
 * `approved` → `revoked`.
 */
import { ONBOARDED, defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { Certificate, DelegationRequest } from '../api/schemas.js';
import { ServiceError } from '../../src/errors.js';
import { canonicalize } from '../../src/canonical.js';
import { createSigner, publicKeyFromJson } from '../../src/crypto/hybrid.js';
import { CERT_TYPE, MAX_DELEGATION_DEPTH, certificateHash, signCertificate } from '../../src/certificate.js';
import type { CertificatePayload } from '../../src/certificate.js';
import type { Constraints } from '../../src/constraints.js';
import { approvedConstraints } from './proposals.js';
import { AAD } from '../secrets.js';
import { buildEvent } from '../events.js';
import type { ServiceContext } from '../context.js';
import type { CertificateRecord, DelegationRequestRecord } from '../store/types.js';
import { delegationRight, revokeWithDescendants } from './revocation.js';
import { TEXT_RULES, iso, ownedCertificate, ownedConnection, ownedRequest, requireScopes,
  requireText } from '../http/resources.js';

const SelfRequestBody = Type.Object({
  connection_id: Type.String({ maxLength: 100 }),
  agent_id: Type.Optional(Type.String({ maxLength: 100 })),
}, { additionalProperties: false });
const ApproveBody = Type.Object({
  approved_scope: Type.Array(Type.Unknown(), { maxItems: 256 }),
  expires_at: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
  constraints: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
  max_delegation_depth: Type.Optional(Type.Unknown()),
}, { additionalProperties: false });

/** The optional `{reason}` body of deny (the body itself may be absent). */
function optionalReason(body: unknown): string | null {
  if (body === undefined || body === null) return null;
  if (typeof body !== 'object' || Array.isArray(body)) throw new ServiceError(
    'invalid_request', 'The body must be an object.', { field: 'body' });
  const extra = Object.keys(body).find((k) => k !== 'reason');
  if (extra) throw new ServiceError(
    'invalid_request', `body.${extra} is not a known field.`, { field: `body.${extra}` });
  const r = (body as { reason?: unknown }).reason;
  if (r === undefined) return null;
  if (typeof r !== 'string') throw new ServiceError(
    'invalid_request', 'body.reason must be a string.', { field: 'body.reason' });
  return requireText(r, 'body.reason', TEXT_RULES.reason);
}
const RevokeBody = Type.Object({ reason: Type.String({ maxLength: 500 }) }, { additionalProperties: false });
const IdParam = (name: string) => Type.Object({ [name]: Type.String({ maxLength: 100 }) });

/** View of a delegation request. */
export function requestView(r: DelegationRequestRecord): Static<typeof DelegationRequest> {
  return {
    request_id: r.id, connection_id: r.connectionId, agent_id: r.agentId, requested_scope: r.requestedScopes,
    proposed_constraints: r.proposedConstraints, state: r.state, cert_id: r.certId, decided_at: iso(r.decidedAt),
    created_at: iso(r.createdAt),
  };
}

/** View of a certificate (with the signed certificate itself). */
export function certificateView(c: CertificateRecord): Static<typeof Certificate> {
  return {
    cert_id: c.id, request_id: c.requestId, connection_id: c.connectionId, agent_id: c.agentId,
      approved_scope: c.approvedScope,
    constraints: (c.constraints ?? null) as Record<string, unknown> | null, status: c.status, issued_at: iso(
      c.issuedAt), expires_at: iso(c.expiresAt),
    revoked_at: iso(c.revokedAt), revoke_reason: c.revokeReason, cert_sha256: c.certSha256, cert_json: JSON.parse(
      c.certJson) as Record<string, unknown>,
    parent_cert_id: c.parentCertId, depth: c.depth, max_delegation_depth: c.maxDelegationDepth,
  };
}

/** The last instant with a 4-digit year in ISO 8601 (`9999-12-31T23:59:59.999Z`). */
const MAX_TIMESTAMP = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const TIMESTAMP_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:Z|[+-](\d{2}):(\d{2}))$/;

/**
 * Parses a strict ISO 8601 date-time with an explicit offset (`Z` or `±hh:mm`)
 * into Unix ms, or null. The calendar date and the time must exist (no
 * `2030-02-30` rolled over into March) and a time without an offset is
 * refused (it would be read in the server's local zone).
 */
export function parseTimestamp(s: string): number | null {
  const m = TIMESTAMP_RE.exec(s);
  if (!m) return null;
  const [y, mo, d, h, mi, sec] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const day = new Date(0);
  day.setUTCFullYear(y, mo - 1, d);
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) return null;
  if (h > 23 || mi > 59 || sec > 59) return null;
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return null;
  const t = Date.parse(s);
  // Past year 9999 (reachable through a negative offset) the ISO form needs a 6-digit year, which certificates do not allow.
  return Number.isFinite(t) && t <= MAX_TIMESTAMP ? t : null;
}

/** The `delegation_key_statement` of `delegation.approved`: a one-line, human-readable summary of what the certificate binds. */
export function delegationKeyStatement(p: CertificatePayload, certSha256: string): string {
  const who = p.parent === undefined ? `account ${p.issuer.account_id} delegates`
    : `agent ${p.issuer.agent_id} of account ${p.issuer.account_id} sub-delegates (under ${p.parent.cert_id}, `
      + `depth ${p.parent.depth})`;
  return `agent-authz/v1 delegation ${p.cert_id} (sha256 ${certSha256}): ${who} [${p.scopes.join(' ')}] `
    + `to agent ${p.subject.agent_id} (ed25519 ${p.subject.public_key.ed25519}) on connection ${p.connection_id} `
    + `from ${p.issued_at} until ${p.expires_at ?? 'revoked'}`;
}

/** The routes of this file, each defined once (api/route.ts). */
export const DELEGATIONS_ROUTES = {
  createSelfRequest: defineRoute({
    method: 'POST', url: '/v1/service/delegations/self-request', auth: 'session_csrf', permission: 'delegations_decide',
    schema: { body: SelfRequestBody, tags: ['delegations'] },
    operation: op('createSelfRequest', 'Request a delegation (spec 4.8)',
      'Asks for the connection\'s full scope ceiling for one of its agents (`agent_id` is needed when it has several).',
      S.DelegationRequest, ['connection_not_found', 'agent_not_found', 'agent_required']),
  }),
  approveDelegationRequest: defineRoute({
    method: 'POST', url: '/v1/service/delegations/requests/:request_id/approve', auth: 'session_csrf',
    permission: 'delegations_decide',
    schema: { params: IdParam('request_id'), body: ApproveBody, tags: ['delegations'] },
    operation: {
      ...op('approveDelegationRequest', 'Approve a delegation request (spec 4.9)',
        'Issues a certificate signed by the account\'s root identity, for all or some of the requested scopes, with '
          + 'optional expiry and constraints. A request with `proposed_constraints` keeps them when `constraints` is '
          + 'absent; given constraints must be at least as strict (400 constraints_loosened). '
          + 'Event delegation.approved.',
        S.Approval, ['request_not_found', 'request_not_pending', 'empty_scope', 'invalid_scopes', 'scope_not_requested',
          'invalid_expiry', 'invalid_constraints', 'constraints_loosened', 'invalid_delegation_depth', ...ONBOARDED]),
      bodyMembers: { constraints: Type.Union([Type.Ref('Constraints'), Type.Null()], {
        description: 'Constraints (docs/constraints.md); null or `{}` for none; absent: the request\'s '
          + '`proposed_constraints` (none for a self-request).' }),
      max_delegation_depth: Type.Integer({ minimum: 0, maximum: MAX_DELEGATION_DEPTH, description: 'The right to '
        + 'delegate (docs/certificates.md, "Sub-delegation"): how many levels of sub-delegation the agent may create '
        + 'below this certificate, at most SIDECAR_MAX_DELEGATION_DEPTH; 0 or absent: none.' }) },
    },
  }),
  denyDelegationRequest: defineRoute({
    method: 'POST', url: '/v1/service/delegations/requests/:request_id/deny', auth: 'session_csrf',
    permission: 'delegations_decide',
    schema: { params: IdParam('request_id'), tags: ['delegations'] },
    operation: {
      ...op('denyDelegationRequest', 'Deny a delegation request',
        'Optional body `{reason}`. Event delegation.denied.', S.Denial, ['request_not_found', 'request_not_pending']),
      body: S.DenyDelegationBody,
    },
  }),
  revokeCertificate: defineRoute({
    method: 'POST', url: '/v1/service/delegations/:cert_id/revoke', auth: 'session_csrf',
    permission: 'delegations_decide',
    schema: { params: IdParam('cert_id'), body: RevokeBody, tags: ['delegations'] },
    operation: op('revokeCertificate', 'Revoke a certificate (spec 4.10)',
      'Later verifies of proofs made earlier answer deny/delegation_revoked; present answers 404 '
        + 'no_active_delegation. Every sub-delegated descendant is revoked with it (docs/certificates.md). '
        + 'Repeating it answers the same. Event delegation.revoked, one per certificate revoked.',
      S.Revocation, ['certificate_not_found']),
  }),
  listDelegationRequests: defineRoute({
    method: 'GET', url: '/v1/service/delegations/requests', auth: 'session', permission: 'read',
    schema: { tags: ['delegations'] },
    operation: op('listDelegationRequests', 'List delegation requests', 'The account\'s requests, newest first.',
      S.DelegationRequestList),
  }),
  getDelegationRequest: defineRoute({
    method: 'GET', url: '/v1/service/delegations/requests/:request_id', auth: 'session', permission: 'read',
    schema: { params: IdParam('request_id'), tags: ['delegations'] },
    operation: op('getDelegationRequest', 'Read a delegation request', 'One request.', S.DelegationRequest, [
      'request_not_found']),
  }),
  listCertificates: defineRoute({
    method: 'GET', url: '/v1/service/delegations', auth: 'session', permission: 'read',
    schema: { tags: ['delegations'] },
    operation: op('listCertificates', 'List certificates',
      'The account\'s certificates, with the signed certificate JSON.', S.CertificateList),
  }),
  getCertificate: defineRoute({
    method: 'GET', url: '/v1/service/delegations/:cert_id', auth: 'session', permission: 'read',
    schema: { params: IdParam('cert_id'), tags: ['delegations'] },
    operation: op('getCertificate', 'Read a certificate', 'One certificate, with the signed certificate JSON.',
      S.Certificate, ['certificate_not_found']),
  }),
  getIdentity: defineRoute({
    method: 'GET', url: '/v1/service/identity', auth: 'session', permission: 'read',
    schema: { tags: ['delegations'] },
    operation: op('getIdentity', 'Read the root public key',
      'The account\'s root public key, to verify certificates offline.', S.Identity, ONBOARDED),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the delegation routes. */
export async function registerDelegationRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, DELEGATIONS_ROUTES.createSelfRequest, async (request) => {
    const accountId = request.session!.accountId;
    const b = request.body as { connection_id: string; agent_id?: string };
    const conn = await ownedConnection(ctx, accountId, b.connection_id);
    if (conn.status !== 'active') throw new ServiceError('connection_not_found', 'The connection was removed.');
    let agentId: string;
    if (b.agent_id !== undefined) {
      const agent = await ctx.store.platforms.getAgent(b.agent_id);
      if (!agent || agent.connectionId !== conn.id) throw new ServiceError(
        'agent_not_found', 'No such agent on this connection.');
      agentId = agent.id;
    } else {
      const agents = await ctx.store.platforms.listAgents({ connectionId: conn.id });
      if (agents.length !== 1) throw new ServiceError(
        'agent_required', `The connection has ${agents.length} agents; pass agent_id.`);
      agentId = agents[0]!.id;
    }
    const rec: DelegationRequestRecord = {
      id: crypto.randomUUID(), connectionId: conn.id, accountId, agentId, requestedScopes: conn.allowedScopes,
      proposedConstraints: null, state: 'pending', certId: null, decidedAt: null, createdAt: ctx.clock(),
    };
    await ctx.store.delegations.createRequest(rec);
    return requestView(rec);
  });

  mount(app, DELEGATIONS_ROUTES.approveDelegationRequest, async (request) => {
    const accountId = request.session!.accountId;
    const b = request.body as { approved_scope: unknown[]; expires_at?: string | null; constraints?: Record<string,
      unknown> | null; max_delegation_depth?: unknown };
    const req = await ownedRequest(ctx, accountId, (request.params as { request_id: string }).request_id);
    if (req.state !== 'pending') throw new ServiceError(
      'request_not_pending', `The request is ${req.state}.`, { state: req.state });
    if (b.approved_scope.length === 0) throw new ServiceError(
      'empty_scope', undefined, { field: 'body.approved_scope' });
    const scopes = requireScopes(b.approved_scope, 'body.approved_scope');
    const notRequested = scopes.filter((s) => !req.requestedScopes.includes(s));
    if (notRequested.length) throw new ServiceError(
      'scope_not_requested', `Not requested: ${notRequested.join(', ')}.`, {
        field: 'body.approved_scope', not_requested: notRequested });
    const now = ctx.clock();
    let expiresAt: number | null = null;
    if (b.expires_at !== undefined && b.expires_at !== null) {
      const t = parseTimestamp(b.expires_at);
      if (t === null || t <= now) throw new ServiceError('invalid_expiry', undefined, { field: 'body.expires_at' });
      expiresAt = t;
    }
    const right = delegationRight(b.max_delegation_depth, ctx.config.maxDelegationDepth, 'body.max_delegation_depth');
    const constraints = approvedConstraints(b.constraints, req.proposedConstraints as Constraints | null, scopes);
    const account = await ctx.store.accounts.getAccount(accountId);
    const agent = await ctx.store.platforms.getAgent(req.agentId);
    const conn = await ctx.store.platforms.getConnection(req.connectionId);
    if (!account?.rootSecretEnc || !account.rootPublicKey || !agent) throw new ServiceError('onboarding_incomplete');
    if (!conn || conn.status !== 'active') throw new ServiceError('request_not_pending', 'The connection was removed.');

    const certId = `cert-${crypto.randomUUID()}`;
    const payload: CertificatePayload = {
      v: 1, typ: CERT_TYPE, cert_id: certId, request_id: req.id,
      issuer: { account_id: accountId, public_key: JSON.parse(account.rootPublicKey) as CertificatePayload['issuer'][
        'public_key'] },
      subject: { agent_id: agent.id, public_key: JSON.parse(agent.publicKey) as CertificatePayload['subject'][
        'public_key'] },
      connection_id: req.connectionId, scopes: [...scopes].sort(), constraints,
      issued_at: new Date(now).toISOString(), expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
      ...(right > 0 ? { max_delegation_depth: right } : {}),
    };
    const seed = ctx.box.open(account.rootSecretEnc, AAD.rootSecret(accountId));
    const signer = createSigner(seed);
    seed.fill(0);
    const t0 = process.hrtime.bigint();
    const cert = signCertificate(payload, signer);
    ctx.metrics.signDuration.observe({ kind: 'certificate' }, Number(process.hrtime.bigint() - t0) / 1e9);
    if (!publicKeyFromJson(payload.issuer.public_key)) throw new TypeError('stored root public key is malformed');
    const certSha256 = certificateHash(cert);
    const record: CertificateRecord = {
      id: certId, requestId: req.id, accountId, connectionId: req.connectionId, agentId: agent.id,
        approvedScope: payload.scopes,
      constraints, certJson: canonicalize(cert), certSha256, status: 'approved', issuedAt: now, expiresAt,
        revokedAt: null, revokeReason: null, parentCertId: null, depth: 0, maxDelegationDepth: right,
    };
    const ok = await ctx.store.delegations.approveRequest(req.id, record, buildEvent(ctx, {
      type: 'delegation.approved', accountId, platformId: conn.platformId, connectionId: conn.id, now,
      fields: {
        request_id: req.id, connection_id: conn.id, org_id: accountId, agent_id: agent.id,
          approved_scope: payload.scopes,
        cert_json: cert, delegation_key_statement: delegationKeyStatement(payload, certSha256),
      },
    }));
    if (!ok) throw new ServiceError('request_not_pending', 'The request was decided concurrently.');
    ctx.nudgeWebhooks();
    return {
      approved_scope: payload.scopes, cert_id: certId, expires_at: iso(expiresAt), issued_at: payload.issued_at,
        status: 'approved',
      request_id: req.id, agent_id: agent.id, connection_id: conn.id, constraints, cert_sha256: certSha256,
      max_delegation_depth: right,
    };
  });

  mount(app, DELEGATIONS_ROUTES.denyDelegationRequest, async (request) => {
    const accountId = request.session!.accountId;
    const req = await ownedRequest(ctx, accountId, (request.params as { request_id: string }).request_id);
    if (req.state !== 'pending') throw new ServiceError(
      'request_not_pending', `The request is ${req.state}.`, { state: req.state });
    const reason = optionalReason(request.body);
    const conn = await ctx.store.platforms.getConnection(req.connectionId);
    const now = ctx.clock();
    const ok = await ctx.store.delegations.denyRequest(req.id, now, buildEvent(ctx, {
      type: 'delegation.denied', accountId, platformId: conn!.platformId, connectionId: req.connectionId, now,
      fields: { request_id: req.id, connection_id: req.connectionId, org_id: accountId, agent_id: req.agentId, reason },
    }));
    if (!ok) throw new ServiceError('request_not_pending', 'The request was decided concurrently.');
    ctx.nudgeWebhooks();
    return { request_id: req.id, state: 'denied', decided_at: iso(now) };
  });

  mount(app, DELEGATIONS_ROUTES.revokeCertificate, async (request) => {
    const accountId = request.session!.accountId;
    const cert = await ownedCertificate(ctx, accountId, (request.params as { cert_id: string }).cert_id);
    const reason = requireText((request.body as { reason: string }).reason, 'body.reason', TEXT_RULES.reason);
    return revokeWithDescendants(ctx, cert, reason);
  });

  mount(app, DELEGATIONS_ROUTES.listDelegationRequests, async (request) => {
    return { requests: (await ctx.store.delegations.listRequests(request.session!.accountId)).map(requestView) };
  });

  mount(app, DELEGATIONS_ROUTES.getDelegationRequest, async (request) => {
    return requestView(await ownedRequest(ctx, request.session!.accountId, (request.params as {
      request_id: string }).request_id));
  });

  mount(app, DELEGATIONS_ROUTES.listCertificates, async (request) => {
    return { certificates: (await ctx.store.delegations.listCertificates(request.session!.accountId)).map(
      certificateView) };
  });

  mount(app, DELEGATIONS_ROUTES.getCertificate, async (request) => {
    return certificateView(await ownedCertificate(ctx, request.session!.accountId, (request.params as {
      cert_id: string }).cert_id));
  });

  mount(app, DELEGATIONS_ROUTES.getIdentity, async (request) => {
    const a = await ctx.store.accounts.getAccount(request.session!.accountId);
    if (!a?.rootPublicKey) throw new ServiceError('onboarding_incomplete');
    return { account_id: a.id, root_public_key: JSON.parse(a.rootPublicKey) as unknown };
  });
}
