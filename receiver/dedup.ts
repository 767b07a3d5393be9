/**
 * The pluggable dedup store of the receiver helper, and an in-memory
 * implementation (tests, development; not durable). The durable SQLite store
 * is in `receiver/sqlite.ts` (`agent-authz/receiver/sqlite`).
 */
import { checkInt } from '../gateway-plugin/validate.js';

/**
 * Remembers which delivery ids were processed. Methods may be synchronous or
 * return promises; a thrown error / rejection makes the receiver answer 503
 * so that the service retries.
 *
 * ```ts
 * // On your own database: record the id in the same transaction as the event.
 * const dedup: DedupStore = {
 *   has: async (id) => (await db.query('SELECT 1 FROM deliveries WHERE id = $1', [id])).rowCount > 0,
 *   add: async (id, at) => { await db.query('INSERT INTO deliveries VALUES ($1, $2) ON CONFLICT DO NOTHING', [id, at]); },
 * };
 * ```
 */
export interface DedupStore {
  /** True when `deliveryId` was already processed. */
  has(deliveryId: string): boolean | Promise<boolean>;
  /**
   * Records `deliveryId` as processed. Must be durable when it returns.
   * Recording an id that is already present is not an error.
   */
  add(deliveryId: string, receivedAt: number): void | Promise<void>;
  /** Releases resources; called by `receiver.close()`. */
  close?(): void | Promise<void>;
}

/**
 * Delivery ids in a bounded in-memory map (oldest forgotten first). Not
 * durable: a restart forgets every id, so a retry after it is processed again.
 * For tests and development.
 *
 * ```ts
 * const receiver = createWebhookReceiver({ secret, dedup: new MemoryDedupStore(), onEvent });
 * ```
 */
export class MemoryDedupStore implements DedupStore {
  private readonly ids = new Map<string, number>();
  private readonly maxEntries: number;

  /** @param maxEntries - Most ids remembered, 1 to 10 000 000 (default 100 000). */
  constructor(maxEntries = 100_000) {
    this.maxEntries = checkInt(maxEntries, 'MemoryDedupStore: maxEntries', 1, 10_000_000, 100_000);
  }

  /** True when `deliveryId` is remembered. */
  has(deliveryId: string): boolean {
    return this.ids.has(deliveryId);
  }

  /** Remembers `deliveryId`, forgetting the oldest id beyond `maxEntries`. */
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
