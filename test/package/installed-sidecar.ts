/**
 * The installed package's sidecar on each Node of the packaging test (issue 19: `engines`
 * says what is really supported, and CI tests it).
 *
 * {@link layoutSqliteBindings} lets one consumer install serve every Node: better-sqlite3
 * loads its addon through `bindings`, which looks in `build/Release/` first and then in
 * `compiled/<node version>/<platform>/<arch>/`. The test moves the machine's build there and
 * adds the builds for Node 22.12.0 (the floor) and Node 24 (test/shared/node24.ts builds them once
 * into `.cache/`), so each Node loads the addon for its own ABI without a loader hook or a
 * product setting.
 *
 * {@link startInstalledSidecar} starts `node_modules/.bin/agent-authz-sidecar` (compiled
 * JavaScript, plain `node`) with two crypto workers; {@link exerciseInstalledSidecar} runs the
 * spec flow, verifies proofs (allow), alters each signature half (400 `invalid_signature`) and
 * checks that every sign and check ran on the compiled worker (`dist/sidecar/crypto/worker.js`);
 * {@link stopInstalledSidecar} stops it with SIGTERM (exit 0).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { ensureSqliteBindingFor } from '../shared/node24.js';
import { cleanEnv, ROOT, run, startProc, waitFor } from './helpers.js';
import type { Proc } from './helpers.js';
import { freePort } from '../helpers/net.js';
import { remoteSidecar, specFlow } from '../helpers/sidecar.js';
import type { MailSink } from '../helpers/sidecar.js';
import { bundleFor, clone, expectDecision, expectError, flipB64, verify } from '../sidecar/decide/helpers.js';
import type { Bundle } from '../sidecar/decide/helpers.js';
import { cryptoTasks } from '../sidecar/ops/helpers.js';

/** A Node binary of the test. */
export interface NodeBin { name: string; bin: string }

/** The Node version a binary reports (`22.12.0`). */
async function versionOf(bin: string): Promise<string> {
  const r = await run(bin, ['-p', 'process.versions.node'], { cwd: ROOT });
  const v = r.stdout.trim();
  if (r.code !== 0 || !/^\d+\.\d+\.\d+$/.test(v)) throw new Error(`${bin} did not report its version: ${r.stderr}`);
  return v;
}

/**
 * Puts a better-sqlite3 addon for each of `nodes` under the consumer's
 * `node_modules/better-sqlite3/compiled/<version>/<platform>/<arch>/` and removes the
 * `build/Release/` copy (see the file header). Builds the missing ones (minutes, once).
 */
export async function layoutSqliteBindings(app: string, nodes: readonly NodeBin[], log: (s: string) => void): Promise<void> {
  const pkg = path.join(app, 'node_modules/better-sqlite3');
  for (const node of nodes) {
    const source = node.bin === process.execPath
      ? path.join(ROOT, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')
      : ensureSqliteBindingFor(node.bin, log, { quiet: true });
    const dir = path.join(pkg, 'compiled', await versionOf(node.bin), process.platform, process.arch);
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(source, path.join(dir, 'better_sqlite3.node'));
  }
  fs.rmSync(path.join(pkg, 'build/Release/better_sqlite3.node'), { force: true });
}


/** Proofs verified with `allow` by {@link exerciseInstalledSidecar}. */
const ALLOWED = 4;

/** A sidecar started from the consumer app's installed bin by {@link startInstalledSidecar}. */
export interface InstalledSidecar { node: NodeBin; url: string; proc: Proc }

/**
 * Starts `node_modules/.bin/agent-authz-sidecar` of the consumer app `app` on `node` with two crypto workers and
 * checks its ready line (2 workers; the native ML-DSA-65 backend from Node 24 on, noble before). `owner` stops it
 * at its end unless {@link stopInstalledSidecar} did. `dataDir` must not exist yet or be empty.
 */
export async function startInstalledSidecar(t: Test, owner: Test, node: NodeBin, app: string, dataDir: string,
  mail: MailSink): Promise<InstalledSidecar> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = startProc(node.bin, ['node_modules/.bin/agent-authz-sidecar'], {
    cwd: app,
    env: cleanEnv({
      SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir, SIDECAR_SMTP_URL: mail.url,
      SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'info', SIDECAR_CRYPTO_WORKERS: '2',
    }),
  });
  owner.teardown(async () => { await proc.stop(); });
  await waitFor(`${url}/readyz`, proc, { timeoutMs: 60_000 });
  // The ready line is logged just after the listen that /readyz answers on: wait for it (bounded).
  const readyLine = (): string | undefined => proc.output().split('\n').find((l) => l.includes('agent-authz sidecar ready'));
  for (let i = 0; i < 100 && readyLine() === undefined; i++) await new Promise((r) => setTimeout(r, 100));
  const ready = JSON.parse(readyLine() ?? '{}') as Record<string, unknown>;
  t.equal(ready.crypto_workers, 2, `${node.name}: ready with 2 crypto workers`);
  const native = Number((await versionOf(node.bin)).split('.')[0]) >= 24;
  t.equal(ready.mldsa_backend, native ? 'native' : 'noble', `${node.name}: ML-DSA-65 backend ${native ? 'native' : 'noble'}`);
  return { node, url, proc };
}

/**
 * See the file header: the spec flow, proofs verified (allow), each signature half altered (400
 * `invalid_signature`), every sign and check on the compiled worker.
 */
export async function exerciseInstalledSidecar(t: Test, sc: InstalledSidecar, mail: MailSink): Promise<void> {
  const { node, url } = sc;
  const f = await specFlow(remoteSidecar(url, mail), `installed-${new URL(url).port}@example.com`,
    { scopes: ['data:read'], approve: ['data:read'] });
  const bundles = await Promise.all(Array.from({ length: ALLOWED }, () => bundleFor(f)));
  const rs = await Promise.all(bundles.map((b) => verify(f.platform, b, 'data:read')));
  rs.forEach((r, i) => expectDecision(t, r, 'allow', 'authorized', undefined, `${node.name}: verify ${i}`));
  const ed: Bundle = clone(await bundleFor(f));
  ed.sig.ed25519 = flipB64(ed.sig.ed25519 as string);
  expectError(t, await verify(f.platform, ed, 'data:read'), 400, 'invalid_signature', `${node.name}: Ed25519 half altered`);
  const ml: Bundle = clone(await bundleFor(f));
  ml.sig.ml_dsa_65 = flipB64(ml.sig.ml_dsa_65 as string);
  expectError(t, await verify(f.platform, ml, 'data:read'), 400, 'invalid_signature', `${node.name}: ML-DSA-65 half altered`);

  const tasks = await cryptoTasks(url);
  const signs = ALLOWED + 2;
  t.ok(tasks['sign:worker']! >= signs && tasks['verify:worker']! >= signs,
    `${node.name}: the compiled crypto worker signed and checked (${JSON.stringify(tasks)})`);
  t.equal(tasks['sign:main']! + tasks['verify:main']!, 0, `${node.name}: nothing on the main thread`);
}

/** Stops a sidecar of {@link startInstalledSidecar} with SIGTERM: it must exit 0. */
export async function stopInstalledSidecar(t: Test, sc: InstalledSidecar): Promise<void> {
  t.equal(await sc.proc.stop(), 0, `${sc.node.name}: SIGTERM, exit 0`);
}
