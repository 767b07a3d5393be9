/**
 * Stage 6, certificate: loads the certificate the proof names and checks it
 * (cached by its SHA-256: a hit skips the store and the root signature), or
 * refuses. The certificate must match the proof's id, hash and agent (400
 * `invalid_proof`), verify under its issuer's root key (400
 * `invalid_signature`), and delegate to an agent of the verifying connection:
 * a certificate another account issued to its own agent authorizes nothing
 * here (400 `invalid_proof`). A sub-delegated certificate is loaded with its
 * chain, every link verified (`decide/chain.ts`); a link that does not is 400
 * `invalid_signature` naming it (`link: {depth, cert_id}`, `fault`). Each of these is billed. A store failure while
 * loading it is `store_unavailable`.
 */
import type { DelegationCertificate } from '../../../src/certificate.js';
import { ServiceError } from '../../../src/errors.js';
import { loadVerifiedChain, verifierFor } from '../chain.js';
import type { ChainLoad } from '../chain.js';
import type { ServiceContext } from '../../context.js';
import { need, read } from '../stage.js';
import type { Stage } from '../stage.js';

/** Re-exported for callers that prepared root verifiers here before chains. */
export { verifierFor };

/**
 * The verified certificate a proof refers to, with its chain (leaf first; one link for a
 * certificate the account holder signed): `decide/chain.ts`. The certificate must match the
 * proof's id, hash and agent (`invalid_proof`), and every link must verify (`invalid_signature`).
 */
export async function loadVerifiedCertificate(ctx: ServiceContext, certId: string, certSha256: string, agentId: string):
  Promise<{ value: DelegationCertificate; chain: DelegationCertificate[] } | Exclude<ChainLoad, { chain: unknown }>> {
  const r = await loadVerifiedChain(ctx, certId, certSha256, agentId);
  return 'error' in r ? r : { value: r.chain[0]!, chain: r.chain };
}

/** The certificate stage. */
export const certificate: Stage = {
  name: 'certificate',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    const p = need(call.proof, 'proof').payload;
    const cert = await read(() => loadVerifiedCertificate(ctx, p.cert_id, p.cert_sha256, p.agent_id));
    if ('error' in cert) {
      throw new ServiceError(cert.error, undefined, cert.link ? { link: cert.link, ...(cert.fault ? {
        fault: cert.fault } : {}) } : undefined);
    }
    if (cert.value.payload.connection_id !== auth.connectionId) {
      throw new ServiceError('invalid_proof', 'The certificate was not issued for this connection.');
    }
    call.cert = cert.value;
    call.chain = cert.chain;
  },
};
