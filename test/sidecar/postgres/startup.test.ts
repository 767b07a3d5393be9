/**
 * Starting on PostgreSQL: migrations are safe when several replicas start at
 * once (advisory lock; one row per migration), and the sidecar process
 * refuses to start, saying why, when its schema is older than the database's,
 * when its master key cannot open the stored secrets, when the master key is
 * missing, or when the database cannot be reached. The SQLite store refuses a
 * newer schema the same way.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { freePort } from '../../helpers/net.js';
import { openSqliteStore, SchemaTooNewError } from '../../../sidecar/store/index.js';
import { openPostgresStore } from '../../../sidecar/store/postgres/store.js';
import { PG_SCHEMA_VERSION } from '../../../sidecar/store/postgres/migrate.js';
import { MIGRATIONS } from '../../../sidecar/store/sqlite/migrations.js';
import { Db } from '../../../sidecar/store/sqlite/db.js';
import { newMasterKey } from './replicas.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** Runs the sidecar with `env` until it exits or is ready (then it is stopped); resolves to its exit code and output. */
async function run(env: Record<string, string>): Promise<{ code: number | null; ready: boolean; out: string }> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-start-'));
  const child = spawn(process.execPath, [SIDECAR_MAIN], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dir, SIDECAR_LOG_LEVEL: 'warn', ...env },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  let ready = false;
  const poll = (async () => {
    while (child.exitCode === null && child.signalCode === null) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(500) })).status === 200) { ready = true; child.kill('SIGTERM'); return; }
      } catch { /* not yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const code = await exit;
  clearTimeout(killer);
  await poll;
  fs.rmSync(dir, { recursive: true, force: true });
  return { code, ready, out };
}

t.test('SQLite: a file migrated by a newer sidecar is refused', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-newer-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'db.sqlite');
  await openSqliteStore({ file }).close();
  const db = new Db({ file });
  db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from the future', '2099-01-01')", MIGRATIONS.length + 40);
  db.close();
  t.throws(() => openSqliteStore({ file }), SchemaTooNewError);
  t.throws(() => openSqliteStore({ file }), { message: new RegExp(`schema is at version ${MIGRATIONS.length + 40}, newer than this sidecar knows \\(${MIGRATIONS.length}\\)`) });
});

const pg = await startPostgres(t);
if (pg) {
  await t.test('five replicas migrating one empty database at once', async (t) => {
    const url = await pg.createDatabase();
    const opts = { url, poolMax: 2, statementTimeoutMs: 5_000, connectTimeoutMs: 5_000, changes: false };
    const stores = await Promise.all(Array.from({ length: 5 }, () => openPostgresStore(opts)));
    t.teardown(() => Promise.all(stores.map((s) => s.close())));
    for (const s of stores) t.same(await s.ping(), { ok: true, schemaVersion: PG_SCHEMA_VERSION, expectedVersion: PG_SCHEMA_VERSION });
    const rows = await pg.admin<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version', [], url.split('/').pop());
    t.same(rows.map((r) => r.version), Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1), 'each migration applied once');
  });

  await t.test('the sidecar refuses to start, and says why', async (t) => {
    const url = await pg.createDatabase();
    const key = newMasterKey();
    const base = { SIDECAR_DATABASE_URL: url, SIDECAR_MASTER_KEY: key };
    const first = await run(base);
    t.ok(first.ready, 'the first start migrates and becomes ready');
    t.equal(first.code, 0, 'and stops cleanly');

    const other = await run({ ...base, SIDECAR_MASTER_KEY: newMasterKey() });
    t.equal(other.code, 1, 'another master key: exit 1');
    t.notOk(other.ready);
    t.match(other.out, /failed to start: the master key cannot open this database's secrets/, 'says the key does not match');

    const noKey = await run({ SIDECAR_DATABASE_URL: url });
    t.equal(noKey.code, 2, 'no master key: exit 2 (configuration)');
    t.match(noKey.out, /configuration error: SIDECAR_MASTER_KEY: required when SIDECAR_DATABASE_URL is set/);

    await pg.admin("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from the future')", [], url.split('/').pop());
    const older = await run(base);
    t.equal(older.code, 1, 'a newer schema: exit 1');
    t.match(older.out, /failed to start: the database schema is at version 9999, newer than this sidecar knows/);

    const closed = await freePort();
    const down = await run({ ...base, SIDECAR_DATABASE_URL: url.replace(/:\d+\//, `:${closed}/`) });
    t.equal(down.code, 1, 'no database server: exit 1');
    t.match(down.out, /failed to start: the database is unavailable/);
    t.notMatch(down.out + older.out + other.out, new RegExp(url.split('@')[0]!.split(':').pop()!), 'no password in the output');
  });
}
