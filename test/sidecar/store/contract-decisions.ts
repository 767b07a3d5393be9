/**
 * Store contract, decision explanations: stored by decision id and read back
 * as stored (JSON, account, connection, time as a number); an id stored twice
 * keeps the first; an unknown id is undefined. A verify commit stores the
 * explanation it carries only when it commits (with or without a new approval).
 */
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { NOW, audit, challenge, seed, storeFor } from './contract-fixtures.js';
import { decideOnce } from './contract-audit.js';

/** Runs the decisions part. */
export async function decisionsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);
  const now = 1_767_225_600_123;
  const explanation = { decision: 'deny', reason: 'not_delegated', would_allow: [{ change: 'delegate_scope', scope: 'a:b' }],
    nested: { n: 1, s: 'é', z: null } };
  await s.decisions.recordExplanation({ id: 'd-1', accountId: 'acc-1', connectionId: 'con-1', explanation, createdAt: now });
  t.same(await s.decisions.getExplanation('d-1'),
    { id: 'd-1', accountId: 'acc-1', connectionId: 'con-1', explanation, createdAt: now }, 'read back as stored');
  await s.decisions.recordExplanation({ id: 'd-1', accountId: 'acc-2', connectionId: 'con-2', explanation: {}, createdAt: 1 });
  t.equal((await s.decisions.getExplanation('d-1'))?.accountId, 'acc-1', 'an id stored twice keeps the first');
  t.equal(await s.decisions.getExplanation('d-unknown'), undefined, 'unknown id');
}

/** The explanation a verify commit carries: stored with a committed decision, never with a refused one. */
export async function commitExplanationContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);
  const x = await seed(s);
  const record = (id: string) => ({ id, accountId: x.accountId, connectionId: x.c.id,
    explanation: { decision: 'allow', reason: 'authorized', n: 1 }, createdAt: NOW + 20 });
  const id = await decideOnce(s, x, { explanation: record('commit-1') });
  t.equal(id.length > 0, true, 'committed');
  t.same(await s.decisions.getExplanation('commit-1'), record('commit-1'), 'stored with the committed decision');

  const spent = challenge(x);
  await s.proofs.insertChallenge(spent);
  const commit = (explanationId: string) => s.proofs.commitDecision({ challengeId: spent.id, audienceConnectionId: x.c.id,
    now: NOW + 20, accountId: x.accountId, priceMicros: 1, decision: 'deny', certId: null,
    audit: audit(x, 'proof.rejected'), explanation: record(explanationId) });
  t.equal(await commit('commit-2'), 'committed');
  t.equal(await commit('refused-1'), 'invalid_challenge', 'a spent challenge refuses the second commit');
  t.equal(await s.decisions.getExplanation('refused-1'), undefined, 'a refused commit stores no explanation');
  t.ok(await s.decisions.getExplanation('commit-2'), 'the first one did');
}
