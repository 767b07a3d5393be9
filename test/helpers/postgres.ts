/**
 * A throwaway PostgreSQL server for one test file (test/shared/pg-server.ts: Debian's
 * `postgresql` package, which `.ci/run` installs; a copy of an `initdb` template in a temp dir;
 * `postgres` on a free loopback port), stopped and removed in the test's
 * teardown.
 *
 * In CI (`CI=true`) a missing or failing server fails the test with the
 * reason; elsewhere {@link startPostgres} returns null after printing why the
 * file is skipped.
 *
 * Databases are created with `STRATEGY FILE_COPY` (the server runs with fsync off, so its
 * checkpoints cost little): measured 0.36 s wall and 0.12 s of server CPU a database, against
 * 0.6 s and 0.23 s for PostgreSQL 15's default `WAL_LOG`, which writes every block of the
 * template to the WAL. Files that open many stores copy a migrated database instead of
 * migrating each ({@link migratedDatabases}).
 */
import crypto from 'node:crypto';
import type { Test } from 'tap';
import { findPostgres, launchPostgres } from '../shared/pg-server.js';
import type { PgCluster } from '../shared/pg-server.js';
import { openPostgresStore } from '../../sidecar/store/postgres/store.js';

export type { PgCluster } from '../shared/pg-server.js';

/** A fresh database name (unquoted identifier). */
let named = 0;
const freshName = (): string => `t${process.pid}_${++named}_${crypto.randomBytes(3).toString('hex')}`;

/**
 * Starts a cluster for the test `t` (stopped and removed in its teardown). Returns null
 * outside CI when no server can be started (the reason is printed and the file is skipped);
 * in CI it throws with the reason.
 */
export async function startPostgres(t: Test, o: { settings?: Record<string, string> } = {}): Promise<PgCluster | null> {
  const found = findPostgres();
  const refuse = (reason: string): null => {
    if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`PostgreSQL tests must run in CI: ${reason}`);
    t.comment(`skipped: ${reason}`);
    t.pass('PostgreSQL tests', { skip: `PostgreSQL not available: ${reason}` });
    return null;
  };
  if ('reason' in found) return refuse(found.reason);
  try {
    const c = await launchPostgres(o.settings ? { settings: o.settings } : {});
    t.teardown(() => c.destroy());
    return {
      ...c,
      async createDatabase(name = freshName()) {
        await c.admin(`CREATE DATABASE ${name} OWNER authz STRATEGY FILE_COPY`);
        return c.url(name);
      },
    };
  } catch (err) {
    return refuse(`the test server did not start: ${(err as Error).message}`);
  }
}

/**
 * New databases at the current schema, for a file that opens many stores (the store contract):
 * the first call creates an empty database and lets the store's own migrations run on it
 * (`openPostgresStore`, then closed), and that call and every later one return a copy of it
 * (`CREATE DATABASE … TEMPLATE`): a copy and a store opened on it measured 0.4 s wall and
 * 0.16 s of server CPU, creating and migrating each 1.1 s and 0.4 s. The migrations write
 * schema and their own version rows only, so a copy is what migrating a new empty database
 * leaves; a store opened on it finds nothing to apply. The template is never opened again, so
 * a copy never sees another store's rows.
 */
export function migratedDatabases(pg: PgCluster): () => Promise<string> {
  let template: Promise<string> | undefined;
  const migrate = async (): Promise<string> => {
    const name = freshName();
    const url = await pg.createDatabase(name);
    const s = await openPostgresStore({
      url, poolMax: 1, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000, changes: false,
    });
    await s.close();
    return name;
  };
  return async () => {
    template ??= migrate();
    const from = await template;
    const name = freshName();
    // The server waits (at most 5 s) for the closed store's backend to exit before copying.
    await pg.admin(`CREATE DATABASE ${name} TEMPLATE ${from} OWNER authz STRATEGY FILE_COPY`);
    return pg.url(name);
  };
}
