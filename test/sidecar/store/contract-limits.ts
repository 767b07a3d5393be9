/**
 * Store contract, limits and key-check part: fixed-window rate-limit counters
 * (exact under concurrency, a new window after the old one ends, a hit given
 * back in its own window only, purged once ended), the master-key check value (stored once, never replaced), and the
 * pool statistics.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { NOW, count, storeFor, together, values } from './contract-fixtures.js';

/** Runs the limits part. */
export async function limitsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('rate limits: fixed windows, refused hits count, a new window after the end', async (t) => {
    const key = `send:${randomUUID()}`;
    const hits = [];
    for (let i = 0; i < 4; i++) hits.push(await s.accounts.hitRateLimit(key, 3, 60_000, NOW + i * 1_000));
    t.same(hits.map((h) => [h.allowed, h.count]), [[true, 1], [true, 2], [true, 3], [false, 4]]);
    t.equal(hits[3]!.retryAfterMs, 57_000, 'retry after the rest of the window');
    t.same(await s.accounts.hitRateLimit(`other:${randomUUID()}`, 3, 60_000, NOW), { allowed: true, count: 1, retryAfterMs: 60_000 }, 'keys are separate');
    const next = await s.accounts.hitRateLimit(key, 3, 60_000, NOW + 60_000);
    t.same(next, { allowed: true, count: 1, retryAfterMs: 60_000 }, 'the window ended: a new one');
  });

  await t.test('rate limits: exact under concurrency', async (t) => {
    const key = `burst:${randomUUID()}`;
    const rs = values(t, await together(40, () => s.accounts.hitRateLimit(key, 10, 60_000, NOW)));
    t.equal(count(rs.map((r) => r.allowed), true), 10, '40 concurrent hits with a limit of 10: 10 allowed');
    t.same(rs.map((r) => r.count).sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i + 1), 'each hit counted once');
  });

  await t.test('rate limits: a hit given back frees its place, in its own window only', async (t) => {
    const key = `give:${randomUUID()}`;
    const hits = [];
    for (let i = 0; i < 3; i++) hits.push(await s.accounts.hitRateLimit(key, 3, 60_000, NOW + i));
    const end = NOW + hits[0]!.retryAfterMs;
    t.equal(NOW + 2 + hits[2]!.retryAfterMs, end, 'every hit of a window names the same end');
    await s.accounts.releaseRateLimit(key, end);
    t.same(await s.accounts.hitRateLimit(key, 3, 60_000, NOW + 10), { allowed: true, count: 3, retryAfterMs: 60_000 - 10 }, 'the place is free again');
    await s.accounts.releaseRateLimit(key, end + 1);
    t.equal((await s.accounts.hitRateLimit(key, 3, 60_000, NOW + 11)).count, 4, 'another window end changes nothing');
    const next = await s.accounts.hitRateLimit(key, 3, 60_000, NOW + 60_000);
    t.equal(next.count, 1, 'a new window');
    await s.accounts.releaseRateLimit(key, end);
    t.equal((await s.accounts.hitRateLimit(key, 3, 60_000, NOW + 60_001)).count, 2, 'a give-back for the ended window does not touch the new one');
    const once = `once:${randomUUID()}`;
    const h = await s.accounts.hitRateLimit(once, 3, 60_000, NOW);
    for (let i = 0; i < 3; i++) await s.accounts.releaseRateLimit(once, NOW + h.retryAfterMs);
    t.equal((await s.accounts.hitRateLimit(once, 3, 60_000, NOW + 1)).count, 1, 'never below zero');
    await s.accounts.releaseRateLimit(`unknown:${randomUUID()}`, NOW);
    t.pass('an unknown key is no error');
  });

  await t.test('rate limits: give-backs under concurrency keep the bound', async (t) => {
    // 40 callers each hit, and give back when a second check (every other caller) fails: the
    // callers that keep their hit are never more than the limit.
    const key = `race:${randomUUID()}`;
    const outcomes = values(t, await together(40, async (i) => {
      const h = await s.accounts.hitRateLimit(key, 10, 60_000, NOW);
      if (!h.allowed) return 'refused';
      if (i % 2 === 0) { await s.accounts.releaseRateLimit(key, NOW + h.retryAfterMs); return 'given back'; }
      return 'kept';
    }));
    const kept = count(outcomes, 'kept');
    t.ok(kept >= 1 && kept <= 10, `at most the limit kept (${kept})`);
    const after = await s.accounts.hitRateLimit(key, 10, 60_000, NOW);
    t.equal(after.count, 40 - count(outcomes, 'given back') + 1, 'every hit counted once, every give-back once');
  });

  await t.test('rate limits: windows are purged once ended', async (t) => {
    const fresh = await storeFor(t, open);
    await fresh.accounts.hitRateLimit('a', 5, 1_000, NOW);
    await fresh.accounts.hitRateLimit('b', 5, 10_000, NOW);
    t.equal(await fresh.accounts.purgeRateLimits(NOW + 1_000), 0, 'a window ending at the cut-off stays');
    t.equal(await fresh.accounts.purgeRateLimits(NOW + 1_001), 1, 'the ended one');
    t.equal((await fresh.accounts.hitRateLimit('b', 5, 10_000, NOW + 5)).count, 2, 'the live one kept its count');
    t.equal((await fresh.accounts.hitRateLimit('a', 5, 1_000, NOW + 5)).count, 1);
  });

  await t.test('key check: stored once, then returned as stored', async (t) => {
    const fresh = await storeFor(t, open);
    const first = new Uint8Array([1, 2, 3, 200]);
    t.same(Array.from(await fresh.keyCheck(first)), [1, 2, 3, 200], 'the first value is stored');
    t.same(Array.from(await fresh.keyCheck(new Uint8Array([9]))), [1, 2, 3, 200], 'a later one does not replace it');
    const race = await storeFor(t, open);
    const got = values(t, await together(6, (i) => race.keyCheck(new Uint8Array([i]))));
    t.equal(new Set(got.map((g) => g[0])).size, 1, 'concurrent first starts agree on one value');
  });

  await t.test('pool statistics', async (t) => {
    const p = s.poolStats();
    for (const k of ['inUse', 'idle', 'waiting'] as const) t.ok(Number.isInteger(p[k]) && p[k] >= 0, `${k} is a count`);
  });
}
