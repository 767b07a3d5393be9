/**
 * The PostgreSQL {@link Store}: one database shared by any number of sidecar
 * replicas. Opening it connects the pool, runs the migrations under an
 * advisory lock (migrate.ts) and starts the change feed (changes.ts) that
 * tells this replica about changes the others commit. The stores are the
 * shared ones of sql/ on a {@link PgRunner}, with this engine's verify commit.
 */
import { PgDb, clientConfig } from './db.js';
import type { PostgresSettings } from './db.js';
import { PG_SCHEMA_VERSION, migratePostgres, pgSchemaVersion } from './migrate.js';
import { PgChangeFeed } from './changes.js';
import { PgRunner } from './runner.js';
import { PgProofStore } from './proofs.js';
import { SqlAccountStore } from '../sql/accounts.js';
import { SqlPlatformStore } from '../sql/platforms.js';
import { SqlDelegationStore } from '../sql/delegations.js';
import { SqlOutboxStore } from '../sql/outbox.js';
import { SqlApprovalStore, SqlUsageStore } from '../sql/approvals.js';
import { SqlIdempotencyStore } from '../sql/idempotency.js';
import { SqlOrganisationStore } from '../sql/organisations.js';
import { SqlPublishingStore } from '../sql/publishing.js';
import { SqlAuditStore } from '../sql/audit.js';
import { SqlDecisionStore } from '../sql/decisions.js';
import { keyCheck } from '../sql/meta.js';
import type { PoolStats, Store, StoreMonitor } from '../types.js';

export type { PostgresSettings } from './db.js';

/** Options for {@link openPostgresStore}. */
export interface PostgresStoreOptions extends PostgresSettings {
  /** Receives database errors, notification lags and resyncs. */
  monitor?: StoreMonitor;
  /** Start the change feed (default true; the copy command does without). */
  changes?: boolean;
  /** Link audit rows into the per-account hash chain (default true; false is SIDECAR_AUDIT_CHAIN=off). */
  auditChain?: boolean;
}

/** The PostgreSQL {@link Store}. */
export class PostgresStore implements Store {
  readonly accounts: SqlAccountStore;
  readonly platforms: SqlPlatformStore;
  readonly delegations: SqlDelegationStore;
  readonly proofs: PgProofStore;
  readonly outbox: SqlOutboxStore;
  readonly approvals: SqlApprovalStore;
  readonly usage: SqlUsageStore;
  readonly audit: SqlAuditStore;
  readonly decisions: SqlDecisionStore;
  readonly idempotency: SqlIdempotencyStore;
  readonly organisations: SqlOrganisationStore;
  readonly publishing: SqlPublishingStore;
  readonly changes: PgChangeFeed | undefined;
  /** The pool (store-internal; the copy command uses it). */
  readonly db: PgDb;
  private readonly r: PgRunner;

  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(db: PgDb, changes: PgChangeFeed | undefined, chain = true) {
    this.db = db;
    this.changes = changes;
    const r = this.r = new PgRunner(db);
    this.accounts = new SqlAccountStore(r);
    this.platforms = new SqlPlatformStore(r, chain);
    this.delegations = new SqlDelegationStore(r);
    this.proofs = new PgProofStore(r, chain);
    this.outbox = new SqlOutboxStore(r);
    this.approvals = new SqlApprovalStore(r, chain);
    this.usage = new SqlUsageStore(r);
    this.audit = new SqlAuditStore(r);
    this.decisions = new SqlDecisionStore(r);
    this.idempotency = new SqlIdempotencyStore(r);
    this.organisations = new SqlOrganisationStore(r, chain);
    this.publishing = new SqlPublishingStore(r, chain);
  }

  async ping(): Promise<{ ok: boolean; schemaVersion: number; expectedVersion: number }> {
    let v: number;
    try { v = await pgSchemaVersion(this.db.pool); } catch (err) { throw this.db.fail(err); }
    return { ok: v === PG_SCHEMA_VERSION, schemaVersion: v, expectedVersion: PG_SCHEMA_VERSION };
  }

  async keyCheck(candidate: Uint8Array): Promise<Uint8Array> {
    return keyCheck(this.r, candidate);
  }

  poolStats(): PoolStats {
    return this.db.stats();
  }

  async close(): Promise<void> {
    await this.changes?.close();
    await this.db.close();
  }
}

/** Connects, migrates and starts listening; rejects (and closes what it opened) when any step fails. */
export async function openPostgresStore(opts: PostgresStoreOptions): Promise<PostgresStore> {
  const db = new PgDb(opts, opts.monitor);
  let feed: PgChangeFeed | undefined;
  try {
    await migratePostgres(db);
    if (opts.changes !== false) {
      const client = clientConfig(opts);
      // Its own application_name, so operators (and the tests) can tell the LISTEN connection apart.
      feed = new PgChangeFeed({
        client: { ...client, application_name: `${client.application_name} (changes)` },
        ...(opts.monitor ? { monitor: opts.monitor } : {}),
      });
      await feed.start();
    }
  } catch (err) {
    await feed?.close();
    await db.close().catch(() => {});
    throw err;
  }
  return new PostgresStore(db, feed, opts.auditChain ?? true);
}
