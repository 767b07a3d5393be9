/**
 * The sidecar compiled to JavaScript, for the tests that start it as a child process: `node <main.js>` starts
 * with about 1.4 CPU s less than `node --import tsx sidecar/main.ts` (measured: 2.2 against 3.6 to ready), and
 * its crypto workers load compiled code too. The build must be of the sources as they are now:
 *
 * - `dist/` when its recorded inputs hash (scripts/build-dist.mjs) matches the sources: `npm test` builds it
 *   first (pretest), so a full run compiles nothing more;
 * - otherwise (a single file run after an edit) a build of its own, `tsc -p tsconfig.build.json` without
 *   declarations or maps, into `.cache/test-sidecar-<inputs hash>/`, made once and shared by every test file
 *   and run with the same sources: written to a temp directory beside it and renamed into place, so a
 *   concurrent file sees the whole build or none (two may build at once; the first rename wins).
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface BuildDist { inputsHash(root: string): string; builtHash(dir: string): string | null }

let cached: string | undefined;

/** The path of a compiled `sidecar/main.js` built from the current sources (see the file header). */
export async function compiledSidecarMain(): Promise<string> {
  if (cached !== undefined && fs.existsSync(cached)) return cached;
  const build = await import(pathToFileURL(path.join(ROOT, 'scripts/build-dist.mjs')).href) as BuildDist;
  const hash = build.inputsHash(ROOT);
  const dist = path.join(ROOT, 'dist');
  if (build.builtHash(dist) === hash && fs.existsSync(path.join(dist, 'sidecar/main.js'))) {
    return (cached = path.join(dist, 'sidecar/main.js'));
  }
  const final = path.join(ROOT, '.cache', `test-sidecar-${hash.slice(0, 16)}`);
  const main = path.join(final, 'sidecar/main.js');
  if (fs.existsSync(main)) return (cached = main);
  fs.mkdirSync(path.dirname(final), { recursive: true });
  const stage = fs.mkdtempSync(`${final}.tmp-`);
  try {
    // Through env(1) without NODE_OPTIONS: the test runner's loader hooks are not the compiler's.
    const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
    const args = ['-p', 'tsconfig.build.json', '--outDir', stage,
      '--declaration', 'false', '--declarationMap', 'false', '--sourceMap', 'false', '--inlineSources', 'false'];
    const r = spawnSync('env', ['-u', 'NODE_OPTIONS', process.execPath, tsc, ...args],
      { cwd: ROOT, encoding: 'utf8', timeout: 180_000, env: { PATH: process.env.PATH ?? '' } });
    if (r.status !== 0) {
      throw new Error(`compiling the sidecar failed (${r.status ?? r.signal}): ${(r.stdout + r.stderr).slice(-2000)}`);
    }
    try {
      fs.renameSync(stage, final);
    } catch (err) {
      // Another test file renamed its build of the same sources into place first: use that one.
      if (!fs.existsSync(main)) throw err;
    }
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
  return (cached = main);
}

/**
 * The sidecar's command line as `npm start` runs it (`node bin/agent-authz-sidecar.mjs`, which imports
 * `../dist/sidecar/main.js`), on a build of the current sources: the project's own `bin/` when `dist/` is
 * that build; otherwise the same `bin/agent-authz-sidecar.mjs`, copied byte for byte into
 * `.cache/test-start-<inputs hash>/bin/`, beside a `dist` link to the build of {@link compiledSidecarMain}.
 */
export async function compiledSidecarBin(): Promise<string> {
  const main = await compiledSidecarMain();
  const bin = path.join(ROOT, 'bin', 'agent-authz-sidecar.mjs');
  const build = path.dirname(path.dirname(main));
  if (build === path.join(ROOT, 'dist')) return bin;
  const home = path.join(ROOT, '.cache', `test-start-${path.basename(build).replace(/^test-sidecar-/, '')}`);
  const copy = path.join(home, 'bin', 'agent-authz-sidecar.mjs');
  if (fs.existsSync(copy) && fs.existsSync(path.join(home, 'dist', 'sidecar', 'main.js'))) return copy;
  const stage = fs.mkdtempSync(`${home}.tmp-`);
  try {
    fs.mkdirSync(path.join(stage, 'bin'));
    fs.copyFileSync(bin, path.join(stage, 'bin', 'agent-authz-sidecar.mjs'));
    fs.symlinkSync(build, path.join(stage, 'dist'), 'dir');
    try {
      fs.renameSync(stage, home);
    } catch (err) {
      // Another test file put the same one in place first: use that one.
      if (!fs.existsSync(copy)) throw err;
    }
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
  return copy;
}

/**
 * The path of another compiled module of the same build as {@link compiledSidecarMain} (`rel` as under `dist/`,
 * e.g. `gateway-plugin/standalone/main.js`), for tests that start the gateway or load the receiver as plain
 * JavaScript instead of through tsx.
 */
export async function compiledFile(rel: string): Promise<string> {
  return path.join(path.dirname(path.dirname(await compiledSidecarMain())), rel);
}
