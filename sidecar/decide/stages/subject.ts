/**
 * Grant-check stage (in place of challenge, freshness, certificate and
 * signature): the certificate of the agent the caller names (an AuthZEN
 * subject). The agent must be one of the caller's connection, else 404
 * `not_found` (a stranger's agent is not told apart from none). Its newest
 * approved certificate is checked like a proof's (`loadVerifiedCertificate`);
 * with none approved, its newest certificate (revoked: the delegation stage
 * denies `delegation_revoked`); with none at all, deny `not_delegated`. Reads
 * only. A store failure is `store_unavailable`.
 */
import { ServiceError } from '../../../src/errors.js';
import type { ServiceContext } from '../../context.js';
import type { CertificateRecord } from '../../store/types.js';
import { loadVerifiedCertificate } from './certificate.js';
import { need, read } from '../stage.js';
import type { Stage } from '../stage.js';

/** The agent's certificate a grant check reads: the newest approved one, else the newest; undefined with none. */
export async function grantCertificate(ctx: ServiceContext, accountId: string, agentId: string):
  Promise<Pick<CertificateRecord, 'id' | 'certSha256'> | undefined> {
  const active = await ctx.store.delegations.activeCertificateForAgent(agentId);
  if (active) return active;
  const all = (await ctx.store.delegations.listCertificates(accountId)).filter((c) => c.agentId === agentId);
  return all.sort((a, b) => b.issuedAt - a.issuedAt)[0];
}

/** The subject stage of a grant check. */
export const subject: Stage = {
  name: 'subject',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    const agentId = need(call.subject, 'subject');
    const agent = await read(() => ctx.store.platforms.getAgent(agentId));
    if (!agent || agent.connectionId !== auth.connectionId) {
      throw new ServiceError('agent_not_found', 'No such agent on this connection.', { field: 'subject.id' });
    }
    const rec = await read(() => grantCertificate(ctx, auth.accountId, agentId));
    if (!rec) {
      call.decision = { decision: 'deny', reason: 'not_delegated' };
      return;
    }
    const cert = await read(() => loadVerifiedCertificate(ctx, rec.id, rec.certSha256, agentId));
    // The stored certificate does not verify: nothing it says is trusted (fails closed).
    if ('error' in cert) throw new Error(`certificate ${rec.id} of agent ${agentId} does not verify`);
    call.cert = cert.value;
    call.chain = cert.chain;
  },
};
