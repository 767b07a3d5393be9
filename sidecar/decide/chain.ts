/**
 * Loads a certificate with its whole chain of parents (docs/certificates.md,
 * "Sub-delegation"), each link verified: the root under the account holder's
 * root key, every sub-delegated link under its parent (`src/chain.ts`
 * `checkLink`: named by id and hash, signed by the parent's agent, no wider,
 * within the right to delegate). Verified certificates are cached by SHA-256;
 * a cached link was verified together with its parents, which are reloaded
 * when the cache lost them. Used by the certificate stage (a proof's), the
 * subject stage (a grant check's) and the sub-delegation route (the parent).
 */
import { canonicalize } from '../../src/canonical.js';
import { MAX_DELEGATION_DEPTH, certificateShapeError, verifyCertificate } from '../../src/certificate.js';
import type { DelegationCertificate } from '../../src/certificate.js';
import { checkLink } from '../../src/chain.js';
import type { LinkFault } from '../../src/chain.js';
import { createVerifier, publicKeyFromJson } from '../../src/crypto/hybrid.js';
import type { HybridPublicKeyJson, HybridVerifier } from '../../src/crypto/hybrid.js';
import type { ServiceContext } from '../context.js';

/** A link of a chain, as a deny or refusal names it. */
export interface LinkRef {
  /** 0 for the certificate the account holder signed. */
  depth: number;
  cert_id: string;
}

/** A verified chain, leaf first and root last; or why it is not one (the link that failed, when known). */
export type ChainLoad = { chain: DelegationCertificate[] }
  | { error: 'invalid_proof' | 'invalid_signature'; link?: LinkRef; fault?: LinkFault | 'too_deep' };

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

/** The parent reference of an untrusted certificate JSON, when it has a well-formed one. */
function parentOf(json: unknown): { cert_id: string; cert_sha256: string; depth: number } | undefined {
  if (certificateShapeError(json) !== null) return undefined;
  return (json as DelegationCertificate).payload.parent;
}

/**
 * The verified chain of certificate `certId` (whose canonical JSON hashes to `certSha256`), leaf
 * first. `agentId`, when given, must be the leaf's subject. `hops` bounds the walk up.
 */
export async function loadVerifiedChain(ctx: ServiceContext, certId: string, certSha256: string,
  agentId: string | null, hops = MAX_DELEGATION_DEPTH): Promise<ChainLoad> {
  const hit = ctx.caches.certs.get(certSha256);
  ctx.metrics.cache.inc({ cache: 'certificate', result: hit ? 'hit' : 'miss' });
  if (hit) {
    if (hit.payload.cert_id !== certId || (agentId !== null && hit.payload.subject.agent_id !== agentId)) {
      return { error: 'invalid_proof' };
    }
    const ref = hit.payload.parent;
    if (ref === undefined) return { chain: [hit] };
    const up = await loadVerifiedChain(ctx, ref.cert_id, ref.cert_sha256, null, hops - 1);
    return 'error' in up ? up : { chain: [hit, ...up.chain] };
  }
  const rec = await ctx.store.delegations.getCertificate(certId);
  if (!rec || rec.certSha256 !== certSha256 || (agentId !== null && rec.agentId !== agentId)) {
    return { error: 'invalid_proof' };
  }
  ctx.caches.noteStatus(rec.id, rec.status);
  const json = JSON.parse(rec.certJson) as unknown;
  const ref = parentOf(json);
  if (ref === undefined) {
    const account = await ctx.store.accounts.getAccount(rec.accountId);
    const root = account?.rootPublicKey ? verifierFor(ctx, account.rootPublicKey) : null;
    if (!root) return { error: 'invalid_signature' };
    const check = verifyCertificate(json, root);
    if (!check.ok) return { error: 'invalid_signature', link: { depth: 0, cert_id: certId } };
    ctx.caches.certs.set(certSha256, check.cert);
    return { chain: [check.cert] };
  }
  const link = { depth: ref.depth, cert_id: certId };
  if (hops <= 0) return { error: 'invalid_signature', link, fault: 'too_deep' };
  const up = await loadVerifiedChain(ctx, ref.cert_id, ref.cert_sha256, null, hops - 1);
  if ('error' in up) return up;
  const parent = up.chain[0]!;
  const key = verifierFor(ctx, parent.payload.subject.public_key);
  if (!key) return { error: 'invalid_signature', link, fault: 'malformed' };
  const check = checkLink(json, parent, key);
  if (!check.ok) return { error: 'invalid_signature', link, fault: check.fault };
  ctx.caches.certs.set(certSha256, check.cert);
  return { chain: [check.cert, ...up.chain] };
}
