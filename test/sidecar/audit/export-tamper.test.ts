/**
 * The offline verifier against tampering with an account's EXPORT file
 * (NDJSON from the real export endpoint of a real sidecar), as someone who
 * holds the file would tamper with it: deleted event lines (middle, first,
 * last, and a deletion with the rest renumbered and relinked), inserted lines
 * (a forged row linked in, a repeated line), reordered lines (moved, and
 * swapped with their positions kept), and forged checkpoints (another head, a
 * changed signature, a stranger's key). The trailer counts are fixed up every
 * time, as an attacker would (else the file is refused as unreadable, exit 3).
 * Every case must exit 1 and name the problem kind and the first broken
 * position. Then the command as a user runs it: `node bin/agent-authz-sidecar.mjs
 * audit verify` (the compiled bin, dist/ built by `npm run build` / pretest).
 */
import t from 'tap';
import type { Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../../sidecar/config/index.js';
import { parseEventLine } from '../../../sidecar/audit/format.js';
import { rowHash } from '../../../src/audit-chain.js';
import { present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import { signerOf, verifyCli } from './helpers.js';

type Line = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const REPO = path.resolve(import.meta.dirname, '../../..');

let sc: TestSidecar;
let text: string;
let keyId: string;
let dir: string;

t.before(async () => {
  // Checkpoints every 4 rows, signed by the real job (run after each decision), plus the one the export makes.
  sc = await startSidecar({ audit: { ...loadConfig({}).audit, checkpointRows: 4 } });
  dir = sc.dataDir;
  keyId = sc.app.ctx.audit.signer.keyId;
  const f = await specFlow(sc, 'export-tamper@example.com', { approve: ['data:read'] });
  for (let i = 0; i < 7; i++) {
    const r = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: i % 3 === 2 ? 'data:write' : 'data:read' });
    if (r.status !== 200) throw new Error(`verify: ${r.status} ${r.text}`);
    sc.clock.advance(1000);
    await sc.app.ctx.audit.checkpoints.runOnce();
  }
  const r = await f.user.get('/v1/service/audit/personal/export');
  if (r.status !== 200) throw new Error(`export: ${r.status} ${r.text}`);
  text = r.text;
});
t.teardown(() => sc?.close());

/** The export split into its parts (fresh copies). */
function parts(): { header: Line; cps: Line[]; events: Line[] } {
  const lines = text.trim().split('\n').map((l) => JSON.parse(l) as Line);
  return { header: lines[0]!, cps: lines.filter((l) => l.type === 'audit.checkpoint'), events: lines.filter((l) => l.type === 'audit.event') };
}

/** Writes header, checkpoints, events and a trailer with matching counts. */
function write(name: string, p: { header: Line; cps: Line[]; events: Line[] }): string {
  const file = path.join(dir, `${name.replace(/\W+/g, '-')}.ndjson`);
  const all = [p.header, ...p.cps, ...p.events, { type: 'audit.export.end', events: p.events.length, checkpoints: p.cps.length }];
  fs.writeFileSync(file, all.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return file;
}

/** The hash of an event line as it stands. */
const hashOf = (e: Line): string => rowHash(parseEventLine(e)!);

/** Renumbers from index `i` on (positions follow the line order) and relinks every hash after it, as an attacker who knows the rule would. */
function relink(events: Line[], i: number): void {
  for (let j = i; j < events.length; j++) {
    const e = events[j]!;
    e.position = j === 0 ? 1 : events[j - 1]!.position + 1;
    if (j > 0) e.prev_hash = events[j - 1]!.hash;
    e.hash = hashOf(e);
  }
}

/** Tampers a copy of the export; `audit verify --export --json` (key pinned) must exit 1 with `kind` at `position`. */
async function caught(t: Test, name: string, fn: (p: ReturnType<typeof parts>) => void, kind: string, position: number | null, args: string[] = ['--key-id', keyId]): Promise<void> {
  const p = parts();
  fn(p);
  const r = await verifyCli(['--export', write(name, p), ...args, '--json']);
  t.equal(r.code, 1, `${name}: exit 1 (${r.stderr.trim()})`);
  const report = r.stdout ? JSON.parse(r.stdout) as { ok: boolean; problems: { kind: string; position: number | null }[] } : { ok: true, problems: [] };
  t.same(report.problems.map((x) => [x.kind, x.position]), [[kind, position]], `${name}: ${kind} at ${position}`);
}

t.test('the untouched export verifies; its layout is what the cases rely on', async (t) => {
  const p = parts();
  t.same(p.events.map((e) => e.position), p.events.map((_, i) => i + 1), 'positions 1..n in line order');
  t.ok(p.events.length >= 12, `${p.events.length} events`);
  const cpAt = p.cps.map((c) => c.position as number);
  t.ok(cpAt.some((c) => c >= 4 && c < p.events.length - 2), `a checkpoint mid-chain (${cpAt.join(', ')})`);
  t.equal(cpAt.at(-1), p.events.length, 'a checkpoint covers the last event');
  const r = await verifyCli(['--export', write('untouched', p), '--key-id', keyId]);
  t.equal(r.code, 0, r.stdout + r.stderr);
});

t.test('deletions', async (t) => {
  const { events, cps } = parts();
  const n = events.length;
  const firstCp = Math.min(...cps.map((c) => c.position as number));
  const m = firstCp + 1; // a row that no checkpoint names
  await caught(t, 'a row in the middle', (p) => { p.events.splice(m - 1, 1); }, 'rows_missing', m);
  await caught(t, 'a row in the middle, the rest renumbered and relinked', (p) => { p.events.splice(1, 1); relink(p.events, 1); }, 'checkpoint_mismatch', firstCp);
  await caught(t, 'the last row (a checkpoint covers it)', (p) => { p.events.pop(); }, 'rows_missing', n);
  await caught(t, 'the first row', (p) => { p.events.shift(); }, 'rows_missing', 1);
  await caught(t, 'the last row and the checkpoint that covers it', (p) => {
    p.events.pop();
    p.cps = p.cps.filter((c) => c.position !== n);
  }, 'rows_missing', n);
  await caught(t, 'every event line', (p) => { p.events = []; p.cps = []; }, 'rows_missing', 1);
  // The header is not signed: cutting the first rows AND rewriting the header's range is not
  // found in the file alone (docs/audit.md says so); the positions still show the cut.
  const p = parts();
  p.events.splice(0, 2);
  p.header.first_position = 3;
  t.equal((await verifyCli(['--export', write('header-rewritten', p), '--key-id', keyId])).code, 0, 'a cut start with a rewritten header verifies: the header is unsigned');
  const q = parts();
  q.header.first_position = 'one';
  t.equal((await verifyCli(['--export', write('header-malformed', q)])).code, 3, 'a header without a valid range is not an export');
});

t.test('insertions and reordering', async (t) => {
  const { cps } = parts();
  const firstCp = Math.min(...cps.map((c) => c.position as number));
  const m = firstCp + 2;
  await caught(t, 'a forged row linked to its predecessor, the rest renumbered', (p) => {
    const before = p.events[m - 2]!;
    const forged: Line = { ...before, event_id: randomUUID(), details: { ...before.details, decision: 'allow', decision_reason: 'authorized' }, position: m, prev_hash: before.hash };
    forged.hash = hashOf(forged);
    p.events.splice(m - 1, 0, forged);
    for (let j = m; j < p.events.length; j++) p.events[j]!.position += 1;
  }, 'link_broken', m + 1);
  await caught(t, 'an event line repeated', (p) => { p.events.splice(m, 0, { ...p.events[m - 1]! }); }, 'out_of_order', m);
  await caught(t, 'two lines swapped, positions as written', (p) => {
    const [a, b] = [p.events[m - 1]!, p.events[m]!];
    p.events[m - 1] = b;
    p.events[m] = a;
  }, 'rows_missing', m);
  await caught(t, 'two rows swapped, positions renumbered in line order', (p) => {
    const [a, b] = [p.events[m - 1]!, p.events[m]!];
    p.events[m - 1] = { ...b, position: m };
    p.events[m] = { ...a, position: m + 1 };
  }, 'link_broken', m);
  await caught(t, 'a line moved to the end', (p) => { p.events.push(...p.events.splice(m - 1, 1)); }, 'rows_missing', m);
});

t.test('forged checkpoints', async (t) => {
  const { cps, events } = parts();
  const c = cps[0]!.position as number;
  await caught(t, 'a checkpoint naming another head', (p) => { p.cps[0]!.head = events[c - 2]!.hash; }, 'checkpoint_forged', c);
  await caught(t, 'a checkpoint with a changed signature', (p) => {
    const s = p.cps[0]!.signature as { ed25519: string };
    s.ed25519 = (s.ed25519[0] === 'A' ? 'B' : 'A') + s.ed25519.slice(1);
  }, 'checkpoint_forged', c);
  await caught(t, 'a checkpoint moved to another position', (p) => { p.cps[0]!.position = c + 1; p.cps[0]!.head = events[c]!.hash; }, 'checkpoint_forged', c + 1);

  // A rewrite re-signed with the attacker's own key, the key added to the header.
  const stranger = await signerOf(path.join(dir, 'stranger.sqlite'), new Uint8Array(32).fill(9));
  const resign = (p: ReturnType<typeof parts>): void => {
    p.events[2]!.details = { ...p.events[2]!.details, decision: 'allow' };
    relink(p.events, 2);
    p.header.service_keys = [...p.header.service_keys, { key_id: stranger.keyId, purpose: 'audit-checkpoint', public_key: stranger.publicKey }];
    p.cps = p.cps.map((x) => {
      const e = p.events[(x.position as number) - 1]!;
      const s = stranger.sign(x.account_id as string, e.position as number, e.hash as string, 'periodic', Date.parse(x.created_at as string));
      return { ...x, checkpoint_id: s.id, head: s.head, key_id: s.keyId, signature: s.signature };
    });
  };
  const p = parts();
  resign(p);
  const unpinned = await verifyCli(['--export', write('resigned', p)]);
  t.equal(unpinned.code, 0, 'unpinned, the re-signed rewrite looks consistent: why --key-id matters');
  await caught(t, 'a rewrite re-signed with a stranger key, the real key pinned', resign, 'checkpoint_unknown_key', c);
});

/** Runs the compiled command line as a user would. */
function bin(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/agent-authz-sidecar.mjs', ...args], { cwd: REPO, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000); // hang guard (files run in parallel)
    child.once('error', reject);
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

t.test('node bin/agent-authz-sidecar.mjs audit verify (the compiled bin)', async (t) => {
  t.ok(fs.existsSync(path.join(REPO, 'dist/sidecar/audit/verify-command.js')), 'dist/ is built (npm run build)');
  const good = write('bin-good', parts());
  const p = parts();
  p.events.splice(4, 1);
  const bad = write('bin-bad', p);
  const q = parts();
  q.events.shift();
  const cutFile = write('bin-cut', q);
  // The six runs at once: each is a process of its own, and its start (node and the compiled sidecar's
  // modules) is most of its time; one after another they took about 11 s of this file's 20.
  const [ok, broken, json, cut, usage, missing] = await Promise.all([
    bin(['audit', 'verify', '--export', good, '--key-id', keyId]),
    bin(['audit', 'verify', '--export', bad, '--key-id', keyId]),
    bin(['audit', 'verify', '--export', bad, '--json']),
    bin(['audit', 'verify', '--export', cutFile, '--key-id', keyId]),
    bin(['audit', 'verify', '--export']),
    bin(['audit', 'verify', '--export', path.join(dir, 'missing.ndjson')]),
  ]);
  t.equal(ok.code, 0, ok.stdout + ok.stderr);
  t.match(ok.stdout, new RegExp(`trusted keys \\(pinned\\): ${keyId}`));
  t.match(ok.stdout, /result: verified: \d+ row\(s\) in 1 account\(s\)/);
  t.equal(broken.code, 1);
  t.match(broken.stdout, /BROKEN at position 5: rows_missing: rows 5–5 are missing/);
  t.equal(json.code, 1);
  t.match(JSON.parse(json.stdout), { ok: false, problems: [{ kind: 'rows_missing', position: 5 }] });
  t.equal(cut.code, 1, 'the first row cut: broken');
  t.match(cut.stdout, /BROKEN at position 1: rows_missing: the export announces events from position 1, but its first event line is at 2/);
  t.equal(usage.code, 2, 'usage error');
  t.match(usage.stderr, /--export needs a value/);
  t.equal(missing.code, 3, 'unreadable input');
});
