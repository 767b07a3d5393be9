/**
 * The store contract (test/sidecar/store/contract.ts), unchanged, on the
 * PostgreSQL engine: a throwaway server (test/helpers/postgres.ts), a new
 * database for every store the contract opens, a small pool so that the
 * concurrent calls really run on several connections at once. The store's
 * migrations run once, on the first (empty) database; every store after it
 * opens a copy of that migrated database (migratedDatabases: creating and
 * migrating 28 databases was most of this file's time).
 */
import t from 'tap';
import { migratedDatabases, startPostgres } from '../../helpers/postgres.js';
import { openPostgresStore } from '../../../sidecar/store/postgres/store.js';
import { runStoreContract } from '../store/contract.js';

const pg = await startPostgres(t);
if (pg) {
  t.comment(`PostgreSQL ${pg.version} on 127.0.0.1:${pg.port}`);
  const newDatabase = migratedDatabases(pg);
  await runStoreContract(t, 'postgres', async () => openPostgresStore({
    url: await newDatabase(), poolMax: 6, statementTimeoutMs: 10_000, connectTimeoutMs: 5_000,
  }));
}
