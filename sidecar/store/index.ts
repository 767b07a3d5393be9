/**
 * The store factory: opens the embedded SQLite store (the default and, for
 * now, only implementation of {@link Store}). A PostgreSQL store will
 * implement the same interface.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Db } from './sqlite/db.js';
import { MIGRATIONS } from './sqlite/migrations.js';
import { SqliteAccountStore } from './sqlite/accounts.js';
import { SqlitePlatformStore } from './sqlite/platforms.js';
import { SqliteDelegationStore } from './sqlite/delegations.js';
import { SqliteProofStore } from './sqlite/proofs.js';
import { SqliteOutboxStore } from './sqlite/outbox.js';
import type { Store } from './types.js';

export type * from './types.js';

/** Name of the database file inside the data directory. */
export const DB_FILE_NAME = 'agent-authz.sqlite';

/** Options for {@link openSqliteStore}. */
export interface SqliteStoreOptions {
  /** Database file path. */
  file: string;
  /** Observer of write-transaction latency (seconds). */
  onTransaction?: (seconds: number, ok: boolean) => void;
  /** Path of a better-sqlite3 native binding built for this runtime. */
  nativeBinding?: string;
}

/** The SQLite {@link Store}, with a fault-injection hook for tests. */
export class SqliteStore implements Store {
  readonly accounts: SqliteAccountStore;
  readonly platforms: SqlitePlatformStore;
  readonly delegations: SqliteDelegationStore;
  readonly proofs: SqliteProofStore;
  readonly outbox: SqliteOutboxStore;
  private readonly db: Db;

  constructor(opts: SqliteStoreOptions) {
    if (opts.file !== ':memory:') fs.mkdirSync(path.dirname(opts.file), { recursive: true });
    this.db = new Db({
      file: opts.file,
      ...(opts.onTransaction ? { onTransaction: opts.onTransaction } : {}),
      ...(opts.nativeBinding ? { nativeBinding: opts.nativeBinding } : {}),
    });
    this.db.migrate();
    this.accounts = new SqliteAccountStore(this.db);
    this.platforms = new SqlitePlatformStore(this.db);
    this.delegations = new SqliteDelegationStore(this.db);
    this.proofs = new SqliteProofStore(this.db);
    this.outbox = new SqliteOutboxStore(this.db);
  }

  /**
   * Test hook: `fn` is called with each SQL text before it runs; throwing
   * from it simulates a store fault. Pass undefined to clear.
   */
  injectFault(fn: ((sql: string) => void) | undefined): void {
    this.db.fault = fn;
  }

  async ping(): Promise<{ ok: boolean; schemaVersion: number; expectedVersion: number }> {
    const expectedVersion = MIGRATIONS[MIGRATIONS.length - 1]!.version;
    this.db.fault?.('SELECT 1');
    const schemaVersion = this.db.schemaVersion();
    return { ok: schemaVersion === expectedVersion, schemaVersion, expectedVersion };
  }

  async backup(file: string): Promise<void> {
    await this.db.raw.backup(file);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

/** Opens (creating and migrating as needed) the SQLite store. */
export function openSqliteStore(opts: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(opts);
}
