/**
 * Store contract, decision explanations: stored by decision id and read back
 * as stored (JSON, account, connection, time as a number); an id stored twice
 * keeps the first; an unknown id is undefined.
 */
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { storeFor } from './contract-fixtures.js';

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
