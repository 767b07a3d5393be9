/**
 * The store factory: the embedded SQLite store in the data directory (the
 * default), or the PostgreSQL store shared by several replicas when a
 * database URL is configured (`SIDECAR_DATABASE_URL`). The rest of the
 * sidecar sees only the {@link Store} interface, and the offline audit
 * verifier only an {@link AuditSource} of either engine.
 *
 * {@link openStore} and {@link openAuditSource} import the engine they open
 * when they open it: a sidecar on PostgreSQL never loads better-sqlite3, one on
 * SQLite never loads pg. The SQLite engine's own modules are re-exported here
 * for the tools and tests that open a file directly; they load the driver only
 * when a file is opened (sqlite/driver.ts). The PostgreSQL engine is imported
 * from `./postgres/store.js` by whoever needs it directly.
 */
import path from 'node:path';
import { DB_FILE_NAME } from './sqlite/store.js';
import type { PostgresSettings } from './postgres/db.js';
import type { AuditSource, Store, StoreMonitor } from './types.js';

export type * from './types.js';
export { DB_FILE_NAME, SqliteStore, openSqliteStore } from './sqlite/store.js';
export type { SqliteStoreOptions } from './sqlite/store.js';
export type { PostgresSettings } from './postgres/db.js';
export type { PostgresStore, PostgresStoreOptions } from './postgres/store.js';
export { AuditSourceError, SchemaTooNewError, StoreUnavailableError } from './errors.js';
export { redactDatabaseUrl } from './postgres/url.js';

/** What {@link openStore} needs from the configuration. */
export interface OpenStoreOptions {
  /** The data directory (the SQLite file lives in it). */
  dataDir: string;
  /** PostgreSQL settings; null selects SQLite. */
  database: PostgresSettings | null;
  /** Receives what the engine reports for metrics. */
  monitor?: StoreMonitor;
  /** Link audit rows into the per-account hash chain (default true; false is SIDECAR_AUDIT_CHAIN=off). */
  auditChain?: boolean;
  /** SQLite's `synchronous` level (`SIDECAR_SQLITE_SYNCHRONOUS`; default FULL); PostgreSQL ignores it. */
  sqliteSynchronous?: 'normal' | 'full';
}

/** Opens the configured store, migrated and ready, loading only its engine. */
export async function openStore(o: OpenStoreOptions): Promise<Store> {
  const extra = {
    ...(o.monitor ? { monitor: o.monitor } : {}), ...(o.auditChain !== undefined ? { auditChain: o.auditChain } : {}),
  };
  if (o.database) return (await import('./postgres/store.js')).openPostgresStore({ ...o.database, ...extra });
  const synchronous = o.sqliteSynchronous === 'normal' ? 'NORMAL' as const : 'FULL' as const;
  return (await import('./sqlite/store.js')).openSqliteStore({
    file: path.join(o.dataDir, DB_FILE_NAME), ...extra, synchronous,
  });
}

/**
 * Opens a store's audit trail read-only for the offline verifier: a SQLite file, or a
 * PostgreSQL database (one read-only snapshot). Throws `AuditSourceError` when it cannot be read.
 */
export async function openAuditSource(o: { file: string } | { database: PostgresSettings }): Promise<AuditSource> {
  return 'file' in o
    ? (await import('./sqlite/audit-source.js')).openSqliteAuditSource(o.file)
    : (await import('./postgres/audit-source.js')).openPostgresAuditSource(o.database);
}
