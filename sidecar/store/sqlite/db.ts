/**
 * The SQLite connection for the embedded store: opening (WAL, busy_timeout,
 * synchronous level), numbered migrations, `BEGIN IMMEDIATE` write
 * transactions and a prepared-statement cache.
 *
 * Only files under `sidecar/store/` import this module; nothing outside the
 * store sees a SQLite type.
 */
import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import { openDatabase } from './driver.js';
import { MIGRATIONS } from './migrations.js';
import { SchemaTooNewError } from '../errors.js';

/** Options for {@link openDb}. */
export interface DbOptions {
  /** Path of the database file (`:memory:` is allowed for unit tests). */
  file: string;
  /** `busy_timeout` in milliseconds. */
  busyTimeoutMs?: number;
  /** The `synchronous` level (default {@link SYNCHRONOUS_LEVEL}; `SIDECAR_SQLITE_SYNCHRONOUS`). */
  synchronous?: 'NORMAL' | 'FULL';
  /** Observer of write-transaction latency in seconds (metrics). */
  onTransaction?: (seconds: number, ok: boolean) => void;
}

/**
 * The default `synchronous` level. FULL in WAL mode: the WAL is synced before
 * a commit returns, so an acknowledged commit survives a power loss. NORMAL
 * (`SIDECAR_SQLITE_SYNCHRONOUS=normal`) survives a process crash, but on power
 * loss the commits since the last sync may roll back. See docs/storage.md.
 */
export const SYNCHRONOUS_LEVEL = 'FULL';

/** One unit of work of a group commit and how to settle its promise. */
interface GroupItem {
  fn: () => unknown;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** A thin wrapper over the connection used by the store modules. */
export class Db {
  /** The raw connection (store-internal). */
  readonly raw: SqliteDatabase;
  private readonly stmts = new Map<string, Statement>();
  private readonly onTransaction: ((seconds: number, ok: boolean) => void) | undefined;
  private inTx = false;
  /** Work queued for the next group commit ({@link groupTx}). */
  private group: GroupItem[] = [];
  private groupScheduled = false;

  constructor(opts: DbOptions) {
    this.raw = openDatabase(opts.file);
    // exec() creates no Statement object; see the note on stmt().
    this.raw.exec(`PRAGMA journal_mode = WAL; PRAGMA busy_timeout = ${opts.busyTimeoutMs ?? 5000};
      PRAGMA synchronous = ${opts.synchronous ?? SYNCHRONOUS_LEVEL}; PRAGMA foreign_keys = ON;`);
    this.onTransaction = opts.onTransaction;
  }

  /**
   * A cached prepared statement. Every statement the store uses goes through this cache and
   * stays referenced for the life of the connection: on Node >= 24.19, a better-sqlite3 (< 13)
   * Statement collected by the garbage collector aborts the process, so no code here may let
   * one become garbage (use exec() for statements without results).
   */
  stmt(sql: string): Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.raw.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /** Runs one statement, returning the changed-row count. */
  run(sql: string, ...params: unknown[]): number {
    return this.stmt(sql).run(...params).changes;
  }

  /** First row of a query, or undefined. */
  get<T>(sql: string, ...params: unknown[]): T | undefined {
    return this.stmt(sql).get(...params) as T | undefined;
  }

  /** All rows of a query. */
  all<T>(sql: string, ...params: unknown[]): T[] {
    return this.stmt(sql).all(...params) as T[];
  }

  /**
   * Runs `fn` inside `BEGIN IMMEDIATE … COMMIT`; rolls back if it throws.
   * Nested calls join the outer transaction. BEGIN, COMMIT and ROLLBACK run
   * as cached prepared statements (`exec` would parse them on every call).
   */
  tx<T>(fn: () => T): T {
    if (this.inTx) return fn();
    const started = process.hrtime.bigint();
    this.stmt('BEGIN IMMEDIATE').run();
    this.inTx = true;
    let ok = false;
    try {
      const out = fn();
      this.stmt('COMMIT').run();
      ok = true;
      return out;
    } finally {
      this.inTx = false;
      if (!ok && this.raw.inTransaction) this.stmt('ROLLBACK').run();
      this.onTransaction?.(Number(process.hrtime.bigint() - started) / 1e9, ok);
    }
  }

  /**
   * Group commit: runs `fn` in a write transaction shared with the other `groupTx` calls of
   * the same event-loop turn (one `BEGIN IMMEDIATE … COMMIT` for all of them, flushed by
   * `setImmediate`). Each `fn` runs in its own savepoint: if it throws, only its own changes
   * are rolled back and its promise rejects with what it threw; the others go on. The
   * promise of a `fn` resolves only after the COMMIT that contains its changes; if BEGIN or
   * COMMIT fails, or a statement error ends the whole transaction, every promise of the group
   * rejects and nothing of it is written. A group of one runs exactly like {@link tx}.
   */
  groupTx<T>(fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.group.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (!this.groupScheduled) {
        this.groupScheduled = true;
        setImmediate(() => this.flushGroup());
      }
    });
  }

  /** Commits the queued {@link groupTx} work now. */
  flushGroup(): void {
    this.groupScheduled = false;
    const items = this.group;
    this.group = [];
    if (items.length === 0) return;
    if (items.length === 1) {
      const only = items[0]!;
      let out: unknown;
      try { out = this.tx(only.fn); } catch (err) { only.reject(err); return; }
      only.resolve(out);
      return;
    }
    const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
    try {
      this.tx(() => {
        for (const item of items) {
          this.stmt('SAVEPOINT group_item').run();
          try {
            outcomes.push({ ok: true, value: item.fn() });
            this.stmt('RELEASE group_item').run();
          } catch (err) {
            // A statement error that ended the transaction (I/O, disk full) takes the group with it.
            if (!this.raw.inTransaction) throw err;
            this.stmt('ROLLBACK TO group_item').run();
            this.stmt('RELEASE group_item').run();
            outcomes.push({ ok: false, err });
          }
        }
      });
    } catch (err) {
      for (const item of items) item.reject(err);
      return;
    }
    items.forEach((item, i) => {
      const o = outcomes[i]!;
      if (o.ok) item.resolve(o.value); else item.reject(o.err);
    });
  }

  /**
   * Applies the numbered migrations that are not yet applied. Returns the schema version.
   * Throws {@link SchemaTooNewError} when the file was migrated by a newer sidecar.
   */
  migrate(): number {
    this.raw.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const applied = this.schemaVersion();
    const latest = MIGRATIONS[MIGRATIONS.length - 1]!.version;
    if (applied > latest) throw new SchemaTooNewError(applied, latest);
    for (const m of MIGRATIONS) {
      if (m.version <= applied) continue;
      this.raw.exec('BEGIN IMMEDIATE');
      try {
        this.raw.exec(m.sql);
        m.after?.(this);
        this.stmt('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, new Date().toISOString());
        this.raw.exec('COMMIT');
      } catch (err) {
        this.raw.exec('ROLLBACK');
        throw err;
      }
    }
    return this.schemaVersion();
  }

  /** The highest applied migration version. */
  schemaVersion(): number {
    return (this.stmt('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number }).v;
  }

  /** Closes the connection (checkpointing the WAL). */
  close(): void {
    if (!this.raw.open) return;
    this.flushGroup();
    try { this.raw.exec('PRAGMA wal_checkpoint(TRUNCATE)'); } catch { /* best effort */ }
    this.raw.close();
  }
}
