/**
 * Stage 8, delegation: decides allow or deny from the verified certificate,
 * in this order: its status (deny `delegation_revoked`; the revocation cache,
 * else the store), its expiry (deny `delegation_expired`), the required scope
 * (deny `not_delegated`) and its constraints against the request's context
 * (deny `constraint_denied`, naming the constraint). Else allow `authorized`.
 * A deny is a decision, not a refusal: commit records and bills it. A store
 * failure while reading the status is `store_unavailable`.
 */
import type { DelegationCertificate } from '../../../src/certificate.js';
import { evaluateConstraints } from '../../../src/constraints.js';
import type { VerifyContext } from '../../../src/protocol.js';
import type { ServiceContext } from '../../context.js';
import { need, read } from '../stage.js';
import type { Decision, Stage } from '../stage.js';

/** Status, expiry, scope and constraints of a verified certificate, for `requiredScope` at `now`. */
export async function checkDelegation(ctx: ServiceContext, cert: DelegationCertificate, requiredScope: string,
  context: VerifyContext | undefined, now: number): Promise<Decision> {
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

/** The delegation stage. */
export const delegation: Stage = {
  name: 'delegation',
  async run(ctx, call) {
    // A grant check for an agent with no certificate was decided by the subject stage (not_delegated).
    if (call.mode === 'grant' && call.cert === undefined && call.decision !== undefined) return;
    const cert = need(call.cert, 'cert');
    const request = need(call.request, 'request');
    call.decision = await read(() => checkDelegation(ctx, cert, request.required_scope, request.context, call.now));
  },
};
