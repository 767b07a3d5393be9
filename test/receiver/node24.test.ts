/**
 * The receiver as a real process on Node 24 (the `node@24` devDependency's binary, running the receiver
 * compiled from the current sources under plain node, with
 * better-sqlite3 built for its ABI into `.cache/node24-sqlite/`, as the sidecar's Node 24
 * test does), with each kind of dedup store: memory, SQLite, and a custom DedupStore.
 *
 * Each run: deliveries over real HTTP are accepted once (204, handler once, the duplicate
 * 204 without it), then SIGTERM; the process must exit 0 with no native abort. better-sqlite3
 * 12 built against Node >= 24.19 headers aborts (`Assertion failed: (env) != nullptr` in
 * `Statement::~Statement`) when the garbage collector frees one of its objects outside a
 * JavaScript context, as at exit: the SQLite store must never let one become garbage. Several
 * runs per store, closing the app, and exiting without closing anything.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { ensureNode24SqliteBinding, NODE24, NODE24_SQLITE_PRELOAD } from '../shared/node24.js';
import { SECRET, signed, tempDir } from './helpers.js';
import { compiledSidecarMain } from '../helpers/compiled-sidecar.js';

// The first run builds better-sqlite3 for Node 24 (a few minutes on two cores).
t.setTimeout(15 * 60_000);
ensureNode24SqliteBinding((s) => t.comment(s), { quiet: true });

const ROOT = resolve(import.meta.dirname, '../..');
const FIXTURE = join(import.meta.dirname, 'fixtures/app.mjs');
/** The receiver compiled from the current sources (the fixture's RECEIVER_MODULES): plain node, no tsx. */
const RECEIVER_MODULES = join(dirname(dirname(await compiledSidecarMain())), 'receiver');
/** Runs per store and exit mode: the abort came in 5 of 12 runs before the fix. */
const RUNS = 3;

interface Run { code: number | null; signal: NodeJS.Signals | null; out: string; events: string[]; statuses: number[] }

/** One receiver process: two deliveries and a duplicate, then SIGTERM; at most 30 s. */
async function runOnce(store: string, exit: 'close' | 'exit', file: string): Promise<Run> {
  const child = spawn(NODE24, ['--import', NODE24_SQLITE_PRELOAD, FIXTURE], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', RECEIVER_STORE: store, RECEIVER_EXIT: exit, RECEIVER_FILE: file, RECEIVER_SECRET: SECRET,
      RECEIVER_MODULES,
    },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((done) => child.once('exit', (code, signal) => done([code, signal])));
  const killer = setTimeout(() => child.kill('SIGKILL'), 90_000); // hang guard (files run in parallel)
  try {
    let port: number | undefined;
    for (let i = 0; i < 300 && port === undefined && child.exitCode === null; i++) {
      port = Number(/listening (\d+)/.exec(out)?.[1]) || undefined;
      if (port === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    const statuses: number[] = [];
    if (port !== undefined) {
      const a = signed();
      for (const d of [a, signed(), signed({ id: a.id, event: JSON.parse(a.rawBody.toString()) as Record<string, unknown> })]) {
        const res = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers: d.headers, body: d.rawBody });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    }
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    return { code, signal, out, events: [...out.matchAll(/^event (\S+)$/gm)].map((m) => m[1]!), statuses };
  } finally {
    clearTimeout(killer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

for (const store of ['sqlite', 'memory', 'custom']) {
  t.test(`Node 24, ${store} dedup store: clean exits, no native abort`, async (t) => {
    const dir = tempDir(t);
    let aborts = 0;
    for (const exit of ['close', 'exit'] as const) {
      for (let i = 0; i < RUNS; i++) {
        const r = await runOnce(store, exit, join(dir, `dedup-${exit}-${i}.db`));
        const name = `${exit} run ${i + 1}`;
        t.same(r.statuses, [204, 204, 204], `${name}: two deliveries and a duplicate, all 204`);
        t.equal(r.events.length, 2, `${name}: the handler ran once per delivery`);
        if (exit === 'close') t.match(r.out, /^closed$/m, `${name}: the app (and the receiver) closed`);
        if (/Assertion failed|Aborted|core dumped/.test(r.out) || r.signal !== null) aborts++;
        t.equal(r.signal, null, `${name}: no signal`);
        t.equal(r.code, 0, `${name}: exit 0${r.code === 0 ? '' : `\n${r.out.slice(-2000)}`}`);
      }
    }
    t.equal(aborts, 0, `0 aborts in ${2 * RUNS} runs`);
  });
}
