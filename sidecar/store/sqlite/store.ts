/**
 * The SQLite {@link Store}: one database file, owned by one sidecar process
 * (docs/storage.md), opened, migrated and assembled from the sub-stores of
 * this folder. It has no change feed: the one process updates its own caches.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Db } from './db.js';
import { MIGRATIONS } from './migrations.js';
import { SqliteRunner } from './runner.js';
import { SqlAccountStore } from '../sql/accounts.js';
import { SqlitePlatformStore } from './platforms.js';
import { SqliteDelegationStore } from './delegations.js';
import { SqliteProofStore } from './proofs.js';
import { SqliteOutboxStore } from './outbox.js';
import { SqliteApprovalStore, SqliteUsageStore } from './approvals.js';
import { SqliteAuditStore } from './audit.js';
import type { PoolStats, Store, StoreMonitor } from '../types.js';

/** Name of the database file inside the data directory. */
export const DB_FILE_NAME = 'agent-authz.sqlite';

/** Options for {@link openSqliteStore}. */
export interface SqliteStoreOptions {
  /** Database file path. */
  file: string;
  /** Receives the write-transaction latencies. */
  monitor?: StoreMonitor;
  /** Link audit rows into the per-account hash chain (default true; false is SIDECAR_AUDIT_CHAIN=off). */
  auditChain?: boolean;
}

/** The SQLite {@link Store}. */
export class SqliteStore implements Store {
  readonly accounts: SqlAccountStore;
  readonly platforms: SqlitePlatformStore;
  readonly delegations: SqliteDelegationStore;
  readonly proofs: SqliteProofStore;
  readonly outbox: SqliteOutboxStore;
  readonly approvals: SqliteApprovalStore;
  readonly usage: SqliteUsageStore;
  readonly audit: SqliteAuditStore;
  private readonly db: Db;

  constructor(opts: SqliteStoreOptions) {
    if (opts.file !== ':memory:') fs.mkdirSync(path.dirname(opts.file), { recursive: true });
    const monitor = opts.monitor;
    this.db = new Db({
      file: opts.file,
      ...(monitor?.transaction ? { onTransaction: (s: number, ok: boolean) => monitor.transaction!(s, ok) } : {}),
    });
    try {
      this.db.migrate();
    } catch (err) {
      this.db.close();
      throw err;
    }
    const runner = new SqliteRunner(this.db);
    this.accounts = new SqlAccountStore(runner);
    this.platforms = new SqlitePlatformStore(this.db);
    this.delegations = new SqliteDelegationStore(this.db);
    this.proofs = new SqliteProofStore(this.db, opts.auditChain ?? true);
    this.outbox = new SqliteOutboxStore(this.db);
    this.approvals = new SqliteApprovalStore(this.db, (a) => this.proofs.insertAudit(a));
    this.usage = new SqliteUsageStore(this.db);
    this.audit = new SqliteAuditStore(this.db);
  }

  async ping(): Promise<{ ok: boolean; schemaVersion: number; expectedVersion: number }> {
    const expectedVersion = MIGRATIONS[MIGRATIONS.length - 1]!.version;
    const schemaVersion = this.db.schemaVersion();
    return { ok: schemaVersion === expectedVersion, schemaVersion, expectedVersion };
  }

  async keyCheck(candidate: Uint8Array): Promise<Uint8Array> {
    return this.db.tx(() => {
      this.db.run("INSERT INTO store_meta (key, value) VALUES ('key_check', ?) ON CONFLICT (key) DO NOTHING", Buffer.from(candidate));
      return new Uint8Array(this.db.get<{ value: Buffer }>("SELECT value FROM store_meta WHERE key = 'key_check'")!.value);
    });
  }

  /** One connection, used by one statement at a time: never waited for. */
  poolStats(): PoolStats {
    return { inUse: 0, idle: 1, waiting: 0 };
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

/** Opens (creating and migrating as needed) the SQLite store. */
export function openSqliteStore(opts: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(opts);
}
