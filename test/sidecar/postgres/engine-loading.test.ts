/**
 * `openStore` loads only the engine it opens: a sidecar process on
 * PostgreSQL, after serving the whole flow and a verify, has never mapped
 * better-sqlite3's native addon (read from the child's `/proc/<pid>/maps`).
 * The same check on a SQLite sidecar process does find the addon, so the
 * check can fail.
 */
import fs from 'node:fs';
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { specFlow } from '../../helpers/sidecar.js';
import { bundleFor, expectDecision, verify } from '../decide/helpers.js';
import { newReplicaGroup, startReplica } from './replicas.js';
import type { Replica } from './replicas.js';

const ADDON = /better_sqlite3\.node/;

/** The shared objects mapped into the replica's process now. */
function maps(r: Replica): string {
  return fs.readFileSync(`/proc/${r.proc.pid}/maps`, 'utf8');
}

const pg = fs.existsSync('/proc/self/maps') ? await startPostgres(t) : null;
if (!fs.existsSync('/proc/self/maps')) t.comment('skipped: no /proc/<pid>/maps on this system');
if (pg) {
  const g = await newReplicaGroup(t, pg);

  t.test('a PostgreSQL sidecar never maps better_sqlite3.node', async (t) => {
    const r = await startReplica(t, g, 'pg-only');
    const f = await specFlow(r.sc, 'engine-pg@example.com');
    expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized');
    const mapped = maps(r);
    t.match(mapped, /libc|ld-linux|\/node\b/, 'the maps of the child process were read');
    t.notMatch(mapped, ADDON, 'no better_sqlite3.node in the PostgreSQL sidecar');
  });

  t.test('the same check finds it in a SQLite sidecar', async (t) => {
    const r = await startReplica(t, g, 'sqlite-only', { env: { SIDECAR_DATABASE_URL: '', SIDECAR_DATABASE_POOL_MAX: '' } });
    const f = await specFlow(r.sc, 'engine-sqlite@example.com');
    expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized');
    t.match(maps(r), ADDON, 'better_sqlite3.node is mapped once SQLite is open');
  });
}
