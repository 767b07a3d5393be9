/**
 * The offline verifier against tampering done directly in the SQLite file, as
 * someone with write access to it would: a changed row (with and without fixing
 * its hash, and with the whole chain after it rewritten), deleted rows (middle,
 * start, end), inserted rows, reordered rows, and forged checkpoints. Every
 * case must exit 1 and name the first broken row; the untouched trail exits 0.
 */
import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { rowHash } from '../../../src/audit-chain.js';
import { copyOf, makeTrail, signerOf, tamper, verifyCli } from './helpers.js';
import type { Trail } from './helpers.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

interface Row { seq: number; id: string; account_id: string; event_type: string; connection_id: string | null; agent_id: string | null; cert_id: string | null; required_scope: string | null; details: string; created_at: number; chain_position: number; prev_hash: string; hash: string }

const rowsOf = (db: Database.Database, accountId: string): Row[] =>
  db.prepare('SELECT * FROM audit_events WHERE account_id = ? ORDER BY chain_position').all(accountId) as Row[];
const hashOf = (r: Row): string => rowHash({
  id: r.id, accountId: r.account_id, eventType: r.event_type, connectionId: r.connection_id, agentId: r.agent_id, certId: r.cert_id,
  requiredScope: r.required_scope, details: JSON.parse(r.details) as Record<string, unknown>, createdAt: r.created_at, position: r.chain_position, prevHash: r.prev_hash,
});
/** Rewrites prev/hash of every row from `from` on and the head, as an attacker who knows the rule would. */
function relink(db: Database.Database, accountId: string, from: number): void {
  let prev: string | null = null;
  for (const r of rowsOf(db, accountId)) {
    if (r.chain_position < from) { prev = r.hash; continue; }
    const fixed: Row = { ...r, prev_hash: prev ?? r.prev_hash };
    fixed.hash = hashOf(fixed);
    db.prepare('UPDATE audit_events SET prev_hash = ?, hash = ? WHERE seq = ?').run(fixed.prev_hash, fixed.hash, r.seq);
    prev = fixed.hash;
  }
  const last = rowsOf(db, accountId).at(-1)!;
  db.prepare('UPDATE audit_chain_heads SET position = ?, hash = ? WHERE account_id = ?').run(last.chain_position, last.hash, accountId);
}
const unlock = (db: Database.Database): void => { db.exec('DROP TRIGGER IF EXISTS audit_no_update'); };

let trail: Trail;
t.before(async () => { trail = await makeTrail(t); });

/** Tampers a copy, verifies it, and checks the exit code, the kind and the first broken position. */
async function caught(t: Test, name: string, fn: (db: Database.Database, a: string) => void, kind: string, position: number | null, pinned = false): Promise<void> {
  const file = copyOf(trail, name.replace(/\W+/g, '-'));
  tamper(file, (db) => { unlock(db); fn(db, trail.accounts[0]!.accountId); });
  const r = await verifyCli(['--db', file, ...(pinned ? ['--key-id', trail.keyId] : []), '--json']);
  t.equal(r.code, 1, `${name}: exit 1`);
  const report = JSON.parse(r.stdout) as { ok: boolean; problems: { kind: string; position: number | null; accountId: string }[] };
  t.equal(report.ok, false);
  t.same(report.problems.map((p) => [p.accountId, p.kind, p.position]), [[trail.accounts[0]!.accountId, kind, position]], `${name}: ${kind} at ${position}, the other account untouched`);
}

t.test('the untouched trail verifies, with and without a pinned key', async (t) => {
  const r = await verifyCli(['--db', trail.file]);
  t.equal(r.code, 0, r.stdout + r.stderr);
  t.match(r.stdout, /result: verified: 24 row\(s\) in 2 account\(s\); 4 row\(s\) after the last checkpoint/);
  t.match(r.stdout, /taken from the trail itself; pin with --key-id/);
  const pinned = await verifyCli(['--db', trail.file, '--key-id', trail.keyId]);
  t.equal(pinned.code, 0);
  t.match(pinned.stdout, new RegExp(`trusted keys \\(pinned\\): ${trail.keyId}`));
  t.match(pinned.stdout, /ok, rows 1–12 \(12\), 2 checkpoint\(s\), signed up to 10/);
});

t.test('edits', async (t) => {
  const edit = (db: Database.Database, a: string): void => {
    db.prepare("UPDATE audit_events SET details = '{\"decision\":\"deny\"}' WHERE account_id = ? AND chain_position = 3").run(a);
  };
  await caught(t, 'a changed row', edit, 'row_changed', 3);
  await caught(t, 'a changed row with its hash recomputed', (db, a) => {
    edit(db, a);
    const r = rowsOf(db, a)[2]!;
    db.prepare('UPDATE audit_events SET hash = ? WHERE seq = ?').run(hashOf(r), r.seq);
  }, 'link_broken', 4);
  await caught(t, 'a changed row with the whole chain after it rewritten', (db, a) => { edit(db, a); relink(db, a, 3); }, 'checkpoint_mismatch', 5);
  await caught(t, 'a changed time', (db, a) => { db.prepare('UPDATE audit_events SET created_at = created_at + 1 WHERE account_id = ? AND chain_position = 8').run(a); }, 'row_changed', 8);
});

t.test('deletions', async (t) => {
  await caught(t, 'a row in the middle', (db, a) => { db.prepare('DELETE FROM audit_events WHERE account_id = ? AND chain_position = 7').run(a); }, 'rows_missing', 7);
  await caught(t, 'a row in the middle, the chain relinked and renumbered', (db, a) => {
    db.prepare('DELETE FROM audit_events WHERE account_id = ? AND chain_position = 2').run(a);
    for (let p = 3; p <= 12; p++) db.prepare('UPDATE audit_events SET chain_position = ? WHERE account_id = ? AND chain_position = ?').run(p - 1, a, p);
    relink(db, a, 2);
  }, 'checkpoint_mismatch', 5);
  await caught(t, 'the first rows', (db, a) => { db.prepare('DELETE FROM audit_events WHERE account_id = ? AND chain_position <= 2').run(a); }, 'unanchored_start', 1);
  await caught(t, 'the last rows (the head left)', (db, a) => { db.prepare('DELETE FROM audit_events WHERE account_id = ? AND chain_position >= 11').run(a); }, 'head_mismatch', 11);
  await caught(t, 'the last rows and the head moved back', (db, a) => {
    db.prepare('DELETE FROM audit_events WHERE account_id = ? AND chain_position >= 9').run(a);
    const last = rowsOf(db, a).at(-1)!;
    db.prepare('UPDATE audit_chain_heads SET position = ?, hash = ? WHERE account_id = ?').run(last.chain_position, last.hash, a);
  }, 'rows_missing', 9);
});

t.test('insertions and reordering', async (t) => {
  const insertAt = (db: Database.Database, a: string, pos: number): void => {
    for (let p = 12; p >= pos; p--) db.prepare('UPDATE audit_events SET chain_position = ? WHERE account_id = ? AND chain_position = ?').run(p + 1, a, p);
    const before = rowsOf(db, a)[pos - 2]!;
    const forged: Row = { ...before, seq: 0, id: randomUUID(), details: '{"decision":"allow","decision_reason":"delegation_valid"}', chain_position: pos, prev_hash: before.hash, hash: '' };
    forged.hash = hashOf(forged);
    db.prepare(`INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at, chain_position, prev_hash, hash)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(forged.id, a, forged.event_type, forged.connection_id, forged.agent_id, forged.cert_id, forged.required_scope,
      forged.details, forged.created_at, pos, forged.prev_hash, forged.hash);
  };
  await caught(t, 'a correctly linked row inserted in the middle', (db, a) => insertAt(db, a, 6), 'link_broken', 7);
  await caught(t, 'an inserted row, the chain relinked', (db, a) => { insertAt(db, a, 6); relink(db, a, 7); }, 'checkpoint_mismatch', 10);
  await caught(t, 'a row without chain fields', (db, a) => {
    const r = rowsOf(db, a)[0]!;
    db.prepare('INSERT INTO audit_events (id, account_id, event_type, details, created_at) VALUES (?, ?, ?, ?, ?)').run(randomUUID(), a, r.event_type, r.details, r.created_at);
  }, 'unchained_row', null);
  await caught(t, 'two rows swapped', (db, a) => {
    db.prepare('UPDATE audit_events SET chain_position = -1 WHERE account_id = ? AND chain_position = 3').run(a);
    db.prepare('UPDATE audit_events SET chain_position = 3 WHERE account_id = ? AND chain_position = 4').run(a);
    db.prepare('UPDATE audit_events SET chain_position = 4 WHERE account_id = ? AND chain_position = -1').run(a);
  }, 'link_broken', 3);
});

t.test('forged checkpoints', async (t) => {
  await caught(t, 'a checkpoint naming another head', (db, a) => {
    const other = rowsOf(db, a)[3]!.hash;
    db.prepare('UPDATE audit_checkpoints SET head = ? WHERE account_id = ? AND position = 5').run(other, a);
  }, 'checkpoint_forged', 5);
  await caught(t, 'a checkpoint with a changed signature', (db, a) => {
    const s = JSON.parse((db.prepare('SELECT signature FROM audit_checkpoints WHERE account_id = ? AND position = 10').get(a) as { signature: string }).signature) as { ed25519: string; ml_dsa_65: string };
    s.ml_dsa_65 = (s.ml_dsa_65[0] === 'A' ? 'B' : 'A') + s.ml_dsa_65.slice(1);
    db.prepare('UPDATE audit_checkpoints SET signature = ? WHERE account_id = ? AND position = 10').run(JSON.stringify(s), a);
  }, 'checkpoint_forged', 10);

  // A rewrite re-signed with the attacker's own key, stored next to the real one.
  const strangerDb = path.join(trail.dir, 'stranger.sqlite');
  const stranger = await signerOf(strangerDb, new Uint8Array(32).fill(7));
  const resign = (db: Database.Database, a: string): void => {
    db.prepare("UPDATE audit_events SET details = '{\"decision\":\"deny\"}' WHERE account_id = ? AND chain_position = 3").run(a);
    relink(db, a, 3);
    db.prepare("INSERT INTO service_keys (id, purpose, public_key, secret_enc, created_at) VALUES (?, 'attacker', ?, x'00', 0)").run(stranger.keyId, JSON.stringify(stranger.publicKey));
    db.prepare('DELETE FROM audit_checkpoints WHERE account_id = ?').run(a);
    for (const r of rowsOf(db, a).filter((x) => x.chain_position % 5 === 0)) {
      const c = stranger.sign(a, r.chain_position, r.hash, 'periodic', 1);
      db.prepare('INSERT INTO audit_checkpoints (id, account_id, position, head, kind, key_id, signature, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(c.id, a, c.position, c.head, c.kind, c.keyId, JSON.stringify(c.signature), c.createdAt);
    }
  };
  const file = copyOf(trail, 'resigned');
  tamper(file, (db) => { unlock(db); resign(db, trail.accounts[0]!.accountId); });
  const unpinned = await verifyCli(['--db', file]);
  t.equal(unpinned.code, 0, 'without a pinned key the rewrite looks consistent: why --key-id matters');
  t.match(unpinned.stdout, new RegExp(stranger.keyId));
  await caught(t, 'a rewrite re-signed with another key, the real key pinned', resign, 'checkpoint_unknown_key', 5, true);
});

t.test('usage and unreadable input', async (t) => {
  t.equal((await verifyCli(['--db'])).code, 2, 'a flag without its value');
  t.equal((await verifyCli(['--db', 'a', '--export', 'b'])).code, 2);
  t.equal((await verifyCli(['--key-id', 'nothex'])).code, 2);
  const missing = await verifyCli(['--db', path.join(trail.dir, 'missing.sqlite')]);
  t.equal(missing.code, 3);
  t.match(missing.stderr, /cannot open the database/);
  const junk = path.join(trail.dir, 'junk.sqlite');
  fs.writeFileSync(junk, 'not a database at all, just text '.repeat(200));
  t.equal((await verifyCli(['--db', junk])).code, 3, 'not a database');
  t.equal((await verifyCli(['--export', junk])).code, 3, 'not an export');
});

t.test('the command as a process: exit codes', async (t) => {
  const run = (args: string[]): Promise<{ code: number | null; stdout: string }> => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SIDECAR_MAIN, 'audit', 'verify', ...args], {
      cwd: path.resolve(import.meta.dirname, '../../..'), env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000); // hang guard (files run in parallel)
    child.once('error', reject);
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, stdout }); });
  });
  const ok = await run(['--db', trail.file, '--key-id', trail.keyId]);
  t.equal(ok.code, 0);
  t.match(ok.stdout, /result: verified/);
  const bad = copyOf(trail, 'process');
  tamper(bad, (db) => { unlock(db); db.prepare('DELETE FROM audit_events WHERE chain_position = 4').run(); });
  const broken = await run(['--db', bad]);
  t.equal(broken.code, 1);
  t.match(broken.stdout, /BROKEN at position 4: rows_missing/);
  t.equal((await run(['--nope'])).code, 2);
});
