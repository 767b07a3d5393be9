/**
 * Stage 6, certificate: loads the certificate the proof names and checks it
 * (cached by its SHA-256: a hit skips the store and the root signature), or
 * refuses. The certificate must match the proof's id, hash and agent (400
 * `invalid_proof`), verify under its issuer's root key (400
 * `invalid_signature`), and delegate to an agent of the verifying connection:
 * a certificate another account issued to its own agent authorizes nothing
 * here (400 `invalid_proof`). Each of these is billed. A store failure while
 * loading it is `store_unavailable`.
 */
import { canonicalize } from '../../../src/canonical.js';
import { verifyCertificate } from '../../../src/certificate.js';
import type { DelegationCertificate } from '../../../src/certificate.js';
import { createVerifier, publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import type { HybridPublicKeyJson, HybridVerifier } from '../../../src/crypto/hybrid.js';
import { ServiceError } from '../../../src/errors.js';
import type { ServiceContext } from '../../context.js';
import { need, read } from '../stage.js';
import type { Stage } from '../stage.js';

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

/** The certificate stage. */
export const certificate: Stage = {
  name: 'certificate',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    const p = need(call.proof, 'proof').payload;
    const cert = await read(() => loadVerifiedCertificate(ctx, p.cert_id, p.cert_sha256, p.agent_id));
    if ('error' in cert) throw new ServiceError(cert.error);
    if (cert.value.payload.connection_id !== auth.connectionId) {
      throw new ServiceError('invalid_proof', 'The certificate was not issued for this connection.');
    }
    call.cert = cert.value;
  },
};
