/**
 * A small in-memory fixed-window rate limiter keyed by client IP (bounded
 * with lru-cache, so a flood of addresses cannot grow memory without limit).
 */
import { LRUCache } from 'lru-cache';

/** Result of {@link RateLimiter.hit}. */
export interface RateDecision {
  allowed: boolean;
  /** Seconds until the window resets (for `Retry-After`). */
  retryAfterSeconds: number;
}

/** Counts hits per key in fixed windows. */
export class RateLimiter {
  private readonly windows: LRUCache<string, { start: number; count: number }>;

  private readonly limit: number;
  private readonly windowMs: number;
  private readonly clock: () => number;

  constructor(limit: number, windowMs: number, clock: () => number, maxKeys = 50_000) {
    this.limit = limit;
    this.windowMs = windowMs;
    this.clock = clock;
    this.windows = new LRUCache({ max: maxKeys });
  }

  /** Records one hit for `key` and says whether it is within the limit. */
  hit(key: string): RateDecision {
    const now = this.clock();
    let w = this.windows.get(key);
    if (!w || now - w.start >= this.windowMs) {
      w = { start: now, count: 0 };
      this.windows.set(key, w);
    }
    w.count += 1;
    const retryAfterSeconds = Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000));
    return { allowed: w.count <= this.limit, retryAfterSeconds };
  }
}
