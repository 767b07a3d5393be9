/** The retry schedule, jitter and Retry-After parsing. */
import t from 'tap';
import fc from 'fast-check';
import {
  JITTER, MAX_ATTEMPTS, MAX_RETRY_AFTER_MS, RETRY_SCHEDULE_MS, nextAttemptAt, parseRetryAfter, retryDelayMs,
} from '../../../sidecar/webhooks/schedule.js';

const S = 1000;
const M = 60 * S;
const H = 60 * M;

t.test('the Standard Webhooks schedule', async (t) => {
  t.same(RETRY_SCHEDULE_MS, [0, 5 * S, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H, 14 * H, 20 * H, 24 * H]);
  t.equal(MAX_ATTEMPTS, 10);
  for (let a = 1; a < 10; a++) t.equal(retryDelayMs(a, () => 0.5), RETRY_SCHEDULE_MS[a], `no jitter at the midpoint, after attempt ${a}`);
  t.equal(retryDelayMs(10, () => 0.5), null, 'dead after the 10th attempt');
  t.equal(retryDelayMs(11), null);
  t.equal(retryDelayMs(1, () => 0), 4_500, '−10 %');
  t.equal(retryDelayMs(1, () => 1), 5_500, '+10 %');
  t.throws(() => retryDelayMs(0), RangeError);
  t.throws(() => retryDelayMs(1.5), RangeError);
});

t.test('jitter stays within ±10 % and is never negative, whatever the random source says', async (t) => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 9 }), fc.double({ min: -5, max: 5, noNaN: true }), (attempt, r) => {
    const d = retryDelayMs(attempt, () => r)!;
    const base = RETRY_SCHEDULE_MS[attempt]!;
    return d >= 0 && d >= Math.floor(base * (1 - JITTER)) && d <= Math.ceil(base * (1 + JITTER));
  }), { numRuns: 2_000 });
  t.pass('property holds');
});

t.test('Retry-After parsing', async (t) => {
  const now = Date.UTC(2030, 0, 1, 12);
  t.equal(parseRetryAfter('120', now), 120_000);
  t.equal(parseRetryAfter(' 0 ', now), 0);
  t.equal(parseRetryAfter(['30', '60'], now), 30_000);
  t.equal(parseRetryAfter(new Date(now + 90_000).toUTCString(), now), 90_000);
  t.equal(parseRetryAfter(new Date(now - 90_000).toUTCString(), now), 0, 'a past date: no wait');
  t.equal(parseRetryAfter('999999999', now), MAX_RETRY_AFTER_MS, 'capped at 24 h');
  t.equal(parseRetryAfter('9'.repeat(400), now), MAX_RETRY_AFTER_MS);
  t.equal(parseRetryAfter(new Date(now + 30 * 86_400_000).toUTCString(), now), MAX_RETRY_AFTER_MS);
  for (const bad of [undefined, '', '-5', '1.5', 'soon', '12abc', 'Mon, 99 Foo 2030']) t.equal(parseRetryAfter(bad, now), null, `ignored: ${String(bad)}`);
});

t.test('nextAttemptAt: the later of schedule and Retry-After; null once exhausted', async (t) => {
  const at = 1_000_000;
  const mid = () => 0.5;
  t.equal(nextAttemptAt(1, at, null, mid), at + 5_000);
  t.equal(nextAttemptAt(1, at, 60_000, mid), at + 60_000);
  t.equal(nextAttemptAt(3, at, 60_000, mid), at + 30 * M);
  t.equal(nextAttemptAt(10, at, 60_000, mid), null);
});
