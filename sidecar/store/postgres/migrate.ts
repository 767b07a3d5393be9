/**
 * Schema migrations of the PostgreSQL store at startup. Several replicas may
 * start at once: the first takes a session advisory lock and applies what is
 * missing, each migration in its own transaction; the others wait for the
 * lock, then find nothing left to do. A database migrated by a newer sidecar
 * (a version this code does not know) stops startup with a clear message.
 */
import pg from 'pg';
import { PG_MIGRATIONS } from './migrations.js';
import { SchemaTooNewError } from '../errors.js';
import type { PgDb } from './db.js';

/** Advisory-lock key of the migration step (one 64-bit key; "agentauthz" in ASCII, truncated). */
export const MIGRATION_LOCK_KEY = '7018704346211214458';

/** The newest schema version this code knows. */
export const PG_SCHEMA_VERSION = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.version;

/** The applied schema version (0 for an empty database). */
export async function pgSchemaVersion(q: { query: pg.Pool['query'] } | pg.PoolClient): Promise<number> {
  const exists = await q.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  if (!exists.rows[0]?.t) return 0;
  const r = await q.query<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_migrations');
  return Number(r.rows[0]?.v ?? 0);
}

/**
 * Applies the missing migrations under the advisory lock; returns the schema version.
 * Throws {@link SchemaTooNewError} when the database is ahead of this code.
 */
export async function migratePostgres(db: PgDb): Promise<number> {
  let client: pg.PoolClient;
  try { client = await db.pool.connect(); } catch (err) { throw db.fail(err); }
  let broken: Error | undefined;
  const onError = (err: Error): void => { broken = err; };
  client.on('error', onError);
  try {
    // Waiting for the lock (another replica migrating) is not bounded by the statement timeout.
    await client.query('SET statement_timeout = 0');
    await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations
        (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
      const applied = await pgSchemaVersion(client);
      if (applied > PG_SCHEMA_VERSION) throw new SchemaTooNewError(applied, PG_SCHEMA_VERSION);
      for (const m of PG_MIGRATIONS) {
        if (m.version <= applied) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw err;
        }
      }
      return await pgSchemaVersion(client);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch((err: unknown) => { broken = err as Error; });
      await client.query('RESET statement_timeout').catch((err: unknown) => { broken = err as Error; });
    }
  } catch (err) {
    if (err instanceof SchemaTooNewError) throw err;
    broken ??= err as Error;
    throw db.fail(err);
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}
