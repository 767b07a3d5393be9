/**
 * Store contract, idempotency-ledger part: a key is claimed once under real concurrency (the
 * losers see `in_flight`), a completed record replays to the same request and refuses another
 * (`mismatch`), a released claim frees the key, a lapsed lease or an expired record is taken
 * over, only the live claim (by its id and connection) completes or releases, and the purge
 * deletes what has expired.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { IdempotencyClaimRequest, IdempotentResponse } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, count, storeFor, together, values } from './contract-fixtures.js';

const RESPONSE: IdempotentResponse = {
  status: 201, headers: [['content-type', 'application/json'], ['x-upstream', 'yes']],
  body: Buffer.from('{"id":"pay_1"}').toString('base64'), bodyOmitted: false,
};

/** Runs the idempotency part. */
export async function idempotencyContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);
  const claim = (over: Partial<IdempotencyClaimRequest> = {}): IdempotencyClaimRequest => ({
    connectionId: 'conn-a', agentId: 'agent-a', key: `k-${randomUUID()}`, requestHash: 'a'.repeat(64),
    claimId: randomUUID(), now: NOW, leaseUntil: NOW + 60_000, ...over,
  });

  await t.test('exactly one of 30 concurrent claims wins; the rest are in flight', async (t) => {
    const base = claim();
    const rs = values(t, await together(30, () => s.idempotency.claim({ ...base, claimId: randomUUID() })));
    t.equal(count(rs.map((r) => r.outcome), 'claimed'), 1, 'one claim');
    t.equal(count(rs.map((r) => r.outcome), 'in_flight'), 29, 'the others see it in flight');
  });

  await t.test('completed: the same request replays, another is a mismatch, an in-flight one too', async (t) => {
    const c = claim();
    t.same(await s.idempotency.claim(c), { outcome: 'claimed' });
    t.same(await s.idempotency.claim({ ...c, claimId: randomUUID(), requestHash: 'b'.repeat(64) }), { outcome: 'mismatch' },
      'another request while in flight');
    t.equal(await s.idempotency.complete('conn-b', c.claimId, RESPONSE, NOW + 86_400_000), false, 'another connection cannot');
    t.equal(await s.idempotency.complete(c.connectionId, c.claimId, RESPONSE, NOW + 86_400_000), true);
    t.equal(await s.idempotency.complete(c.connectionId, c.claimId, RESPONSE, NOW + 86_400_000), false, 'once');
    t.same(await s.idempotency.claim({ ...c, claimId: randomUUID(), now: NOW + 1_000 }), { outcome: 'replay', response: RESPONSE });
    t.same(await s.idempotency.claim({ ...c, claimId: randomUUID(), requestHash: 'c'.repeat(64) }), { outcome: 'mismatch' });
    t.equal(await s.idempotency.release(c.connectionId, c.claimId), false, 'a completed record is not released');
    t.same((await s.idempotency.claim({ ...c, agentId: 'agent-b', claimId: randomUUID() })).outcome, 'claimed',
      'keys are per agent');
    t.same((await s.idempotency.claim({ ...c, connectionId: 'conn-b', claimId: randomUUID() })).outcome, 'claimed',
      'and per connection');
  });

  await t.test('a released claim frees the key; a lapsed lease and an expired record are taken over', async (t) => {
    const c = claim();
    await s.idempotency.claim(c);
    t.equal(await s.idempotency.release('conn-b', c.claimId), false, 'another connection cannot release it');
    t.equal(await s.idempotency.release(c.connectionId, c.claimId), true);
    const again = { ...c, claimId: randomUUID() };
    t.same(await s.idempotency.claim(again), { outcome: 'claimed' }, 'free again');
    t.same((await s.idempotency.claim({ ...c, claimId: randomUUID(), now: NOW + 59_999 })).outcome, 'in_flight',
      'within the lease');
    const later = { ...c, claimId: randomUUID(), now: NOW + 60_000, leaseUntil: NOW + 120_000 };
    t.same(await s.idempotency.claim(later), { outcome: 'claimed' }, 'the lease lapsed: taken over');
    t.equal(await s.idempotency.complete(c.connectionId, again.claimId, RESPONSE, NOW + 86_400_000), false,
      'the lapsed claim can no longer complete');
    t.equal(await s.idempotency.complete(c.connectionId, later.claimId, RESPONSE, NOW + 200_000), true);
    t.same((await s.idempotency.claim({ ...c, claimId: randomUUID(), now: NOW + 199_999 })).outcome, 'replay');
    t.same(await s.idempotency.claim({ ...c, claimId: randomUUID(), requestHash: 'd'.repeat(64), now: NOW + 200_000,
      leaseUntil: NOW + 260_000 }), { outcome: 'claimed' }, 'an expired record is taken over, even by another request');
  });

  await t.test('purge deletes what has expired, and only that', async (t) => {
    const old = claim({ connectionId: `purge-${randomUUID()}`, now: NOW, leaseUntil: NOW + 10 });
    const live = claim({ connectionId: old.connectionId, leaseUntil: NOW + 10_000_000 });
    await s.idempotency.claim(old);
    await s.idempotency.claim(live);
    t.ok(await s.idempotency.purgeIdempotency(NOW + 10) >= 1, 'the expired claim is purged');
    t.same((await s.idempotency.claim({ ...old, claimId: randomUUID(), now: NOW + 5 })).outcome, 'claimed',
      'its key is free even before its expiry, since the row is gone');
    t.same((await s.idempotency.claim({ ...live, claimId: randomUUID(), now: NOW + 11 })).outcome, 'in_flight', 'kept');
  });
}
