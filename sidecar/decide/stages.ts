/**
 * Stages of the decision pipeline that work on certificates: loading and
 * verifying the certificate a proof refers to (cached by its SHA-256),
 * checking the proof signature, and the decision stages (status, expiry,
 * scope, constraints).
 */
import { canonicalize } from '../../src/canonical.js';
import { sha256Hex } from '../../src/crypto/encoding.js';
import { createVerifier, publicKeyFromJson } from '../../src/crypto/hybrid.js';
import type { HybridPublicKeyJson, HybridVerifier } from '../../src/crypto/hybrid.js';
import { verifyCertificate } from '../../src/certificate.js';
import type { DelegationCertificate } from '../../src/certificate.js';
import { PROOF_DOMAIN, proofSignedBytes } from '../../src/proof.js';
import type { ParsedProof } from '../../src/proof.js';
import { evaluateConstraints } from '../../src/constraints.js';
import type { ConstraintContext } from '../../src/constraints.js';
import type { ServiceContext } from '../context.js';
import type { VerifyKey } from '../crypto-pool.js';

/** A decision of stages 7–10. */
export interface Decision {
  decision: 'allow' | 'deny';
  reason: 'authorized' | 'not_delegated' | 'delegation_revoked' | 'delegation_expired' | 'constraint_denied';
  constraint?: string;
}

/** A prepared verifier for a public key JSON (imported KeyObjects cached). */
export function verifierFor(ctx: ServiceContext, key: HybridPublicKeyJson | string): HybridVerifier | null {
  const text = typeof key === 'string' ? key : canonicalize(key);
  let v = ctx.caches.verifiers.get(text);
  if (!v) {
    const pk = publicKeyFromJson(typeof key === 'string' ? JSON.parse(key) : key);
    if (!pk) return null;
    v = createVerifier(pk);
    ctx.caches.verifiers.set(text, v);
  }
  return v;
}

/**
 * The verified certificate a proof refers to. A cache hit (by SHA-256)
 * skips the store and the root signature check; a miss loads the
 * certificate, checks it matches the proof's id, hash and agent, and
 * verifies it with the issuer's root key.
 */
export async function loadVerifiedCertificate(ctx: ServiceContext, certId: string, certSha256: string, agentId: string):
  Promise<{ value: DelegationCertificate } | { error: 'invalid_proof' | 'invalid_signature' }> {
  const hit = ctx.caches.certs.get(certSha256);
  ctx.metrics.cache.inc({ cache: 'certificate', result: hit ? 'hit' : 'miss' });
  if (hit) {
    if (hit.payload.cert_id !== certId || hit.payload.subject.agent_id !== agentId) return { error: 'invalid_proof' };
    return { value: hit };
  }
  const rec = await ctx.store.delegations.getCertificate(certId);
  if (!rec || rec.certSha256 !== certSha256 || rec.agentId !== agentId) return { error: 'invalid_proof' };
  ctx.caches.noteStatus(rec.id, rec.status);
  const account = await ctx.store.accounts.getAccount(rec.accountId);
  const root = account?.rootPublicKey ? verifierFor(ctx, account.rootPublicKey) : null;
  if (!root) return { error: 'invalid_signature' };
  const check = verifyCertificate(JSON.parse(rec.certJson), root);
  if (!check.ok) return { error: 'invalid_signature' };
  ctx.caches.certs.set(certSha256, check.cert);
  return { value: check.cert };
}

/**
 * The subject (agent) key of a verified certificate, as the crypto pool takes it: decoded once
 * per certificate object (certificates are cached by hash), named by the SHA-256 of its JSON.
 */
const subjectKeys = new WeakMap<DelegationCertificate, VerifyKey | null>();
function subjectKey(cert: DelegationCertificate): VerifyKey | null {
  let k = subjectKeys.get(cert);
  if (k === undefined) {
    const json = cert.payload.subject.public_key;
    const publicKey = publicKeyFromJson(json);
    k = publicKey ? { id: sha256Hex(canonicalize(json)), publicKey } : null;
    subjectKeys.set(cert, k);
  }
  return k;
}

/**
 * Checks the proof's hybrid signature with the certificate's subject (agent) key, in a crypto
 * worker (or inline). Rejects when the worker fails: the pipeline answers `indeterminate`.
 */
export async function verifyProofSignature(ctx: ServiceContext, cert: DelegationCertificate, proof: ParsedProof): Promise<boolean> {
  const key = subjectKey(cert);
  return key !== null && ctx.crypto.verify(key, PROOF_DOMAIN, proofSignedBytes(proof.payload), proof.signature);
}

/** Stages 7–10: certificate status and expiry, scope, constraints. */
export async function checkDelegation(ctx: ServiceContext, cert: DelegationCertificate, requiredScope: string, context: ConstraintContext | undefined, now: number): Promise<Decision> {
  const p = cert.payload;
  let status = ctx.caches.statusOf(p.cert_id);
  ctx.metrics.cache.inc({ cache: 'revocation', result: status ? 'hit' : 'miss' });
  if (!status) {
    const rec = await ctx.store.delegations.getCertificate(p.cert_id);
    status = rec?.status ?? 'revoked';
    ctx.caches.noteStatus(p.cert_id, status);
    status = ctx.caches.statusOf(p.cert_id) ?? status;
  }
  if (status !== 'approved') return { decision: 'deny', reason: 'delegation_revoked' };
  if (p.expires_at !== null && Date.parse(p.expires_at) <= now) return { decision: 'deny', reason: 'delegation_expired' };
  if (!p.scopes.includes(requiredScope)) return { decision: 'deny', reason: 'not_delegated' };
  const c = evaluateConstraints(p.constraints, context, requiredScope, now);
  if (!c.ok) return { decision: 'deny', reason: 'constraint_denied', constraint: c.constraint };
  return { decision: 'allow', reason: 'authorized' };
}
