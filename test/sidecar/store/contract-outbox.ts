/**
 * Store contract, outbox part: what is due and claimed (oldest first, leased,
 * never for a platform without a usable callback), attempts and their states,
 * parking on 410 and release by a new callback URL, redelivery, listing with
 * filters and cursor, the backlog stats, and concurrent claims that never hand
 * one delivery to two claimers while its lease runs.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { NOW, enqueue, seed, storeFor, together, values } from './contract-fixtures.js';

const HOOK = 'https://example.com/hook';

/** Runs the outbox part. */
export async function outboxContract(t: Test, open: OpenStore): Promise<void> {
  await t.test('claimDue: due, unleased, deliverable only; oldest first; leases run out', async (t) => {
    const s = await storeFor(t, open);
    const ok = await seed(s, { callbackUrl: HOOK });
    const noUrl = await seed(s);
    const off = await seed(s, { callbackUrl: HOOK });
    await s.platforms.disableCallback(off.p.id, NOW);
    const later = await enqueue(s, ok, NOW + 200);
    const first = await enqueue(s, ok, NOW + 100);
    await enqueue(s, noUrl, NOW + 50);
    await enqueue(s, off, NOW + 50);
    const future = await enqueue(s, ok, NOW + 10_000);

    const c = await s.outbox.claimDue(NOW + 1_000, 10, 500);
    t.same(c.map((d) => d.id), [first.id, later.id], 'due deliveries of deliverable platforms, oldest first');
    const d = c[0]!;
    t.same({ ...d, bodyEnc: Array.from(d.bodyEnc), webhookSecretEnc: Array.from(d.webhookSecretEnc) }, {
      id: first.id, platformId: ok.p.id, eventType: 'delegation.denied', attempts: 0, createdAt: NOW + 100, callbackUrl: HOOK,
      callbackDisabled: false, bodyEnc: Array.from(first.bodyEnc), webhookSecretEnc: [8, 8],
    });
    t.same(await s.outbox.claimDue(NOW + 1_000, 10, 500), [], 'leased deliveries are not claimed twice');
    t.same((await s.outbox.claimDue(NOW + 1_500, 1, 500)).map((x) => x.id), [first.id], 'lease ran out: due again; the limit holds');
    t.same(await s.outbox.claimDue(NOW + 1_500, 0, 500), []);
    await s.outbox.release(later.id);
    t.same((await s.outbox.claimDue(NOW + 1_600, 10, 500)).map((x) => x.id), [later.id], 'released: due at once');
    t.same((await s.outbox.claimDue(NOW + 10_000, 10, 500)).map((x) => x.id), [first.id, later.id, future.id], 'every lease ran out');
    const st = await s.outbox.stats();
    t.same(st, { pending: 3, oldestPendingAt: NOW + 100 }, 'stats count deliverable pending deliveries only');
    await s.platforms.setCallbackUrl(noUrl.p.id, HOOK);
    t.same(await s.outbox.stats(), { pending: 4, oldestPendingAt: NOW + 50 }, 'a held delivery counts once its platform has a URL');
  });

  await t.test('attempts: pending, delivered, dead, and parked by a 410 until a new URL', async (t) => {
    const s = await storeFor(t, open);
    const x = await seed(s, { callbackUrl: HOOK });
    const a = await enqueue(s, x, NOW);
    const b = await enqueue(s, x, NOW + 1);
    const g = await enqueue(s, x, NOW + 2);
    await s.outbox.claimDue(NOW + 10, 10, 60_000);
    const long = 'e'.repeat(2_000);
    await s.outbox.recordAttempt(a.id, { attempt: 1, attemptedAt: NOW + 10, status: 500, error: long, durationMs: 12.6 }, { state: 'pending', nextAttemptAt: NOW + 5_000 });
    let da = await s.outbox.getDelivery(a.id);
    t.same(da, {
      id: a.id, platformId: x.p.id, connectionId: x.c.id, eventType: 'delegation.denied', state: 'pending', attempts: 1, nextAttemptAt: NOW + 5_000,
      lastStatus: 500, lastError: 'e'.repeat(500), deliveredAt: null, createdAt: NOW, seq: da!.seq, accountId: x.accountId,
    }, 'pending with its next time; the error clipped to 500 characters');
    t.same((await s.outbox.claimDue(NOW + 20, 10, 60_000)).map((d) => d.id), [], 'the lease was cleared but it is not due yet');
    t.same((await s.outbox.claimDue(NOW + 5_000, 10, 60_000)).map((d) => d.id), [a.id], 'due at its next time (others still leased)');
    await s.outbox.recordAttempt(a.id, { attempt: 2, attemptedAt: NOW + 5_001, status: 200, error: null, durationMs: 3 }, { state: 'delivered', nextAttemptAt: NOW + 5_001 });
    da = await s.outbox.getDelivery(a.id);
    t.same([da?.state, da?.attempts, da?.deliveredAt, da?.lastStatus, da?.lastError], ['delivered', 2, NOW + 5_001, 200, null]);
    t.same(await s.outbox.listAttempts(a.id), [
      { attempt: 1, attemptedAt: NOW + 10, status: 500, error: 'e'.repeat(500), durationMs: 13 },
      { attempt: 2, attemptedAt: NOW + 5_001, status: 200, error: null, durationMs: 3 },
    ], 'attempts in order, durations rounded');
    await s.outbox.recordAttempt(b.id, { attempt: 10, attemptedAt: NOW + 11, status: null, error: 'timeout', durationMs: 1 }, { state: 'dead', nextAttemptAt: NOW + 11 });
    t.equal((await s.outbox.getDelivery(b.id))?.state, 'dead');
    await s.outbox.redeliver(b.id, NOW + 12);
    const db = await s.outbox.getDelivery(b.id);
    t.same([db?.state, db?.attempts, db?.nextAttemptAt], ['pending', 10, NOW + 12], 'redeliver: due now, attempts kept');

    await s.outbox.recordAttempt(g.id, { attempt: 1, attemptedAt: NOW + 13, status: 410, error: null, durationMs: 1 }, { state: 'disabled', nextAttemptAt: NOW + 13 });
    t.equal((await s.platforms.getPlatform(x.p.id))?.callbackDisabledAt, NOW + 13, 'a 410 disables the callback in the same transaction');
    t.same(await s.outbox.claimDue(NOW + 100_000, 10, 60_000), [], 'the platform\'s deliveries are held');
    await s.platforms.setCallbackUrl(x.p.id, 'https://example.com/new');
    const again = await s.outbox.claimDue(NOW + 100_000, 10, 60_000);
    t.same(again.map((d) => d.id).sort(), [b.id, g.id].sort(), 'a new URL releases the held and the parked ones');
    t.equal(again.find((d) => d.id === g.id)?.attempts, 1, 'the parked delivery keeps its attempts');
    t.equal(again[0]?.callbackUrl, 'https://example.com/new');
    t.equal((await s.outbox.getDelivery(g.id))?.state, 'pending', 'claimed again as pending');
    t.equal(await s.outbox.getDelivery(randomUUID()), undefined);
    t.same(await s.outbox.listAttempts(randomUUID()), []);
  });

  await t.test('listing: newest first, filters, cursor', async (t) => {
    const s = await storeFor(t, open);
    const x = await seed(s, { callbackUrl: HOOK });
    const second = await seed(s, { callbackUrl: HOOK });
    const e1 = await enqueue(s, x, NOW, 'one');
    const e2 = await enqueue(s, x, NOW + 1, 'two');
    const e3 = await enqueue(s, x, NOW + 2, 'three');
    await enqueue(s, second, NOW + 3, 'other');
    await s.outbox.claimDue(NOW + 5, 1, 1_000);
    await s.outbox.recordAttempt(e1.id, { attempt: 1, attemptedAt: NOW + 5, status: 200, error: null, durationMs: 1 }, { state: 'delivered', nextAttemptAt: NOW + 5 });
    const all = await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10 });
    t.same(all.map((d) => d.id), [e3.id, e2.id, e1.id], 'this account only, newest first');
    t.ok(all[0]!.seq > all[1]!.seq && all[1]!.seq > all[2]!.seq, 'seq increases with each event');
    t.same((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 2 })).map((d) => d.id), [e3.id, e2.id]);
    t.same((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10, before: all[0]!.seq })).map((d) => d.id), [e2.id, e1.id]);
    t.same((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10, state: 'delivered' })).map((d) => d.id), [e1.id]);
    t.same((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10, platformId: second.p.id })), [], 'by platform');
    t.equal((await s.outbox.listDeliveries({ accountId: second.accountId, limit: 10, platformId: second.p.id })).length, 1);
  });

  await t.test('concurrent claims: each delivery to one claimer per lease', async (t) => {
    const s = await storeFor(t, open);
    const x = await seed(s, { callbackUrl: HOOK });
    const ids = new Set<string>();
    for (let i = 0; i < 24; i++) ids.add((await enqueue(s, x, NOW + i)).id);
    const claims = values(t, await together(6, () => s.outbox.claimDue(NOW + 100, 8, 60_000))).flat().map((d) => d.id);
    t.equal(claims.length, 24, 'all 24 claimed');
    t.equal(new Set(claims).size, 24, 'none twice');
    t.same([...new Set(claims)].sort(), [...ids].sort());
    t.same(await s.outbox.claimDue(NOW + 200, 100, 60_000), [], 'nothing left while the leases run');
    if (s.outbox.releaseAllLeases) {
      t.equal(await s.outbox.releaseAllLeases(), 24, 'an engine owned by one process releases every lease at start');
      t.equal((await s.outbox.claimDue(NOW + 200, 100, 60_000)).length, 24);
    }
  });
}
