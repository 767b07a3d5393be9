/**
 * The SQLite store on real files in a temp dir: the store contract
 * (contract.ts, the same suite every engine passes), then what is SQLite's
 * own: WAL mode, recorded migrations, idempotent reopen, and group commit.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { openSqliteStore, DB_FILE_NAME } from '../../../sidecar/store/index.js';
import type { SqliteStore } from '../../../sidecar/store/index.js';
import { MIGRATIONS } from '../../../sidecar/store/sqlite/migrations.js';
import { runStoreContract } from './contract.js';

await runStoreContract(t, 'sqlite', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-contract-'));
  const s = openSqliteStore({ file: path.join(dir, DB_FILE_NAME) });
  const close = s.close.bind(s);
  s.close = async () => { await close(); fs.rmSync(dir, { recursive: true, force: true }); };
  return s;
});

function tempStore(t: { teardown(fn: () => unknown): void }): { dir: string; file: string; open(): SqliteStore } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-store-'));
  const file = path.join(dir, DB_FILE_NAME);
  const opened: SqliteStore[] = [];
  t.teardown(async () => {
    for (const s of opened) await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, file, open: () => { const s = openSqliteStore({ file }); opened.push(s); return s; } };
}

/** A read-only side connection to look at the file. */
function peek<T>(file: string, fn: (db: Database.Database) => T): T {
  const db = new Database(file, { readonly: true });
  try { return fn(db); } finally { db.close(); }
}

t.test('WAL mode, migrations recorded, reopening is idempotent', async (t) => {
  const { file, open } = tempStore(t);
  const s1 = open();
  const ping = await s1.ping();
  const latest = MIGRATIONS[MIGRATIONS.length - 1]!.version;
  t.same(ping, { ok: true, schemaVersion: latest, expectedVersion: latest });
  const acct = await s1.accounts.findOrCreateAccount('wal@example.com', randomUUID(), 5);
  t.equal(peek(file, (db) => db.pragma('journal_mode', { simple: true })), 'wal', 'journal_mode=wal is set on the file');
  t.ok(fs.existsSync(`${file}-wal`), 'a -wal file exists while open');
  const rows = peek(file, (db) => db.prepare('SELECT version, name, applied_at FROM schema_migrations ORDER BY version').all() as { version: number; name: string; applied_at: string }[]);
  t.same(rows.map((r) => [r.version, r.name]), MIGRATIONS.map((m) => [m.version, m.name]), 'one row per migration');
  for (const r of rows) t.ok(!Number.isNaN(Date.parse(r.applied_at)), 'applied_at is a timestamp');
  const tables = peek(file, (db) => (db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as { name: string }[]).map((x) => x.name));
  for (const name of ['accounts', 'login_codes', 'sessions', 'platforms', 'connections', 'api_keys', 'agents', 'delegation_requests', 'certificates', 'challenges', 'audit_events', 'outbox', 'delivery_attempts']) {
    t.ok(tables.includes(name), `table ${name}`);
  }
  await s1.close();

  // Reopen twice: no migration runs again, data survives.
  for (let i = 0; i < 2; i++) {
    const s = open();
    t.same(await s.ping(), { ok: true, schemaVersion: latest, expectedVersion: latest }, `reopen ${i + 1}: ping`);
    t.equal((await s.accounts.getAccount(acct.id))?.email, 'wal@example.com', 'data survives reopen');
    await s.close();
    const again = peek(file, (db) => db.prepare('SELECT version, applied_at FROM schema_migrations ORDER BY version').all());
    t.same(again, rows.map((r) => ({ version: r.version, applied_at: r.applied_at })), 'migration rows unchanged (not re-applied)');
    t.equal(peek(file, (db) => db.pragma('journal_mode', { simple: true })), 'wal');
  }
  const s3 = open();
  t.equal((await s3.accounts.findOrCreateAccount('wal@example.com', randomUUID(), 9)).id, acct.id, 'findOrCreate returns the existing account');
});

t.test('group commit: one transaction per event-loop turn, a savepoint per unit of work', async (t) => {
  const { Db } = await import('../../../sidecar/store/sqlite/db.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-group-'));
  const txs: boolean[] = [];
  const db = new Db({ file: path.join(dir, 'g.sqlite'), onTransaction: (_s, ok) => txs.push(ok) });
  t.teardown(() => { db.close(); fs.rmSync(dir, { recursive: true, force: true }); });
  db.raw.exec('CREATE TABLE g (k TEXT PRIMARY KEY, v INTEGER NOT NULL)');
  const rows = (): { k: string; v: number }[] => db.all('SELECT k, v FROM g ORDER BY k');
  const insert = (k: string) => () => db.run('INSERT INTO g (k, v) VALUES (?, 1)', k);

  // Three units in one turn: one transaction; the one that throws loses only its own changes.
  const results = await Promise.allSettled([
    db.groupTx(insert('a')),
    db.groupTx(() => { insert('b')(); throw new Error('unit b fails'); }),
    db.groupTx(() => { insert('c')(); return 'c done'; }),
  ]);
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  t.equal((results[1] as PromiseRejectedResult).reason.message, 'unit b fails');
  t.equal((results[2] as PromiseFulfilledResult<string>).value, 'c done');
  t.same(rows().map((r) => r.k), ['a', 'c'], 'b rolled back to its savepoint, a and c committed');
  t.same(txs, [true], 'one transaction for the three');

  // A constraint error in one unit (the key exists) rolls back that unit only.
  const dup = await Promise.allSettled([db.groupTx(insert('d')), db.groupTx(insert('a')), db.groupTx(insert('e'))]);
  t.same(dup.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  t.same(rows().map((r) => r.k), ['a', 'c', 'd', 'e']);

  // COMMIT fails (a deferred foreign key is violated at COMMIT): every unit of the group
  // rejects and nothing of it is written.
  db.raw.exec('CREATE TABLE child (k TEXT PRIMARY KEY, parent TEXT REFERENCES g(k) DEFERRABLE INITIALLY DEFERRED)');
  const failed = await Promise.allSettled([db.groupTx(insert('f')), db.groupTx(() => db.run("INSERT INTO child (k, parent) VALUES ('c1', 'missing')"))]);
  t.same(failed.map((r) => r.status), ['rejected', 'rejected']);
  t.match((failed[0] as PromiseRejectedResult).reason.message, /FOREIGN KEY/, 'the COMMIT error');
  t.same(rows().map((r) => r.k), ['a', 'c', 'd', 'e'], 'nothing of the failed group');
  t.notOk(db.raw.inTransaction, 'rolled back');

  // A group of one is a plain transaction; later turns get their own transactions.
  t.equal(await db.groupTx(() => { insert('h')(); return 7; }), 7);
  await db.groupTx(insert('i'));
  t.same(rows().map((r) => r.k), ['a', 'c', 'd', 'e', 'h', 'i']);

  // Work queued when the connection closes is committed first.
  const late = db.groupTx(insert('j'));
  db.close();
  t.equal(await late, 1, 'flushed by close()');
  t.same(peek(path.join(dir, 'g.sqlite'), (d) => d.prepare('SELECT k FROM g ORDER BY k').all().map((r) => (r as { k: string }).k)), ['a', 'c', 'd', 'e', 'h', 'i', 'j']);
});
