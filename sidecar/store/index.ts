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
import { SqliteApprovalStore, SqliteUsageStore } from './sqlite/approvals.js';
import { SqliteAuditStore } from './sqlite/audit.js';
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
  /** Link audit rows into the per-account hash chain (default true; false is SIDECAR_AUDIT_CHAIN=off). */
  auditChain?: boolean;
}

/** The SQLite {@link Store}. */
export class SqliteStore implements Store {
  readonly accounts: SqliteAccountStore;
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
    this.db = new Db({
      file: opts.file,
      ...(opts.onTransaction ? { onTransaction: opts.onTransaction } : {}),
    });
    this.db.migrate();
    this.accounts = new SqliteAccountStore(this.db);
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

  async close(): Promise<void> {
    this.db.close();
  }
}

/** Opens (creating and migrating as needed) the SQLite store. */
export function openSqliteStore(opts: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(opts);
}
