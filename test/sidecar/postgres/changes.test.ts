/**
 * The change feed of the PostgreSQL store (sidecar/store/postgres/changes.ts)
 * and what it does to the caches (sidecar/store/follow.ts), on a real server:
 *
 * - changes committed by another store arrive (revocation, key rotation);
 * - when its LISTEN connection is cut and cannot come back (connections to
 *   the database refused for a while), the feed is `stale` at once and the
 *   caches are suspended (read-through); a revocation committed meanwhile is
 *   never notified, yet after the connection returns the resync reloads it.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { openPostgresStore } from '../../../sidecar/store/postgres/store.js';
import type { StoreChange } from '../../../sidecar/store/index.js';
import { followChanges } from '../../../sidecar/store/follow.js';
import { NOW, approved, ev, newPrefix, seed } from '../store/contract-fixtures.js';

const until = async (what: string, ok: () => boolean, ms = 5_000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

const pg = await startPostgres(t);
if (pg) {
  const url = await pg.createDatabase();
  const db = url.split('/').pop()!;
  const opts = { url, poolMax: 3, statementTimeoutMs: 5_000, connectTimeoutMs: 1_000 };
  const reader = await openPostgresStore(opts);
  const writer = await openPostgresStore({ ...opts, changes: false });
  t.teardown(async () => { await reader.close(); await writer.close(); });
  const changes: StoreChange[] = [];
  reader.changes!.subscribe((c) => changes.push(c));
  const hooks = { revoked: [] as string[], keys: [] as string[], suspended: 0, resumed: [] as string[][] };
  followChanges(reader, {
    revoked: (id) => hooks.revoked.push(id), keysChanged: (id) => hooks.keys.push(id),
    suspend: () => { hooks.suspended++; }, resume: (ids) => hooks.resumed.push(ids),
  });

  await t.test('changes committed elsewhere arrive', async (t) => {
    const x = await seed(writer);
    const c = await approved(writer, x);
    await writer.delegations.revokeCertificate(c.id, 'r', NOW + 5, null);
    await until('the revocation', () => hooks.revoked.includes(c.id));
    await writer.platforms.rotateApiKey(x.c.id, { ...x.k, id: randomUUID(), prefix: newPrefix() }, null, () => ev(x.accountId, x.p.id, x.c.id, 'rotated'), () => []);
    await until('the key change', () => hooks.keys.includes(x.c.id));
    t.pass('revocation and key rotation notified');
    t.equal(reader.changes!.live, true);
  });

  await t.test('a lost LISTEN connection: stale at once, read-through, then a full resync', async (t) => {
    const x = await seed(writer);
    const c = await approved(writer, x);
    const before = hooks.suspended;
    // The writer keeps an open pooled connection; no new connection gets in until allowed again.
    await writer.ping();
    await pg.admin(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false`);
    try {
      const cut = await pg.admin<{ n: number }>("SELECT COUNT(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE '%(changes)'", [db]);
      t.equal(cut[0]!.n, 1, 'the LISTEN connection was cut');
      await until('stale', () => reader.changes!.live === false);
      t.ok(hooks.suspended > before, 'the caches were suspended (read-through)');
      t.same(changes.at(-1), { type: 'stale' });
      await writer.delegations.revokeCertificate(c.id, 'while the feed was down', NOW + 9, null);
      await new Promise((r) => setTimeout(r, 300));
      t.notOk(hooks.revoked.includes(c.id), 'that revocation was not notified');
      t.equal(reader.changes!.live, false, 'still stale while connections are refused');
    } finally {
      await pg.admin(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`);
    }
    await until('the resync', () => hooks.resumed.some((ids) => ids.includes(c.id)), 10_000);
    t.ok(reader.changes!.live, 'live again');
    t.ok(changes.some((x) => x.type === 'resync'), 'a resync event');
    t.ok(hooks.resumed.at(-1)!.includes(c.id), 'the resync reloaded the revocation it missed');
  });
}
