/**
 * Stage 7, signature: the proof's hybrid signature (Ed25519 and ML-DSA-65)
 * verifies under the certificate's subject (agent) key, checked by the
 * crypto workers (`crypto/pool.ts`); else 400 `invalid_signature` (billed).
 * A worker failure is not a refusal: the call fails closed `indeterminate`
 * (`internal_error`).
 */
import { canonicalize } from '../../../src/canonical.js';
import type { DelegationCertificate } from '../../../src/certificate.js';
import { sha256Hex } from '../../../src/crypto/encoding.js';
import { publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import { ServiceError } from '../../../src/errors.js';
import { PROOF_DOMAIN, proofSignedBytes } from '../../../src/proof.js';
import type { VerifyKey } from '../../crypto/proof-crypto.js';
import { need } from '../stage.js';
import type { Stage } from '../stage.js';

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

/** The signature stage. */
export const signature: Stage = {
  name: 'signature',
  async run(ctx, call) {
    const cert = need(call.cert, 'cert');
    const proof = need(call.proof, 'proof');
    const key = subjectKey(cert);
    const ok = key !== null && await ctx.crypto.verify(key, PROOF_DOMAIN, proofSignedBytes(proof.payload), proof.signature);
    if (!ok) throw new ServiceError('invalid_signature');
  },
};
