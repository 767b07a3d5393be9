/**
 * `agent-authz/receiver/sqlite`: the durable dedup store of the webhook
 * receiver — processed delivery ids in a better-sqlite3 file (WAL,
 * `synchronous = FULL`, so an id recorded before the 204 survives a crash or
 * power loss). Its own entry point, so that `agent-authz/receiver` never
 * loads the native addon.
 *
 * ```ts
 * import { createWebhookReceiver } from 'agent-authz/receiver';
 * import { SqliteDedupStore } from 'agent-authz/receiver/sqlite';
 *
 * const receiver = createWebhookReceiver({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   dedup: new SqliteDedupStore({ file: './webhook-deliveries.db' }),
 *   onEvent: async (event) => { await saveEvent(event); },
 * });
 * // on shutdown: await receiver.close();   (closes the store)
 * ```
 *
 * Ids are kept for `retentionDays` (default 30; the sender retries one
 * delivery for about 3 days and 4 hours, plus any manual redelivery), and
 * purged opportunistically.
 *
 * Node >= 24.19 with better-sqlite3 < 13: a better-sqlite3 object collected by
 * the garbage collector can abort the process (`Assertion failed: (env) !=
 * nullptr` in `Statement::~Statement`, nodejs/node#65446). So this store makes
 * no throw-away statements (pragmas run through `exec`), and it keeps its
 * connection and statements referenced for the life of the process (a few
 * small objects per store; {@link SqliteDedupStore.close} still closes the file).
 */
import Database from 'better-sqlite3';
import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import type { DedupStore } from './dedup.js';
import { checkFunction, checkKeys } from './options.js';
import { at, checkInt, checkString, fail } from '../gateway-plugin/validate.js';

export type { DedupStore } from './dedup.js';

/**
 * Options of {@link SqliteDedupStore}.
 *
 * ```ts
 * new SqliteDedupStore({ file: '/var/lib/app/webhooks.db', retentionDays: 60, table: 'agent_authz_deliveries' });
 * ```
 */
export interface SqliteDedupOptions {
  /** Database file (created if missing). */
  file: string;
  /** Days a processed id is remembered, 1 to 3650. Default 30. */
  retentionDays?: number;
  /** Table name (letters, digits, underscore). Default `webhook_deliveries`. */
  table?: string;
  /** Clock in Unix milliseconds (purge cut-off). Default `Date.now`. */
  clock?: () => number;
}

const DAY_MS = 86_400_000;
/** Purge expired ids every this many recorded ids. */
const PURGE_EVERY = 500;
const LABEL = 'SqliteDedupStore options:';
const KEYS = ['file', 'retentionDays', 'table', 'clock'] as const;

/** better-sqlite3 objects kept referenced for the life of the process (see the file header). */
const KEEP_ALIVE = new Set<SqliteDatabase | Statement>();

/**
 * Delivery ids in SQLite: the durable {@link DedupStore} for
 * `createWebhookReceiver`. The receiver closes it when it is closed.
 *
 * ```ts
 * const store = new SqliteDedupStore({ file: './webhook-deliveries.db' });
 * store.add('f0e1d2c3-...', Date.now());
 * store.has('f0e1d2c3-...');   // true, also after a restart
 * store.close();
 * ```
 *
 * @throws TypeError naming the option (`SqliteDedupStore options: file: ...`) on misuse.
 */
export class SqliteDedupStore implements DedupStore {
  private readonly db: SqliteDatabase;
  private readonly hasStmt: Statement;
  private readonly addStmt: Statement;
  private readonly purgeStmt: Statement;
  private readonly retentionMs: number;
  private readonly clock: () => number;
  private addsSincePurge = 0;

  constructor(opts: SqliteDedupOptions) {
    const o = checkKeys(opts, LABEL, KEYS);
    if (o.file === undefined) fail(at(LABEL, 'file'), 'is required (the database file, created if missing)');
    const file = checkString(o.file, at(LABEL, 'file'));
    const table = o.table === undefined ? 'webhook_deliveries' : checkString(o.table, at(LABEL, 'table'));
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(table)) fail(at(LABEL, 'table'), 'must be an SQL identifier (letters, digits, underscore)');
    this.retentionMs = checkInt(o.retentionDays, at(LABEL, 'retentionDays'), 1, 3650, 30) * DAY_MS;
    checkFunction(o.clock, at(LABEL, 'clock'), true);
    this.clock = (o.clock as (() => number) | undefined) ?? Date.now;
    this.db = new Database(file);
    KEEP_ALIVE.add(this.db);
    this.db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;'
      + `CREATE TABLE IF NOT EXISTS ${table} (delivery_id TEXT PRIMARY KEY, received_at INTEGER NOT NULL) WITHOUT ROWID;`
      + `CREATE INDEX IF NOT EXISTS ${table}_received ON ${table} (received_at);`);
    this.hasStmt = this.keep(this.db.prepare(`SELECT 1 FROM ${table} WHERE delivery_id = ?`));
    this.addStmt = this.keep(this.db.prepare(`INSERT OR IGNORE INTO ${table} (delivery_id, received_at) VALUES (?, ?)`));
    this.purgeStmt = this.keep(this.db.prepare(`DELETE FROM ${table} WHERE received_at < ?`));
  }

  private keep(stmt: Statement): Statement {
    KEEP_ALIVE.add(stmt);
    return stmt;
  }

  /** True when `deliveryId` was recorded (and not purged). Throws once the store is closed. */
  has(deliveryId: string): boolean {
    return this.hasStmt.get(deliveryId) !== undefined;
  }

  /** Records `deliveryId`; durable when it returns. Recording it again is not an error. */
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

  /** Closes the database file (once; later calls do nothing). */
  close(): void {
    if (this.db.open) this.db.close();
  }
}
