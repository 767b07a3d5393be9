/**
 * The webhook retry schedule (Standard Webhooks): attempt 1 immediately, then
 * 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h after the previous
 * failure — 10 attempts in all over roughly 3 days and 4 hours. Each delay
 * gets ±10 % jitter (never negative). A `Retry-After` answer moves the next
 * attempt later (never earlier), capped at 24 h. After the 10th failure the
 * delivery is dead-lettered.
 */

const S = 1000;
const M = 60 * S;
const H = 60 * M;

/** Delay before attempt `i + 1` (index 0 = the first attempt, immediate). */
export const RETRY_SCHEDULE_MS: readonly number[] = [0, 5 * S, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H, 14 * H, 20 * H, 24 * H];

/** Attempts before a delivery is dead-lettered. */
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length;

/** Jitter fraction: each delay is multiplied by a factor in [1 − J, 1 + J]. */
export const JITTER = 0.1;

/** Longest wait a `Retry-After` can impose. */
export const MAX_RETRY_AFTER_MS = 24 * H;

/**
 * Delay after the failure of attempt `attempt` (1-based) before the next one,
 * with jitter; `null` when `attempt` was the last one (dead-letter).
 * `random` returns a number in [0, 1).
 */
export function retryDelayMs(attempt: number, random: () => number = Math.random): number | null {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError('attempt must be a positive integer');
  if (attempt >= MAX_ATTEMPTS) return null;
  const base = RETRY_SCHEDULE_MS[attempt]!;
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.max(0, Math.round(base * (1 + JITTER * (2 * r - 1))));
}

/**
 * Parses a `Retry-After` header value (delay-seconds or an HTTP date) into a
 * wait in milliseconds from `now`, capped at {@link MAX_RETRY_AFTER_MS};
 * `null` when absent or malformed. A date in the past yields 0.
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | null {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return null;
  let ms: number;
  if (/^\d+$/.test(v)) {
    ms = Number(v) * 1000;
  } else {
    const t = Date.parse(v);
    if (Number.isNaN(t) || !/[a-z]/i.test(v)) return null;
    ms = t - now;
  }
  if (!Number.isFinite(ms)) return MAX_RETRY_AFTER_MS;
  return Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS);
}

/**
 * When to try again after attempt `attempt` failed at `failedAt`: the later of
 * the jittered schedule and `retryAfterMs` (already capped). `null` when the
 * schedule is exhausted (dead-letter), whatever `Retry-After` says.
 */
export function nextAttemptAt(attempt: number, failedAt: number, retryAfterMs: number | null, random: () => number = Math.random): number | null {
  const delay = retryDelayMs(attempt, random);
  if (delay === null) return null;
  return failedAt + Math.max(delay, retryAfterMs ?? 0);
}
