/**
 * The default dedup store of the receiver helper: processed delivery ids in
 * a better-sqlite3 file (WAL, `synchronous = FULL`, so an id recorded before
 * the 204 survives a crash or power loss).
 *
 * Ids are kept for `retentionDays` (default 30; the sender retries one
 * delivery for about 3 days and 4 hours, plus any manual redelivery), and
 * purged opportunistically.
 */
import Database from 'better-sqlite3';
import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import type { DedupStore } from './dedup.js';

/** Options of {@link SqliteDedupStore}. */
export interface SqliteDedupOptions {
  /** Database file (created if missing). */
  file: string;
  /** Days a processed id is remembered. Default 30. */
  retentionDays?: number;
  /** Table name (letters, digits, underscore). Default `webhook_deliveries`. */
  table?: string;
  /** Clock in Unix milliseconds (purge cut-off). Default `Date.now`. */
  clock?: () => number;
}

const DAY_MS = 86_400_000;
/** Purge expired ids every this many recorded ids. */
const PURGE_EVERY = 500;

/** Delivery ids in SQLite. */
export class SqliteDedupStore implements DedupStore {
  private readonly db: SqliteDatabase;
  private readonly hasStmt: Statement;
  private readonly addStmt: Statement;
  private readonly purgeStmt: Statement;
  private readonly retentionMs: number;
  private readonly clock: () => number;
  private addsSincePurge = 0;

  constructor(opts: SqliteDedupOptions | string) {
    const o: SqliteDedupOptions = typeof opts === 'string' ? { file: opts } : opts;
    const table = o.table ?? 'webhook_deliveries';
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(table)) throw new TypeError('table must be an SQL identifier');
    this.retentionMs = (o.retentionDays ?? 30) * DAY_MS;
    this.clock = o.clock ?? Date.now;
    this.db = new Database(o.file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS ${table} (delivery_id TEXT PRIMARY KEY, received_at INTEGER NOT NULL) WITHOUT ROWID`);
    this.db.exec(`CREATE INDEX IF NOT EXISTS ${table}_received ON ${table} (received_at)`);
    this.hasStmt = this.db.prepare(`SELECT 1 FROM ${table} WHERE delivery_id = ?`);
    this.addStmt = this.db.prepare(`INSERT OR IGNORE INTO ${table} (delivery_id, received_at) VALUES (?, ?)`);
    this.purgeStmt = this.db.prepare(`DELETE FROM ${table} WHERE received_at < ?`);
  }

  has(deliveryId: string): boolean {
    return this.hasStmt.get(deliveryId) !== undefined;
  }

  add(deliveryId: string, receivedAt: number): void {
    this.addStmt.run(deliveryId, receivedAt);
    if (++this.addsSincePurge >= PURGE_EVERY) {
      this.addsSincePurge = 0;
      this.purge(this.clock() - this.retentionMs);
    }
  }

  /** Deletes ids recorded before `olderThan` (Unix ms); returns the count. */
  purge(olderThan: number): number {
    return this.purgeStmt.run(olderThan).changes;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
