/**
 * `decide()`: the one decision pipeline behind `POST /v1/service/verify`.
 *
 * Stages, in order — each either passes or ends the call:
 *  1. authenticate the API key            → 401 invalid_api_key
 *  2. meter (balance pre-check)           → 402 credits_exhausted
 *  3. parse the request and bundle        → 400 invalid_request / invalid_scopes / invalid_proof
 *  4. challenge (known, live, audience)   → 400 invalid_challenge
 *  5. freshness                           → 400 proof_stale
 *  6. signatures (certificate and proof)  → 400 invalid_proof / invalid_signature
 *  7. certificate status and expiry       → deny delegation_revoked / delegation_expired
 *  8. scope                               → deny not_delegated
 *  9. constraints                         → deny constraint_denied (names the constraint)
 * 10. allow authorized
 * Then one transaction consumes the challenge, debits the call and appends
 * the audit row. No allow leaves before that commit; if the store cannot be
 * read or written the answer is 200 `indeterminate`.
 */
import crypto from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { ServiceError } from '../../src/errors.js';
import { isValidScope } from '../../src/scopes.js';
import { challengeId as challengeIdOf, parseProofBundle } from '../../src/proof.js';
import type { ParsedProof } from '../../src/proof.js';
import type { ConstraintContext } from '../../src/constraints.js';
import { authenticateApiKey } from '../http/auth.js';
import type { ApiKeyAuth } from '../http/auth.js';
import type { ServiceContext } from '../context.js';
import type { AuditEventRecord } from '../store/types.js';
import { checkDelegation, loadVerifiedCertificate, verifyProofSignature } from './stages.js';
import type { Decision } from './stages.js';

/** Price of one verify call: 0.002 dollars in micro-dollars. */
export const VERIFY_PRICE_MICROS = 2_000;
/** Allowed clock skew for a presentation time in the future. */
export const FUTURE_SKEW_MS = 5_000;

/** A verify request body (validated by the route schema). */
export interface VerifyInput {
  proof_bundle: unknown;
  required_scope: string;
  context?: ConstraintContext;
}

/** What decide() returns: a 200 decision body (errors are thrown as ServiceError). */
export interface VerifyResult {
  decision: 'allow' | 'deny' | 'indeterminate';
  decision_reason: string;
  agent_id?: string;
  cert_id?: string;
  scope?: string;
  constraint?: string;
  audit_event_id?: string;
}

/** Marks a store failure so the pipeline can fail closed. */
class StoreFault extends Error {
  readonly stage: 'read' | 'write';
  override readonly cause: unknown;
  constructor(stage: 'read' | 'write', cause: unknown) {
    super(`store ${stage} failed`);
    this.stage = stage;
    this.cause = cause;
  }
}

async function read<T>(p: Promise<T> | (() => Promise<T>)): Promise<T> {
  try { return await (typeof p === 'function' ? p() : p); } catch (err) { throw new StoreFault('read', err); }
}

/** Runs the decision pipeline for one verify call. */
export async function decide(ctx: ServiceContext, apiKey: unknown, body: VerifyInput, invalidBody: ServiceError | null = null, log: FastifyBaseLogger = ctx.log): Promise<VerifyResult> {
  try {
    return await run(ctx, apiKey, body, invalidBody);
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    const reason = err instanceof StoreFault ? (err.stage === 'read' ? 'store_unavailable' : 'audit_write_failed') : 'internal_error';
    log.error({ err: err instanceof StoreFault ? err.cause : err, reason }, 'verify failed closed: indeterminate');
    ctx.metrics.verifyDecisions.inc({ decision: 'indeterminate', reason });
    return { decision: 'indeterminate', decision_reason: reason };
  }
}

async function run(ctx: ServiceContext, apiKey: unknown, body: VerifyInput, invalidBody: ServiceError | null): Promise<VerifyResult> {
  // 1. authenticate
  const auth: ApiKeyAuth = await read(() => authenticateApiKey(ctx, apiKey)).catch((err: unknown) => {
    if (err instanceof StoreFault && err.cause instanceof ServiceError) throw err.cause;
    throw err;
  });
  // 2. meter: refuse before any work when the balance cannot cover the call
  if ((await read(ctx.store.proofs.creditsOf(auth.accountId))) < VERIFY_PRICE_MICROS) throw new ServiceError('credits_exhausted');
  const now = ctx.clock();
  const reject = async (err: ServiceError, challengeId: string | null = null): Promise<never> => {
    // A 400 writes no audit row. It is billed only when it spends one of the caller's own live
    // challenges (stages 5-6): a request that never got that far costs nothing, so a stranger
    // who sends garbage through a gateway cannot drain the gateway owner's credits.
    if (challengeId === null) throw err;
    const r = await ctx.store.proofs.consumeAndDebit(challengeId, auth.connectionId, now, auth.accountId, VERIFY_PRICE_MICROS).catch(() => 'committed' as const);
    if (r === 'credits_exhausted') throw new ServiceError('credits_exhausted');
    if (r === 'invalid_challenge') throw new ServiceError('invalid_challenge');
    throw err;
  };

  // 3. parse
  if (invalidBody) return reject(invalidBody);
  if (!isValidScope(body.required_scope)) {
    const shown = String(body.required_scope).slice(0, 140);
    return reject(new ServiceError('invalid_scopes', `required_scope is not in the scope vocabulary: ${shown}.`, { field: 'body.required_scope', invalid_scopes: [shown] }));
  }
  const proof: ParsedProof | null = parseProofBundle(body.proof_bundle);
  if (!proof) return reject(new ServiceError('invalid_proof', 'proof_bundle is malformed, oversized or not a proof bundle.'));
  const p = proof.payload;

  // 4. challenge: known, unconsumed, unexpired, issued to this connection (the audience)
  const challengeId = challengeIdOf(p.challenge);
  const ch = await read(ctx.store.proofs.getChallenge(challengeId));
  if (ch && ch.consumedAt === null && ch.expiresAt <= now) ctx.metrics.challenges.inc({ event: 'expired' });
  if (!ch || ch.consumedAt !== null || ch.expiresAt <= now || ch.audienceConnectionId !== auth.connectionId || p.aud !== auth.connectionId) {
    return reject(new ServiceError('invalid_challenge'));
  }

  // 5. freshness
  const windowMs = ctx.config.proofFreshnessSeconds * 1000;
  if (proof.presentedAt < ch.createdAt || now - proof.presentedAt > windowMs || proof.presentedAt - now > FUTURE_SKEW_MS) {
    return reject(new ServiceError('proof_stale', `The proof was presented outside the ${ctx.config.proofFreshnessSeconds} s freshness window.`), challengeId);
  }

  // 6. certificate and signatures. The certificate must delegate to an agent of the verifying
  // connection: a certificate another account issued to its own agent authorizes nothing here.
  const cert = await read(loadVerifiedCertificate(ctx, p.cert_id, p.cert_sha256, p.agent_id));
  if ('error' in cert) return reject(new ServiceError(cert.error), challengeId);
  if (cert.value.payload.connection_id !== auth.connectionId) {
    return reject(new ServiceError('invalid_proof', 'The certificate was not issued for this connection.'), challengeId);
  }
  // In a crypto worker: a worker failure rejects, and decide() answers indeterminate (internal_error).
  if (!(await verifyProofSignature(ctx, cert.value, proof))) return reject(new ServiceError('invalid_signature'), challengeId);

  // 7–10. status, expiry, scope, constraints
  let decision: Decision = await read(checkDelegation(ctx, cert.value, body.required_scope, body.context, now));

  // Commit: challenge + debit + audit in one transaction (re-checking revocation for an allow).
  for (let attempt = 0; attempt < 2; attempt++) {
    const audit: AuditEventRecord = {
      id: crypto.randomUUID(), accountId: auth.accountId, eventType: decision.decision === 'allow' ? 'proof.verified' : 'proof.rejected',
      connectionId: auth.connectionId, agentId: p.agent_id, certId: p.cert_id, requiredScope: body.required_scope,
      details: { decision: decision.decision, decision_reason: decision.reason, ...(decision.constraint ? { constraint: decision.constraint } : {}) },
      createdAt: now,
    };
    let r;
    try {
      r = await ctx.store.proofs.commitDecision({
        challengeId, audienceConnectionId: auth.connectionId, now, accountId: auth.accountId, priceMicros: VERIFY_PRICE_MICROS,
        decision: decision.decision, certId: p.cert_id, audit,
      });
    } catch (err) {
      throw new StoreFault('write', err);
    }
    if (r === 'certificate_revoked') {
      ctx.caches.markRevoked(p.cert_id);
      decision = { decision: 'deny', reason: 'delegation_revoked' };
      continue;
    }
    // Spent by a concurrent verify since stage 4: the same 400 as stage 4 gives, unbilled like it.
    if (r === 'invalid_challenge') throw new ServiceError('invalid_challenge');
    if (r === 'credits_exhausted') throw new ServiceError('credits_exhausted');
    ctx.metrics.challenges.inc({ event: 'consumed' });
    ctx.metrics.verifyDecisions.inc({ decision: decision.decision, reason: decision.reason });
    return {
      decision: decision.decision, decision_reason: decision.reason, agent_id: p.agent_id, cert_id: p.cert_id,
      scope: body.required_scope, ...(decision.constraint ? { constraint: decision.constraint } : {}), audit_event_id: audit.id,
    };
  }
  throw new StoreFault('write', new Error('decision commit did not settle'));
}
