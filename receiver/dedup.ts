/**
 * The pluggable dedup store of the receiver helper, and an in-memory
 * implementation (tests, development; not durable — use
 * {@link SqliteDedupStore} or your own database in production).
 */

/**
 * Remembers which delivery ids were processed. Methods may be synchronous or
 * return promises; a thrown error / rejection makes the receiver answer 503
 * so that the service retries.
 */
export interface DedupStore {
  /** True when `deliveryId` was already processed. */
  has(deliveryId: string): boolean | Promise<boolean>;
  /**
   * Records `deliveryId` as processed. Must be durable when it returns.
   * Recording an id that is already present is not an error.
   */
  add(deliveryId: string, receivedAt: number): void | Promise<void>;
  /** Releases resources. */
  close?(): void | Promise<void>;
}

/** Delivery ids in a bounded in-memory map (oldest forgotten first). */
export class MemoryDedupStore implements DedupStore {
  private readonly ids = new Map<string, number>();
  private readonly maxEntries: number;
  constructor(maxEntries = 100_000) {
    this.maxEntries = maxEntries;
  }

  has(deliveryId: string): boolean {
    return this.ids.has(deliveryId);
  }

  add(deliveryId: string, receivedAt: number): void {
    if (this.ids.has(deliveryId)) return;
    this.ids.set(deliveryId, receivedAt);
    while (this.ids.size > this.maxEntries) {
      const oldest = this.ids.keys().next();
      if (oldest.done) break;
      this.ids.delete(oldest.value);
    }
  }
}
