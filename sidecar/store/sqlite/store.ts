/**
 * The SQLite {@link Store}: one database file, owned by one sidecar process
 * (docs/storage.md), opened, migrated and assembled from the shared stores of
 * sql/ on a {@link SqliteRunner}. It has no change feed: the one process
 * updates its own caches.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Db } from './db.js';
import { MIGRATIONS } from './migrations.js';
import { SqliteRunner } from './runner.js';
import { SqliteOutboxStore } from './outbox.js';
import { SqliteProofStore } from './proofs.js';
import { SqlAccountStore } from '../sql/accounts.js';
import { SqlPlatformStore } from '../sql/platforms.js';
import { SqlDelegationStore } from '../sql/delegations.js';
import { SqlApprovalStore, SqlUsageStore } from '../sql/approvals.js';
import { SqlIdempotencyStore } from '../sql/idempotency.js';
import { SqlOrganisationStore } from '../sql/organisations.js';
import { SqlPublishingStore } from '../sql/publishing.js';
import { SqlAuditStore } from '../sql/audit.js';
import { SqlDecisionStore } from '../sql/decisions.js';
import { keyCheck } from '../sql/meta.js';
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
  /** SQLite's `synchronous` level (db.ts; `SIDECAR_SQLITE_SYNCHRONOUS`). */
  synchronous?: 'NORMAL' | 'FULL';
}

/** The SQLite {@link Store}. */
export class SqliteStore implements Store {
  readonly accounts: SqlAccountStore;
  readonly platforms: SqlPlatformStore;
  readonly delegations: SqlDelegationStore;
  readonly proofs: SqliteProofStore;
  readonly outbox: SqliteOutboxStore;
  readonly approvals: SqlApprovalStore;
  readonly usage: SqlUsageStore;
  readonly audit: SqlAuditStore;
  readonly decisions: SqlDecisionStore;
  readonly idempotency: SqlIdempotencyStore;
  readonly organisations: SqlOrganisationStore;
  readonly publishing: SqlPublishingStore;
  private readonly db: Db;
  private readonly r: SqliteRunner;

  constructor(opts: SqliteStoreOptions) {
    if (opts.file !== ':memory:') fs.mkdirSync(path.dirname(opts.file), { recursive: true });
    const monitor = opts.monitor;
    this.db = new Db({
      file: opts.file,
      ...(opts.synchronous ? { synchronous: opts.synchronous } : {}),
      ...(monitor?.transaction ? { onTransaction: (s: number, ok: boolean) => monitor.transaction!(s, ok) } : {}),
    });
    try {
      this.db.migrate();
    } catch (err) {
      this.db.close();
      throw err;
    }
    const r = this.r = new SqliteRunner(this.db);
    const chain = opts.auditChain ?? true;
    this.accounts = new SqlAccountStore(r);
    this.platforms = new SqlPlatformStore(r, chain);
    this.delegations = new SqlDelegationStore(r);
    this.proofs = new SqliteProofStore(r, chain);
    this.outbox = new SqliteOutboxStore(r);
    this.approvals = new SqlApprovalStore(r, chain);
    this.usage = new SqlUsageStore(r);
    this.audit = new SqlAuditStore(r);
    this.decisions = new SqlDecisionStore(r);
    this.idempotency = new SqlIdempotencyStore(r);
    this.organisations = new SqlOrganisationStore(r, chain);
    this.publishing = new SqlPublishingStore(r, chain);
  }

  async ping(): Promise<{ ok: boolean; schemaVersion: number; expectedVersion: number }> {
    const expectedVersion = MIGRATIONS[MIGRATIONS.length - 1]!.version;
    const schemaVersion = this.db.schemaVersion();
    return { ok: schemaVersion === expectedVersion, schemaVersion, expectedVersion };
  }

  async keyCheck(candidate: Uint8Array): Promise<Uint8Array> {
    return keyCheck(this.r, candidate);
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
