/**
 * `agent-authz-sidecar audit verify` on a PostgreSQL database, against
 * tampering done directly in PostgreSQL by someone with the sidecar's own
 * role (the tables' owner, who can switch off the append-only trigger): a
 * changed row (with and without its hash fixed, with the chain after it
 * rewritten), deleted rows (middle, start, end), inserted rows (linked, not
 * linked, a second row at one position with the unique index dropped),
 * reordered rows and forged checkpoints, including a rewrite re-signed with a
 * stranger's key. Every case exits 1 and names the first broken row; the
 * untouched trail exits 0. The trail is written by the store's decision
 * commits and the real checkpoint job; each case tampers with its own copy
 * (`CREATE DATABASE … TEMPLATE`). Also: the source flags and defaults, a
 * read-only role, unreadable inputs (exit 3, the password never shown), and
 * the command as a process.
 */
import t from 'tap';
import type { Test } from 'tap';
import crypto, { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { rowHash } from '../../../src/audit-chain.js';
import { openPostgresStore } from '../../../sidecar/store/postgres/store.js';
import { startPostgres } from '../../helpers/postgres.js';
import { runNode } from '../../helpers/run-node.js';
import type { Ran } from '../../helpers/run-node.js';
import { signerOf, verifyCli, writeTrail } from '../audit/helpers.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

t.setTimeout(150_000);
const REPO = path.resolve(import.meta.dirname, '../../..');

interface Row {
  seq: number; id: string; account_id: string; event_type: string; connection_id: string | null; agent_id: string | null; cert_id: string | null;
  required_scope: string | null; details: string; created_at: number; chain_position: number; prev_hash: string; hash: string; signature?: string;
}
type Sql = (sql: string, params?: unknown[]) => Promise<Row[]>;

const INT8 = { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? Number : pg.types.getTypeParser(oid, format))) as typeof pg.types.getTypeParser };
const hashOf = (r: Row): string => rowHash({
  id: r.id, accountId: r.account_id, eventType: r.event_type, connectionId: r.connection_id, agentId: r.agent_id, certId: r.cert_id,
  requiredScope: r.required_scope, details: JSON.parse(r.details) as Record<string, unknown>, createdAt: r.created_at, position: r.chain_position, prevHash: r.prev_hash,
});
const rowsOf = (sql: Sql, a: string): Promise<Row[]> => sql('SELECT * FROM audit_events WHERE account_id = $1 ORDER BY chain_position', [a]);
/** Rewrites prev/hash of every row from `from` on and the head, as an attacker who knows the rule would. */
async function relink(sql: Sql, a: string, from: number): Promise<void> {
  let prev: string | null = null;
  for (const r of await rowsOf(sql, a)) {
    if (r.chain_position < from) { prev = r.hash; continue; }
    const fixed: Row = { ...r, prev_hash: prev ?? r.prev_hash };
    fixed.hash = hashOf(fixed);
    await sql('UPDATE audit_events SET prev_hash = $1, hash = $2 WHERE seq = $3', [fixed.prev_hash, fixed.hash, r.seq]);
    prev = fixed.hash;
  }
  const last = (await rowsOf(sql, a)).at(-1)!;
  await sql('UPDATE audit_chain_heads SET position = $1, hash = $2 WHERE account_id = $3', [last.chain_position, last.hash, a]);
}

const pgc = await startPostgres(t);
if (pgc) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-pg-tamper-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The trail: two accounts × 12 decisions, a checkpoint every 5 rows (positions 5 and 10).
  const trailUrl = await pgc.createDatabase('trail');
  const store = await openPostgresStore({ url: trailUrl, poolMax: 2, statementTimeoutMs: 10_000, connectTimeoutMs: 5_000, changes: false });
  const trail = await writeTrail(store, new Uint8Array(crypto.randomBytes(32)));
  await store.close();
  const A = trail.accounts[0]!.accountId;
  const B = trail.accounts[1]!.accountId;
  let copies = 0;

  /**
   * A copy of the trail database; returns its URL (dropped in `t`'s teardown). FILE_COPY: the
   * server runs with fsync off, and copying the files costs about half of PostgreSQL 15's default
   * WAL_LOG, which writes every block of the copy to the WAL (test/helpers/postgres.ts).
   */
  const copy = async (t: Test): Promise<string> => {
    const name = `tamper_${++copies}`;
    await pgc.admin(`CREATE DATABASE ${name} TEMPLATE trail OWNER authz STRATEGY FILE_COPY`);
    t.teardown(() => pgc.admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    return pgc.url(name);
  };
  /** Runs `fn` on `url` as the sidecar's role, with the append-only trigger switched off. */
  const tamper = async (url: string, fn: (sql: Sql) => Promise<void>): Promise<void> => {
    const c = new pg.Client({ connectionString: url, types: INT8 });
    await c.connect();
    try {
      await c.query('ALTER TABLE audit_events DISABLE TRIGGER audit_no_update');
      await fn(async (sql, params = []) => (await c.query<Row>(sql, params)).rows);
    } finally {
      await c.end();
    }
  };
  /** Tampers with a copy and checks: exit 1, the kind and first broken position, the other account untouched. */
  const caught = async (t: Test, name: string, fn: (sql: Sql) => Promise<void>, kind: string, position: number | null,
    o: { pinned?: boolean; eventAt?: number } = {}): Promise<void> => {
    const url = await copy(t);
    let eventId: string | null = null;
    await tamper(url, async (sql) => {
      await fn(sql);
      if (o.eventAt !== undefined) eventId = (await sql('SELECT * FROM audit_events WHERE account_id = $1 AND chain_position = $2', [A, o.eventAt]))[0]!.id;
    });
    const r = await verifyCli(['--database-url', url, ...(o.pinned ? ['--key-id', trail.keyId] : []), '--json'], {});
    t.equal(r.code, 1, `${name}: exit 1 (${r.stderr})`);
    const report = JSON.parse(r.stdout) as { ok: boolean; problems: { kind: string; position: number | null; accountId: string; eventId: string | null }[] };
    t.equal(report.ok, false);
    t.same(report.problems.map((p) => [p.accountId, p.kind, p.position]), [[A, kind, position]], `${name}: ${kind} at ${position}, the other account untouched`);
    if (eventId !== null) t.equal(report.problems[0]!.eventId, eventId, `${name}: the broken row's event id`);
  };
  const edit = async (sql: Sql): Promise<void> => { await sql("UPDATE audit_events SET details = '{\"decision\":\"deny\"}' WHERE account_id = $1 AND chain_position = 3", [A]); };

  await t.test('the untouched trail verifies: --database-url, SIDECAR_DATABASE_URL, a pinned key', async (t) => {
    const r = await verifyCli(['--database-url', trailUrl], {});
    t.equal(r.code, 0, r.stdout + r.stderr);
    t.match(r.stdout, /result: verified: 24 row\(s\) in 2 account\(s\); 4 row\(s\) after the last checkpoint/);
    t.match(r.stdout, /taken from the trail itself; pin with --key-id/);
    t.notMatch(r.stdout, /pw-[0-9a-f]{12}/, 'the password is not shown');
    t.match(r.stdout, /audit verify: postgres:\/\/authz:\*\*\*@127\.0\.0\.1:\d+\/trail/, 'the source, its password masked');
    const env = await verifyCli(['--key-id', trail.keyId], { SIDECAR_DATABASE_URL: trailUrl, SIDECAR_DATA_DIR: dir });
    t.equal(env.code, 0, 'no source flag: SIDECAR_DATABASE_URL, as the sidecar would use it');
    t.match(env.stdout, new RegExp(`trusted keys \\(pinned\\): ${trail.keyId}`));
    t.match(env.stdout, /ok, rows 1–12 \(12\), 2 checkpoint\(s\), signed up to 10/);
    const bare = new URL(trailUrl);
    process.env.PGPASSWORD = decodeURIComponent(bare.password);
    bare.password = '';
    try {
      t.equal((await verifyCli(['--database-url', bare.toString()], {})).code, 0, 'the password from PGPASSWORD, not the command line');
    } finally {
      delete process.env.PGPASSWORD;
    }
    const file = await verifyCli(['--db', path.join(dir, 'none.sqlite')], { SIDECAR_DATABASE_URL: trailUrl });
    t.equal(file.code, 3, '--db still reads a SQLite file when SIDECAR_DATABASE_URL is set');
  });

  await t.test('a role that may only read the four audit tables is enough', async (t) => {
    await pgc.admin("CREATE ROLE auditor LOGIN PASSWORD 'auditor-pw'");
    await pgc.admin('GRANT SELECT ON audit_events, audit_chain_heads, audit_checkpoints, service_keys TO auditor', [], 'trail');
    const url = new URL(trailUrl);
    url.username = 'auditor';
    url.password = 'auditor-pw';
    const r = await verifyCli(['--database-url', url.toString(), '--json'], {});
    t.equal(r.code, 0, r.stderr);
    t.match(JSON.parse(r.stdout), { ok: true, rows: 24, source: /^postgres:\/\/auditor:\*\*\*@/ });
  });

  await t.test('edits', async (t) => {
    await caught(t, 'a changed row', edit, 'row_changed', 3, { eventAt: 3 });
    await caught(t, 'a changed row with its hash recomputed', async (sql) => {
      await edit(sql);
      const r = (await rowsOf(sql, A))[2]!;
      await sql('UPDATE audit_events SET hash = $1 WHERE seq = $2', [hashOf(r), r.seq]);
    }, 'link_broken', 4, { eventAt: 4 });
    await caught(t, 'a changed row with the whole chain after it rewritten', async (sql) => { await edit(sql); await relink(sql, A, 3); }, 'checkpoint_mismatch', 5);
    await caught(t, 'a changed time', async (sql) => {
      await sql('UPDATE audit_events SET created_at = created_at + 1 WHERE account_id = $1 AND chain_position = 8', [A]);
    }, 'row_changed', 8, { eventAt: 8 });
  });

  await t.test('deletions', async (t) => {
    await caught(t, 'a row in the middle', (sql) => sql('DELETE FROM audit_events WHERE account_id = $1 AND chain_position = 7', [A]).then(() => undefined), 'rows_missing', 7);
    await caught(t, 'a row in the middle, the chain relinked and renumbered', async (sql) => {
      await sql('DELETE FROM audit_events WHERE account_id = $1 AND chain_position = 2', [A]);
      await sql('UPDATE audit_events SET chain_position = -chain_position WHERE account_id = $1 AND chain_position > 2', [A]);
      await sql('UPDATE audit_events SET chain_position = -chain_position - 1 WHERE account_id = $1 AND chain_position < 0', [A]);
      await relink(sql, A, 2);
    }, 'checkpoint_mismatch', 5);
    await caught(t, 'the first rows', (sql) => sql('DELETE FROM audit_events WHERE account_id = $1 AND chain_position <= 2', [A]).then(() => undefined), 'unanchored_start', 1);
    await caught(t, 'the last rows (the head left)', async (sql) => {
      await sql('DELETE FROM audit_events WHERE account_id = $1 AND chain_position >= 11', [A]);
    }, 'head_mismatch', 11);
    await caught(t, 'the last rows and the head moved back', async (sql) => {
      await sql('DELETE FROM audit_events WHERE account_id = $1 AND chain_position >= 9', [A]);
      const last = (await rowsOf(sql, A)).at(-1)!;
      await sql('UPDATE audit_chain_heads SET position = $1, hash = $2 WHERE account_id = $3', [last.chain_position, last.hash, A]);
    }, 'rows_missing', 9);
  });

  await t.test('insertions and reordering', async (t) => {
    const insertAt = async (sql: Sql, pos: number): Promise<void> => {
      await sql('UPDATE audit_events SET chain_position = -chain_position WHERE account_id = $1 AND chain_position >= $2', [A, pos]);
      await sql('UPDATE audit_events SET chain_position = 1 - chain_position WHERE account_id = $1 AND chain_position < 0', [A]);
      const before = (await rowsOf(sql, A))[pos - 2]!;
      const details = '{"decision":"allow","decision_reason":"delegation_valid"}';
      const forged: Row = { ...before, id: randomUUID(), details, chain_position: pos, prev_hash: before.hash, hash: '' };
      forged.hash = hashOf(forged);
      await sql(`INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at, chain_position, prev_hash, hash)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, [forged.id, A, forged.event_type, forged.connection_id, forged.agent_id, forged.cert_id,
        forged.required_scope, forged.details, forged.created_at, pos, forged.prev_hash, forged.hash]);
    };
    await caught(t, 'a correctly linked row inserted in the middle', (sql) => insertAt(sql, 6), 'link_broken', 7, { eventAt: 7 });
    await caught(t, 'an inserted row, the chain relinked', async (sql) => { await insertAt(sql, 6); await relink(sql, A, 7); }, 'checkpoint_mismatch', 10);
    await caught(t, 'a row without chain fields', async (sql) => {
      const r = (await rowsOf(sql, A))[0]!;
      await sql('INSERT INTO audit_events (id, account_id, event_type, details, created_at) VALUES ($1, $2, $3, $4, $5)', [randomUUID(), A, r.event_type, r.details, r.created_at]);
    }, 'unchained_row', null);
    await caught(t, 'a second row at one position (the unique index dropped)', async (sql) => {
      await sql('DROP INDEX audit_chain');
      const r = (await rowsOf(sql, A))[5]!;
      await sql(`INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at, chain_position, prev_hash, hash)
        SELECT $1, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at, chain_position, prev_hash, hash
          FROM audit_events WHERE seq = $2`, [randomUUID(), r.seq]);
    }, 'out_of_order', 6);
    await caught(t, 'two rows swapped', async (sql) => {
      await sql('UPDATE audit_events SET chain_position = -1 WHERE account_id = $1 AND chain_position = 3', [A]);
      await sql('UPDATE audit_events SET chain_position = 3 WHERE account_id = $1 AND chain_position = 4', [A]);
      await sql('UPDATE audit_events SET chain_position = 4 WHERE account_id = $1 AND chain_position = -1', [A]);
    }, 'link_broken', 3);
  });

  await t.test('forged checkpoints', async (t) => {
    await caught(t, 'a checkpoint naming another head', async (sql) => {
      const other = (await rowsOf(sql, A))[3]!.hash;
      await sql('UPDATE audit_checkpoints SET head = $1 WHERE account_id = $2 AND position = 5', [other, A]);
    }, 'checkpoint_forged', 5);
    await caught(t, 'a checkpoint with a changed signature', async (sql) => {
      const [cp] = await sql('SELECT signature FROM audit_checkpoints WHERE account_id = $1 AND position = 10', [A]);
      const s = JSON.parse(cp!.signature!) as { ed25519: string; ml_dsa_65: string };
      s.ml_dsa_65 = (s.ml_dsa_65[0] === 'A' ? 'B' : 'A') + s.ml_dsa_65.slice(1);
      await sql('UPDATE audit_checkpoints SET signature = $1 WHERE account_id = $2 AND position = 10', [JSON.stringify(s), A]);
    }, 'checkpoint_forged', 10);
    const stranger = await signerOf(path.join(dir, 'stranger.sqlite'), new Uint8Array(32).fill(7));
    const resign = async (sql: Sql): Promise<void> => {
      await edit(sql);
      await relink(sql, A, 3);
      await sql("INSERT INTO service_keys (id, purpose, public_key, secret_enc, created_at) VALUES ($1, 'attacker', $2, '\\x00', 0)",
        [stranger.keyId, JSON.stringify(stranger.publicKey)]);
      await sql('DELETE FROM audit_checkpoints WHERE account_id = $1', [A]);
      for (const r of (await rowsOf(sql, A)).filter((x) => x.chain_position % 5 === 0)) {
        const c = stranger.sign(A, r.chain_position, r.hash, 'periodic', 1);
        await sql('INSERT INTO audit_checkpoints (id, account_id, position, head, kind, key_id, signature, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
          [c.id, A, c.position, c.head, c.kind, c.keyId, JSON.stringify(c.signature), c.createdAt]);
      }
    };
    const url = await copy(t);
    await tamper(url, resign);
    const unpinned = await verifyCli(['--database-url', url], {});
    t.equal(unpinned.code, 0, 'without a pinned key the rewrite looks consistent: why --key-id matters');
    t.match(unpinned.stdout, new RegExp(stranger.keyId));
    await caught(t, 'a rewrite re-signed with another key, the real key pinned', resign, 'checkpoint_unknown_key', 5, { pinned: true });
    t.equal((await verifyCli(['--database-url', trailUrl, '--json'], {})).code, 0, 'the original is untouched by all of this');
  });

  await t.test('usage and unreadable databases: exit 2 and 3, the password never shown', async (t) => {
    t.equal((await verifyCli(['--database-url'], {})).code, 2, 'a flag without its value');
    const both = await verifyCli(['--database-url', trailUrl, '--db', 'x'], {});
    t.equal(both.code, 2);
    t.match(both.stderr, /--db, --database-url and --export exclude each other/);
    const scheme = await verifyCli(['--database-url', 'mysql://h/db'], {});
    t.equal(scheme.code, 2);
    t.match(scheme.stderr, /--database-url: scheme must be postgres/);
    const wrong = new URL(trailUrl);
    wrong.password = 'not-the-password';
    const denied = await verifyCli(['--database-url', wrong.toString()], {});
    t.equal(denied.code, 3, 'authentication fails');
    t.match(denied.stderr, /cannot connect: .*password authentication failed/);
    t.notMatch(denied.stderr, /not-the-password/, 'the password is masked');
    const closed = new URL(trailUrl);
    closed.port = '1';
    t.equal((await verifyCli(['--database-url', closed.toString()], { SIDECAR_DATABASE_CONNECT_TIMEOUT_MS: '2000' })).code, 3, 'nothing listens');
    const empty = await verifyCli(['--database-url', await pgc.createDatabase()], {});
    t.equal(empty.code, 3, 'a database without the sidecar\'s tables');
    t.match(empty.stderr, /no audit chain in this database/);
  });

  await t.test('the command as a process: SIDECAR_DATABASE_URL, exit codes', async (t) => {
    const run = (args: string[], env: Record<string, string>): Promise<Ran> =>
      runNode([SIDECAR_MAIN, 'audit', 'verify', ...args], { cwd: REPO, env });
    // The copy first (CREATE DATABASE … TEMPLATE waits while a session is on the trail), then the two processes at
    // once: a process start is most of each run's time.
    const bad = await copy(t);
    await tamper(bad, async (sql) => { await sql('DELETE FROM audit_events WHERE chain_position = 4'); });
    const [ok, broken] = await Promise.all([
      run(['--key-id', trail.keyId], { SIDECAR_DATABASE_URL: trailUrl }),
      run(['--database-url', bad], {}),
    ]);
    t.equal(ok.code, 0, ok.stderr);
    t.match(ok.stdout, /result: verified: 24 row/);
    t.equal(broken.code, 1, broken.stderr);
    for (const x of [A, B]) t.match(broken.stdout, new RegExp(`account ${x}: BROKEN at position 4: rows_missing`), 'each account lost its row 4');
    t.match(broken.stdout, /result: BROKEN: 2 of 2 account\(s\)/);
  });
}
