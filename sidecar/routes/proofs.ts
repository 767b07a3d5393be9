/**
 * Challenge and present (spec endpoints 11 and 12). Present builds a proof
 * bundle; it authorizes nothing (only verify decides). It claims the challenge
 * before signing, so one challenge costs at most one signature. With `operation` the
 * bundle is bound to that one operation (src/operation.ts, docs/proofs.md).
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../src/errors.js';
import { b64urlEncode } from '../../src/crypto/encoding.js';
import { PROOF_DOMAIN, PROOF_TYPE, challengeId, isChallengeShape, proofSignedBytes } from '../../src/proof.js';
import type { ProofBundle, ProofPayload } from '../../src/proof.js';
import { parseOperation } from '../../src/operation.js';
import type { BoundOperation } from '../../src/operation.js';
import type { HybridSignatureJson } from '../../src/crypto/hybrid.js';
import { AAD } from '../secrets.js';
import type { ServiceContext } from '../context.js';
import { CryptoPoolError } from '../crypto/pool.js';
import type { AgentRecord } from '../store/types.js';
import { NoBody, iso } from '../http/resources.js';

const PresentBody = Type.Object(
  { challenge: Type.String({ maxLength: 256 }), operation: Type.Optional(Type.Unknown()) }, {
    additionalProperties: false });

/** The optional `operation` of present, validated strictly (400 `invalid_request` naming the member). */
function boundOperation(input: unknown): BoundOperation | undefined {
  if (input === undefined) return undefined;
  const op = parseOperation(input);
  if (op.ok) return op.value;
  const field = op.member === '' ? 'body.operation' : `body.operation.${op.member}`;
  throw new ServiceError('invalid_request', `${field} ${op.message}.`, { field });
}
const PresentParams = Type.Object(
  { connection_id: Type.String({ maxLength: 100 }), agent_id: Type.String({ maxLength: 100 }) });

/**
 * Signs a proof payload with the agent's custodial key, in a crypto worker (or inline). The
 * agent's seed is opened only when the worker does not hold its signer yet. A worker failure
 * is 503 `service_unavailable`; the challenge, claimed before signing, stays presented (fail
 * closed: the agent asks for a new one).
 */
async function signAsAgent(ctx: ServiceContext, agent: AgentRecord,
  payload: ProofPayload): Promise<HybridSignatureJson> {
  try {
    return await ctx.crypto.sign({ id: agent.id, seed: () => ctx.box.open(agent.secretEnc, AAD.agentSecret(agent.id)) },
      PROOF_DOMAIN, proofSignedBytes(payload));
  } catch (err) {
    if (!(err instanceof CryptoPoolError)) throw err;
    ctx.log.error({ err, agent_id: agent.id }, 'proof signing failed in the crypto pool');
    throw new ServiceError('service_unavailable', 'The proof could not be signed; try again.');
  }
}

/** The routes of this file, each defined once (api/route.ts). */
export const PROOFS_ROUTES = {
  createChallenge: defineRoute({
    method: 'POST', url: '/v1/service/challenge', auth: 'api_key',
    schema: { body: NoBody, tags: ['proofs'] },
    operation: op('createChallenge', 'Get a challenge (spec 4.11)',
      'A single-use challenge for one proof, issued to the API key\'s connection.', S.Challenge),
  }),
  presentProof: defineRoute({
    method: 'POST', url: '/v1/service/connections/:connection_id/agents/:agent_id/present', auth: 'api_key',
    schema: { params: PresentParams, body: PresentBody, tags: ['proofs'] },
    operation: op('presentProof', 'Build a proof bundle (spec 4.12)',
      'Signs the challenge with the agent\'s custodial key. Authorizes nothing: only verify decides.',
      S.Presentation, ['connection_not_found', 'agent_not_found', 'no_active_delegation', 'invalid_challenge',
        'service_unavailable']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers challenge and present. */
export async function registerProofRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, PROOFS_ROUTES.createChallenge, async (request) => {
    const auth = request.apiKey!;
    const challenge = b64urlEncode(crypto.randomBytes(32));
    const now = ctx.clock();
    const expiresAt = now + ctx.config.challengeTtlSeconds * 1000;
    await ctx.store.proofs.insertChallenge({
      id: challengeId(challenge), audienceConnectionId: auth.connectionId, accountId: auth.accountId,
      expiresAt, presentedAt: null, consumedAt: null, createdAt: now,
    });
    ctx.metrics.challenges.inc({ event: 'issued' });
    return { challenge, expires_at: iso(expiresAt) };
  });

  mount(app, PROOFS_ROUTES.presentProof, async (request, reply) => {
    const started = process.hrtime.bigint();
    const auth = request.apiKey!;
    const params = request.params as { connection_id: string; agent_id: string };
    if (params.connection_id !== auth.connectionId) throw new ServiceError('connection_not_found');
    const agent = await ctx.store.platforms.getAgent(params.agent_id);
    if (!agent || agent.connectionId !== auth.connectionId) throw new ServiceError('agent_not_found');
    const now = ctx.clock();
    const cert = await ctx.store.delegations.activeCertificateForAgent(agent.id);
    if (!cert || ctx.caches.statusOf(cert.id) === 'revoked' || (
      cert.expiresAt !== null && cert.expiresAt <= now)) throw new ServiceError('no_active_delegation');
    const body = request.body as { challenge: string; operation?: unknown };
    const operation = boundOperation(body.operation);
    const challenge = body.challenge;
    // Claimed before any signature work, in one conditional write: of concurrent presents of one
    // challenge (on any replica) one signs, the others are refused here. The challenge must have
    // been issued to the agent's own connection: that connection is the only audience whose
    // verify can accept a proof from this agent's certificate.
    const ch = isChallengeShape(challenge) ? await ctx.store.proofs.claimChallenge(
      challengeId(challenge), agent.connectionId, now) : undefined;
    if (!ch) throw new ServiceError('invalid_challenge');

    const t0 = process.hrtime.bigint();
    const payload: ProofPayload = {
      v: 1, typ: PROOF_TYPE, challenge, aud: ch.audienceConnectionId, agent_id: agent.id, cert_id: cert.id,
      cert_sha256: cert.certSha256, presented_at: new Date(now).toISOString(),
    };
    if (operation !== undefined) payload.operation = operation;
    const bundle: ProofBundle = { ...payload, sig: await signAsAgent(ctx, agent, payload) };
    ctx.metrics.signDuration.observe({ kind: 'proof' }, Number(process.hrtime.bigint() - t0) / 1e9);
    // Recorded only for a bundle that is returned: after signing, before answering.
    await ctx.store.proofs.recordPresentation({
      id: crypto.randomUUID(), accountId: agent.accountId, eventType: 'proof.presented',
        connectionId: agent.connectionId,
      agentId: agent.id, certId: cert.id, requiredScope: operation?.scope ?? null,
      details: { audience_connection_id: ch.audienceConnectionId, ...(operation === undefined ? {} : { operation }) },
        createdAt: now,
    });
    ctx.metrics.presentDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
    // The bundle's JSON is serialized once and used twice: as `proof_bundle` and, base64, as
    // `proof_header` (what encodeProofHeader() returns).
    const bundleJson = JSON.stringify(bundle);
    void reply.type('application/json; charset=utf-8');
    return `{"proof_bundle":${bundleJson},"proof_header":"${Buffer.from(bundleJson, 'utf8').toString('base64')}",`
      + `"cert_id":${JSON.stringify(cert.id)},"challenge_expires_at":${JSON.stringify(iso(ch.expiresAt))}}`;
  });
}
