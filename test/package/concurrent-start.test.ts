/**
 * The build of `npm start` (scripts/prepare.mjs, scripts/build-dist.mjs) when several processes share one
 * checkout, in a copy of the project (node_modules linked; the real sources and dist/ are never written):
 *
 * - a build that fails (a type error) exits non-zero and leaves the previous dist/ whole, with no staging
 *   directory and no lock left behind;
 * - while a live process holds the build lock, a start that needs a build waits, and gives up after its bound
 *   (`AGENT_AUTHZ_BUILD_WAIT_MS`) with exit 1 and a message naming the lock and its owner;
 * - the acceptance test of issue 30: with a changed source file (a marker header on `/healthz`, built by tsc) and a
 *   changed console page (its title, built by Vite), and a stale lock left by a build that was killed, three
 *   `npm start` at once all start and serve the new build. One of them removed the stale lock, exactly one built
 *   the new build, and the other two waited and used it.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { cleanEnv, projectFiles, reportSteps, ROOT, run, startProc, waitFor } from './helpers.js';
import type { Proc } from './helpers.js';
import { freePort } from '../helpers/net.js';

t.setTimeout(420_000);
reportSteps(t);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-concurrent-start-'));
t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
const copy = path.join(work, 'project');
// As copyProject, without a node_modules link that git lists as untracked (a worktree whose node_modules is a symlink).
for (const f of projectFiles().filter((f) => f.split('/')[0] !== 'node_modules')) {
  fs.mkdirSync(path.dirname(path.join(copy, f)), { recursive: true });
  fs.cpSync(path.join(ROOT, f), path.join(copy, f), { verbatimSymlinks: true });
}
// node_modules: a link to each of this project's packages, and .bin without a `node` link (prepare removes it on
// npm ci, but a shared node_modules may have it back; npm start would then run Node 24 against a Node 20 addon).
const modules = path.join(ROOT, 'node_modules');
fs.mkdirSync(path.join(copy, 'node_modules', '.bin'), { recursive: true });
for (const e of fs.readdirSync(modules).filter((n) => n !== '.bin')) {
  fs.symlinkSync(path.join(modules, e), path.join(copy, 'node_modules', e));
}
for (const e of fs.readdirSync(path.join(modules, '.bin')).filter((n) => n !== 'node')) {
  fs.cpSync(path.join(modules, '.bin', e), path.join(copy, 'node_modules', '.bin', e), { verbatimSymlinks: true });
}
/** PATH without node_modules/.bin folders (npm, run from tap, has this project's first). */
const PATH_WITHOUT_BINS = (process.env.PATH ?? '').split(path.delimiter)
  .filter((d) => !d.endsWith(path.join('node_modules', '.bin'))).join(path.delimiter);
const DIST = path.join(copy, 'dist');
const LOCK = path.join(copy, '.cache', 'dist-build', 'lock');
const HEALTH = path.join(copy, 'sidecar', 'routes', 'health.ts');
const CONSOLE_PAGE = path.join(copy, 'console', 'index.html');
const prepare = (env: NodeJS.ProcessEnv = {}) =>
  run(process.execPath, ['scripts/prepare.mjs', 'build'], { cwd: copy, env: cleanEnv(env), timeoutMs: 240_000 });
const manifest = (): string => fs.readFileSync(path.join(DIST, '.build-inputs.json'), 'utf8');
/** Replaces `from` (which must occur) by `to` in `file`. */
function edit(file: string, from: string, to: string): void {
  const text = fs.readFileSync(file, 'utf8');
  if (!text.includes(from)) throw new Error(`${file} does not contain ${JSON.stringify(from)}`);
  fs.writeFileSync(file, text.replace(from, to));
}
/** Build files left in the copy: the lock's folder, and staging directories beside dist/. */
const leftovers = (): string[] =>
  [...fs.readdirSync(path.dirname(LOCK)), ...fs.readdirSync(copy).filter((f) => f.startsWith('dist.'))];
/** A lock file as scripts/build-dist.mjs writes it. */
const writeLock = (pid: number) => {
  fs.mkdirSync(path.dirname(LOCK), { recursive: true });
  fs.writeFileSync(LOCK, JSON.stringify({ pid, host: os.hostname(), token: `test-${pid}`, since: Date.now() }) + '\n');
};

t.test('the first build, then a failed build leaves dist/ whole', async (t) => {
  const first = await prepare();
  t.equal(first.code, 0, `the first build${first.code === 0 ? '' : `:\n${first.stderr}`}`);
  t.match(first.stderr, /prepare: built dist\/ in [\d.]+ s/);
  t.ok(fs.existsSync(path.join(DIST, 'sidecar', 'main.js')), 'tsc output');
  t.ok(fs.existsSync(path.join(DIST, 'console', 'index.html')), 'Vite output');
  const map = JSON.parse(fs.readFileSync(path.join(DIST, 'sidecar', 'main.js.map'), 'utf8')) as { sources: string[] };
  const source = path.resolve(DIST, 'sidecar', map.sources[0]!);
  t.equal(source, path.join(copy, 'sidecar', 'main.ts'), 'source maps point at the sources from dist/');
  const again = await prepare();
  t.equal(again.code, 0);
  t.match(again.stderr, /prepare: dist\/ is up to date with the sources/, 'nothing changed: no build');

  const before = manifest();
  const original = fs.readFileSync(HEALTH, 'utf8');
  edit(HEALTH, "return { status: 'ok' };", "const n: number = 'not a number';\n    return { status: 'ok', n };");
  const failed = await prepare();
  fs.writeFileSync(HEALTH, original);
  t.not(failed.code, 0, 'a type error fails the build');
  t.match(failed.stderr, /prepare: tsc failed \(exit \d+\)/);
  t.equal(manifest(), before, 'dist/ is the previous build');
  t.ok(fs.existsSync(path.join(DIST, 'sidecar', 'main.js')), 'whole');
  t.same(leftovers(), [], 'no staging directory, no lock left');
  const back = await prepare();
  t.match(back.stderr, /dist\/ is up to date/, 'the sources as before: the build in dist/ still matches them');
});

t.test('a live lock holder: a build waits, bounded, then fails naming the lock', async (t) => {
  writeLock(process.pid);
  t.teardown(() => fs.rmSync(LOCK, { force: true }));
  fs.appendFileSync(path.join(copy, 'sidecar', 'routes', 'new-file.ts'), '// a new input file\nexport {};\n');
  const started = Date.now();
  const r = await prepare({ AGENT_AUTHZ_BUILD_WAIT_MS: '1500' });
  t.equal(r.code, 1, 'exit 1');
  t.match(r.stderr, `prepare: waiting for the build of pid ${process.pid}`);
  const owner = `pid ${process.pid} on ${os.hostname()}`;
  t.match(r.stderr, new RegExp(`another build holds .*lock \\(${owner}\\) after 1500 ms`));
  t.ok(Date.now() - started >= 1500, 'it waited its bound');
  t.equal(JSON.parse(fs.readFileSync(LOCK, 'utf8')).token, `test-${process.pid}`, 'the holder\'s lock is left alone');
  t.notOk(fs.existsSync(path.join(DIST, 'sidecar', 'routes', 'new-file.js')), 'and nothing was built');
});

t.test('three npm start at once on a changed source, with a stale lock: all serve the new build', async (t) => {
  const marker = `build-${process.pid}-${Date.now()}`;
  edit(HEALTH, "return { status: 'ok' };", `void reply.header('x-build', '${marker}');\n    return { status: 'ok' };`);
  edit(CONSOLE_PAGE, '<title>agent-authz console</title>', `<title>agent-authz console ${marker}</title>`);
  const dead = spawnSync(process.execPath, ['-e', '0']).pid!; // a pid that no longer runs: a build killed mid-way
  writeLock(dead);

  const starts: { proc: Proc; url: string }[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const proc = startProc('npm', ['start'], {
      cwd: copy,
      env: cleanEnv({
        PATH: PATH_WITHOUT_BINS, SIDECAR_PORT: String(port), SIDECAR_CRYPTO_WORKERS: '1',
        SIDECAR_DATA_DIR: path.join(work, `data-${i}`),
      }),
    });
    t.teardown(() => proc.stop('SIGKILL'));
    starts.push({ proc, url: `http://127.0.0.1:${port}` });
  }
  await Promise.all(starts.map((s) => waitFor(`${s.url}/healthz`, s.proc, { timeoutMs: 300_000 })));
  for (const [i, s] of starts.entries()) {
    const health = await fetch(`${s.url}/healthz`);
    const seen = [health.headers.get('x-build'), await health.json()];
    t.same(seen, [marker, { status: 'ok' }], `start ${i}: /healthz from the new build (tsc)`);
    const page = await fetch(`${s.url}/console/`);
    t.match(await page.text(), `<title>agent-authz console ${marker}</title>`, `start ${i}: the new console (Vite)`);
    t.notMatch(s.proc.output(), /SyntaxError|ERR_MODULE_NOT_FOUND/, `start ${i}: no half-written build loaded`);
  }
  const outputs = starts.map((s) => s.proc.output());
  const built = outputs.filter((o) => /prepare: built dist\/ in/.test(o));
  t.equal(built.length, 1, 'one start built dist/');
  const broke = outputs.filter((o) => o.includes(`removed the stale build lock of pid ${dead} on ${os.hostname()}`));
  t.equal(broke.length, 1, 'one of them removed the stale lock (not necessarily the one that then took it)');
  const waited = outputs.filter((o) => /prepare: waiting for the build of pid \d+/.test(o) && /is up to date/.test(o));
  t.equal(waited.length, 2, 'the other two waited for it, then used it');
  t.same(leftovers(), [], 'no lock and no staging directory left');
  for (const s of starts) t.equal(await s.proc.stop(), 0, 'each stops on SIGTERM with exit 0');
});
