/**
 * The sidecar as a real process on Node 24 (the `node@24` devDependency's binary, with a
 * better-sqlite3 binding built for its ABI into `.cache/node24-sqlite/` on first use, as the
 * benchmark does): the runtime of the Docker image, where ML-DSA-65 is native. The other
 * sidecar tests run on the Node that runs tap (20 here, the noble backend).
 *
 * Checked over HTTP, with the crypto workers and with `SIDECAR_CRYPTO_WORKERS=0`: the ready
 * log names the backend (`native`); the spec flow; 16 presents and their 16 verifies at once
 * all allow; a bundle with one bit of either signature half changed is 400
 * `invalid_signature` and spends its challenge; /metrics counts every sign and check on the
 * thread the setting puts it on (all on the workers, or all on the main thread); SIGTERM exits 0.
 */
import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ensureNode24SqliteBinding, NODE24, NODE24_SQLITE_PRELOAD } from '../shared/node24.js';
import { remoteSidecar, specFlow, startMailSink } from '../helpers/sidecar.js';
import type { MailSink } from '../helpers/sidecar.js';
import { freePort } from '../helpers/net.js';
import { compiledSidecarMain } from '../helpers/compiled-sidecar.js';
import { bundleFor, clone, expectDecision, expectError, flipB64, verify } from './decide/helpers.js';
import type { Bundle } from './decide/helpers.js';
import { cryptoTasks } from './ops/helpers.js';

// The first run builds better-sqlite3 for Node 24 (about a minute or two on two cores).
t.setTimeout(15 * 60_000);

const ROOT = resolve(import.meta.dirname, '../..');
ensureNode24SqliteBinding((s) => t.comment(s), { quiet: true });

interface Proc { url: string; output(): string; stop(): Promise<number | null> }

/**
 * Starts the sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts: dist/ in `npm test`, as
 * the Docker image runs it) on Node 24 with `extra` env; resolves once /readyz answers 200 (at most 30 s).
 */
async function startNode24Sidecar(dir: string, mail: MailSink, extra: Record<string, string> = {}): Promise<Proc> {
  const port = await freePort();
  // better-sqlite3 from its Node 24 build: a test-only preload, not a sidecar setting.
  const child = spawn(NODE24, ['--import', NODE24_SQLITE_PRELOAD, await compiledSidecarMain()], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '', SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dir,
      SIDECAR_SMTP_URL: mail.url, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'info', SIDECAR_SEND_CODE_PER_MINUTE: '100',
      ...extra,
    },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const exit = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  let exited = false;
  void exit.then(() => { exited = true; });
  const url = `http://127.0.0.1:${port}`;
  const proc: Proc = {
    url,
    output: () => out,
    async stop() {
      if (!exited) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exit;
      clearTimeout(killer);
      return code;
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`the Node 24 sidecar exited during startup:\n${out}`);
    try {
      const r = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.status === 200) return proc;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { await proc.stop(); throw new Error(`the Node 24 sidecar was not ready within 30 s:\n${out}`); }
    await new Promise((r) => setTimeout(r, 100));
  }
}


const mail = await startMailSink();
const dir = await mkdtemp(join(tmpdir(), 'node24-sidecar-'));
t.teardown(async () => {
  await mail.close();
  await rm(dir, { recursive: true, force: true });
});

/**
 * Presents made and signatures checked by {@link exercise}: 16 allowed, and one for each altered
 * half (the replay of a refused bundle stops at its spent challenge, before any check).
 */
const SIGNATURES = 18;

/** The flow, 16 concurrent presents and verifies, the two altered halves, the replay. */
async function exercise(t: Test, url: string, email: string): Promise<void> {
  const f = await specFlow(remoteSidecar(url, mail), email, { scopes: ['data:read'], approve: ['data:read'] });
  const bundles = await Promise.all(Array.from({ length: 16 }, () => bundleFor(f)));
  const rs = await Promise.all(bundles.map((b) => verify(f.platform, b, 'data:read')));
  rs.forEach((r, i) => expectDecision(t, r, 'allow', 'authorized', undefined, `verify ${i}`));
  const ed: Bundle = clone(await bundleFor(f));
  ed.sig.ed25519 = flipB64(ed.sig.ed25519 as string);
  expectError(t, await verify(f.platform, ed, 'data:read'), 400, 'invalid_signature', 'Ed25519 half altered');
  const b: Bundle = await bundleFor(f);
  const ml = clone(b);
  ml.sig.ml_dsa_65 = flipB64(ml.sig.ml_dsa_65 as string);
  expectError(t, await verify(f.platform, ml, 'data:read'), 400, 'invalid_signature', 'ML-DSA-65 half altered');
  const again = await verify(f.platform, b, 'data:read');
  t.not(again.body?.decision, 'allow', 'the challenge of a refused bundle is spent');
}

/** The fields of the ready log line. */
function readyLog(sc: Proc): Record<string, unknown> {
  const line = sc.output().split('\n').find((l) => l.includes('agent-authz sidecar ready'));
  return JSON.parse(line ?? '{}') as Record<string, unknown>;
}

// Every task is counted where the setting puts it: all on the workers, or all on the main thread.
const MODES = [
  { name: 'with the crypto workers', workers: 2, on: 'worker', off: 'main', env: { SIDECAR_CRYPTO_WORKERS: '2' } },
  { name: 'SIDECAR_CRYPTO_WORKERS=0: on the main thread', workers: 0, on: 'main', off: 'worker', env: { SIDECAR_CRYPTO_WORKERS: '0' } },
] as const;

for (const m of MODES) {
  t.test(m.name, async (t) => {
    const sc = await startNode24Sidecar(join(dir, m.on), mail, m.env);
    t.teardown(() => sc.stop());
    const ready = readyLog(sc);
    t.equal(ready.mldsa_backend, 'native', 'ready log: native ML-DSA-65');
    t.equal(ready.crypto_workers, m.workers, `ready log: ${m.workers} crypto workers`);
    await exercise(t, sc.url, `node24-${m.on}@example.com`);
    const tasks = await cryptoTasks(sc.url);
    t.equal(tasks[`verify:${m.on}`], SIGNATURES, `every signature check on the ${m.on} thread`);
    t.equal(tasks[`sign:${m.on}`], SIGNATURES, `every present signed on the ${m.on} thread`);
    t.equal(tasks[`verify:${m.off}`]! + tasks[`sign:${m.off}`]!, 0, `none on the ${m.off} thread`);
    t.equal(await sc.stop(), 0, 'SIGTERM: exit 0');
  });
}
