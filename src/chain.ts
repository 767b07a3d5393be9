/**
 * Sub-delegation chains (issue 33, docs/certificates.md "Sub-delegation"): a
 * certificate an agent signed for another agent with its custodial key names
 * its parent (`parent: {cert_id, cert_sha256, depth}`). {@link checkLink}
 * checks one link offline against its verified parent; a chain is valid when
 * its root verifies under the account holder's root key and every link under
 * its parent. Pure: no I/O.
 */
import { canonicalize } from './canonical.js';
import { certificateHash, verifyCertificate } from './certificate.js';
import type { CertificatePayload, DelegationCertificate } from './certificate.js';
import { createVerifier, publicKeyFromJson } from './crypto/hybrid.js';
import type { HybridVerifier } from './crypto/hybrid.js';
import { checkNarrowing } from './narrowing.js';
import type { Grant } from './narrowing.js';

/** A certificate's depth in its chain: 0 when the account holder signed it. */
export const depthOf = (p: CertificatePayload): number => p.parent?.depth ?? 0;

/** The right to delegate a certificate grants: levels a chain may go below it (0: none). */
export const delegationRightOf = (p: CertificatePayload): number => p.max_delegation_depth ?? 0;

/** What a certificate grants, for {@link checkNarrowing}. */
export function grantOf(p: CertificatePayload): Grant {
  return { scopes: p.scopes, constraints: p.constraints,
    expiresAt: p.expires_at === null ? null : Date.parse(p.expires_at) };
}

/** Why a link does not hold. */
export type LinkFault = 'malformed' | 'parent_mismatch' | 'wrong_issuer' | 'bad_signature' | 'no_right' | 'widens';

/** Result of {@link checkLink}. */
export type LinkCheck = { ok: true; cert: DelegationCertificate } | { ok: false; fault: LinkFault; detail: string };

/**
 * Checks a sub-delegated certificate against its verified parent: it names the parent by id and
 * hash at the parent's depth + 1, is issued by the parent's subject agent (same account and
 * connection) and signed with that agent's key (both halves), the parent grants the right to
 * delegate and this certificate's own right is smaller, and it grants nothing the parent does not
 * ({@link checkNarrowing}). `parentVerifier` is the parent subject's key, prepared (created when absent).
 */
export function checkLink(child: unknown, parent: DelegationCertificate, parentVerifier?: HybridVerifier): LinkCheck {
  const fail = (fault: LinkFault, detail: string): LinkCheck => ({ ok: false, fault, detail });
  const pp = parent.payload;
  const key = parentVerifier ?? (() => {
    const pk = publicKeyFromJson(pp.subject.public_key);
    return pk === null ? null : createVerifier(pk);
  })();
  if (key === null) return fail('malformed', 'the parent\'s subject key');
  const check = verifyCertificate(child, key);
  if (!check.ok) {
    if (check.reason === 'malformed') return fail('malformed', 'the certificate\'s shape');
    return check.reason === 'wrong_issuer' ? fail('wrong_issuer', 'not issued with the parent agent\'s key')
      : fail('bad_signature', 'the signature does not verify');
  }
  const c = check.cert.payload;
  const ref = c.parent;
  if (ref === undefined || ref.cert_id !== pp.cert_id || ref.cert_sha256 !== certificateHash(parent)
    || ref.depth !== depthOf(pp) + 1) return fail('parent_mismatch', 'it does not name this parent');
  if (c.issuer.account_id !== pp.issuer.account_id || c.issuer.agent_id !== pp.subject.agent_id
    || canonicalize(c.issuer.public_key) !== canonicalize(pp.subject.public_key)
    || c.connection_id !== pp.connection_id) return fail('wrong_issuer', 'not issued by the parent\'s agent');
  if (delegationRightOf(pp) < 1) return fail('no_right', 'the parent grants no right to delegate');
  if (delegationRightOf(c) > delegationRightOf(pp) - 1) {
    return fail('no_right', 'a right to delegate beyond the parent\'s');
  }
  const narrow = checkNarrowing(grantOf(c), grantOf(pp));
  if (!narrow.ok) return fail('widens', `${narrow.member}: ${narrow.detail}`);
  return { ok: true, cert: check.cert };
}
