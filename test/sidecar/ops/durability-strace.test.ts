/**
 * Power-loss durability (issue 35; SIDECAR_SQLITE_SYNCHRONOUS, docs/storage.md
 * "Durability"): a real sidecar process runs under `strace -f`, and for every
 * verify it answers under load (16 at a time) the trace shows whether the
 * SQLite WAL had been synced (`fsync`/`fdatasync` of the `-wal` file) since
 * its last write when the answer's bytes were written to the socket. With
 * `full`, nothing is acknowledged before it is on disk: every answer follows
 * the sync of the WAL writes before it (0 answers ahead of their sync). With
 * `normal`, the figure is reported (answers that went out before their sync).
 * Skipped where strace is not installed.
 */
import t from 'tap';
import type { Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { present, remoteSidecar, specFlow, startMailSink } from '../../helpers/sidecar.js';
import { spawnSidecarProcess, tally } from './oversized.js';

// Two traced sidecar processes (a traced start takes long on a loaded machine).
t.setTimeout(600_000);

const STRACE = '/usr/bin/strace';
const VERIFIES = 96;

/** Whether strace can trace here (installed, and ptrace allowed). */
function straceWorks(): boolean {
  return fs.existsSync(STRACE) && spawnSync(STRACE, ['-f', '-o', '/dev/null', 'true']).status === 0;
}

/**
 * What the trace says about the verify answers: how many, and how many were written while the WAL had unsynced
 * writes. `mainPid` is the sidecar's pid (its main thread's id in the trace); by default the first line's.
 */
export function answersBeforeSync(trace: string, mainPid?: number):
{ answers: number; beforeSync: number; walSyncs: number; walWrites: number } {
  const lines = trace.split('\n');
  // Not always the first line's: a thread of the compiled sidecar can write before the main thread does.
  const main = mainPid !== undefined ? String(mainPid) : /^(\d+) /.exec(lines[0] ?? '')?.[1];
  let dirty = false;
  let answers = 0;
  let beforeSync = 0;
  let walSyncs = 0;
  let walWrites = 0;
  for (const line of lines) {
    // Only the main thread: SQLite (better-sqlite3) and the sockets' writes both run on it, in order.
    if (main === undefined || !line.startsWith(`${main} `)) continue;
    // strace pads the pid column to 5 characters: "8056  1795…" has two spaces, "12345 1795…" one.
    const call = /^\d+ +[\d.]+ (\w+)\((\d+)<([^>]*)>/.exec(line);
    if (call === null) continue;
    const [, name, , target] = call as unknown as [string, string, string, string];
    if (target.endsWith('-wal')) {
      if (name === 'pwrite64' || name === 'write' || name === 'pwritev' || name === 'writev') { dirty = true; walWrites++; }
      if (name === 'fsync' || name === 'fdatasync') { dirty = false; walSyncs++; }
    } else if (target.startsWith('TCP:') && (name === 'write' || name === 'writev') && line.includes('HTTP/1.1 200') && line.includes('\\"decision\\"')) {
      answers++;
      if (dirty) beforeSync++;
    }
  }
  return { answers, beforeSync, walSyncs, walWrites };
}

async function traced(t: Test, level: 'full' | 'normal'): Promise<ReturnType<typeof answersBeforeSync>> {
  const mail = await startMailSink();
  t.teardown(() => mail.close());
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'authz-strace-')), 'trace.txt');
  const wrapper = [STRACE, '-f', '--seccomp-bpf', '-yy', '-ttt', '-s', '512', '-e', 'trace=fsync,fdatasync,pwrite64,pwritev,write,writev', '-o', out];
  const sc = await spawnSidecarProcess({ SIDECAR_SMTP_URL: mail.url, SIDECAR_SQLITE_SYNCHRONOUS: level }, 150_000, wrapper);
  t.teardown(() => sc.kill());
  const f = await specFlow(remoteSidecar(sc.url, mail), `strace-${level}@example.com`, { approve: ['data:read'] });
  const bundles: unknown[] = [];
  for (let i = 0; i < VERIFIES; i++) bundles.push(await present(f));
  const counts = await tally(VERIFIES, 16, async (i) => {
    const r = await f.platform.post('/v1/service/verify', { proof_bundle: bundles[i], required_scope: 'data:read' });
    return `${r.status} ${String(r.body?.decision)}`;
  }, (k) => k);
  t.same(counts, { '200 allow': VERIFIES }, `${level}: ${VERIFIES} verifies answered allow`);
  // SIGTERM to the sidecar (strace's child): it shuts down, strace writes the rest of the trace and exits.
  const children = fs.readFileSync(`/proc/${sc.pid}/task/${sc.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
  for (const pid of children) process.kill(pid, 'SIGTERM');
  // strace writes its buffered trace when it exits: wait for that (bounded; a loaded machine drains slowly).
  // The bound's timer is cleared once strace exits: left pending, it kept the file's process alive 2 more minutes.
  let bound: NodeJS.Timeout | undefined;
  await Promise.race([sc.exited, new Promise((r) => { bound = setTimeout(r, 120_000); })]);
  clearTimeout(bound);
  const result = answersBeforeSync(fs.readFileSync(out, 'utf8'), children[0]);
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
  t.comment(`${level}: ${result.answers} verify answers, ${result.beforeSync} written before the WAL sync covering them; `
    + `WAL: ${result.walWrites} writes, ${result.walSyncs} syncs`);
  t.ok(result.answers >= VERIFIES, `${level}: every verify answer found in the trace`);
  t.ok(result.walWrites > 0, `${level}: the trace saw the WAL written`);
  return result;
}

t.test('SQLite synchronous levels under strace: answers vs the WAL sync', { skip: straceWorks() ? false : 'strace cannot trace here' }, async (t) => {
  t.setTimeout(600_000);
  const full = await traced(t, 'full');
  t.equal(full.beforeSync, 0, 'full: no verify answer was written before the WAL sync covering its commit');
  const normal = await traced(t, 'normal');
  t.ok(normal.beforeSync > 0, `normal: ${normal.beforeSync} of ${normal.answers} answers went out before their WAL sync (the figure docs/storage.md reports)`);
});

t.test('the trace parser reads pids of any width (strace pads the column to 5 characters)', async (t) => {
  for (const pid of [8056, 12345]) {
    const p = `${pid} `.padEnd(6);
    const trace = [
      `${p}1.000001 pwrite64(12</data/authz.db-wal>, "x", 1, 0) = 1`,
      `${p}1.000002 writev(38<TCP:[127.0.0.1:1->127.0.0.1:2]>, [{iov_base="HTTP/1.1 200 OK\\r\\n{\\"decision\\":\\"allow\\"}"}], 1) = 40`,
      `${p}1.000003 fdatasync(12</data/authz.db-wal>) = 0`,
      `${p}1.000004 writev(38<TCP:[127.0.0.1:1->127.0.0.1:2]>, [{iov_base="HTTP/1.1 200 OK\\r\\n{\\"decision\\":\\"allow\\"}"}], 1) = 40`,
    ].join('\n');
    t.same(answersBeforeSync(trace, pid), { answers: 2, beforeSync: 1, walSyncs: 1, walWrites: 1 }, `pid ${pid}`);
  }
});
