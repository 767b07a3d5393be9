/**
 * Helpers of the packaging tests: a copy of the project as a fresh clone would have it (the
 * files git tracks, plus new files not ignored, with `node_modules` linked to this one's), child
 * processes with deadlines, and a consumer app that installs the packed tarball offline.
 *
 * Offline install: `npm install <tarball>` would ask the registry for every dependency's
 * metadata, which `npm ci` never fetched (it installs from the lockfile). So the consumer app
 * gets a lockfile made from this project's: the tarball, plus the entries (name, version,
 * integrity) of its dependencies and required peers, transitively — what `npm install <tarball>`
 * resolves today — and
 * `npm ci --offline` takes every tarball from npm's cache. `--ignore-scripts` skips
 * better-sqlite3's native build (minutes on two cores); the app gets the binding `npm ci`
 * already built for this Node (same locked version, same ABI) copied in. The package itself
 * has no install scripts (checked in pack.test.ts), so nothing of ours is skipped.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Test } from 'tap';
import { cpuSeconds } from '../shared/proc-stat.js';

/** CPU seconds of this process and its children that ended (npm, builds, servers stopped). */
export const selfCpu = (): number => cpuSeconds('self', { children: true });

/** The repository root. */
export const ROOT = path.resolve(import.meta.dirname, '../..');
/** The Node binaries the package is checked on: this machine's, the engines floor (22.12.0) and Node 24. */
export const NODES: readonly { name: string; bin: string }[] = [
  { name: `machine (${process.version})`, bin: process.execPath },
  { name: 'Node 22.12.0 (engines floor)', bin: path.join(ROOT, 'node_modules/node22/bin/node') },
  { name: 'Node 24', bin: path.join(ROOT, 'node_modules/node/bin/node') },
];

/** Result of {@link run}. */
export interface RunResult { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }

/**
 * Spawns `cmd` as a plain program: tap's process tracking puts its loader into the
 * NODE_OPTIONS of every child it sees spawned (and that loader's CommonJS hook breaks, for
 * example, TypeScript's ESM `tsc` launcher), so the child starts through `env -u NODE_OPTIONS`.
 */
function spawnPlain(cmd: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv) {
  return spawn('env', ['-u', 'NODE_OPTIONS', cmd, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs a command to completion (killed after `timeoutMs`). */
export function run(cmd: string, args: readonly string[], o: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawnPlain(cmd, args, o.cwd, o.env ?? cleanEnv());
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
    child.once('error', (err) => { clearTimeout(timer); reject(err); });
    child.once('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
  });
}

/** This process's environment without tap's, tsx's and npm's own variables (a child is a new program). */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'NODE_OPTIONS' || /^_?TAP/.test(k) || /^npm_/.test(k) || k === 'INIT_CWD') continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/** Folders a fresh clone does not have (outside a git checkout, where `git ls-files` cannot say). */
const LOCAL_STATE = new Set(['.git', 'node_modules', 'dist', '.cache', '.tap', 'coverage', 'data']);

/** The project's files as a fresh clone has them (tracked, plus untracked files git does not ignore). */
export function projectFiles(): string[] {
  const r = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  // LOCAL_STATE out in a git checkout too: a worktree whose node_modules is a symlink lists it as untracked.
  if (r.status === 0) {
    const listed = r.stdout.split('\0').filter((f) => f !== '' && !LOCAL_STATE.has(f.split('/')[0]!));
    return listed.filter((f) => fs.existsSync(path.join(ROOT, f)));
  }
  return fs.readdirSync(ROOT, { recursive: true }).map(String)
    .filter((f) => !LOCAL_STATE.has(f.split(path.sep)[0]!) && !f.startsWith('.scratch') && fs.lstatSync(path.join(ROOT, f)).isFile());
}

/** Copies the project into `dest` with `node_modules` linked to this project's. */
export function copyProject(dest: string): void {
  for (const f of projectFiles()) {
    const to = path.join(dest, f);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.cpSync(path.join(ROOT, f), to, { verbatimSymlinks: true });
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dest, 'node_modules'), 'dir');
}

interface BuildDist { inputsHash(root: string): string; builtHash(dir: string): string | null }

/**
 * Gives the copy at `dest` (made by {@link copyProject}) this checkout's dist/ when that is the build of the same
 * sources (scripts/build-dist.mjs: the inputs hash recorded in dist/ is the copy's), as a fresh clone has it after
 * `npm ci` (whose `prepare` builds it): `npm test` builds dist/ first (pretest), so a test that runs the copy does not
 * compile the same sources once more (issue 30). Returns false, leaving the copy without dist/ (its own `npm start`
 * or `npm run build` then builds it), when there is no such build, or when another build was swapped into dist/
 * while it was copied.
 */
export async function seedBuild(dest: string): Promise<boolean> {
  const build = await import(pathToFileURL(path.join(ROOT, 'scripts/build-dist.mjs')).href) as BuildDist;
  const hash = build.inputsHash(dest);
  const from = path.join(ROOT, 'dist');
  if (build.builtHash(from) !== hash) return false;
  const to = path.join(dest, 'dist');
  try {
    fs.cpSync(from, to, { recursive: true, verbatimSymlinks: true });
  } catch {
    fs.rmSync(to, { recursive: true, force: true });
    return false;
  }
  if (build.builtHash(from) === hash && build.builtHash(to) === hash) return true;
  fs.rmSync(to, { recursive: true, force: true });
  return false;
}

interface LockEntry { dev?: boolean; devOptional?: boolean; link?: boolean; [k: string]: unknown }

/** A packed package: its name, its tarball and its package.json (the root's, or a workspace's under packages/). */
export interface Packed { name: string; tarball: string; manifest: Record<string, unknown> }

/** The package.json of the root (`.`) or of a workspace (`packages/<name>`). */
export function manifestOf(dir = '.'): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(ROOT, dir, 'package.json'), 'utf8')) as Record<string, unknown>;
}

/** The lockfile keys `roots` need, transitively, by Node's resolution (the nearest node_modules/<dep> up). */
function lockClosure(lock: Record<string, LockEntry>, roots: readonly string[]): Set<string> {
  const wanted = new Set<string>();
  const queue = roots.map((p) => `node_modules/${p}`);
  while (queue.length > 0) {
    const key = queue.pop()!;
    if (wanted.has(key) || lock[key] === undefined || lock[key]!.link === true) continue;
    wanted.add(key);
    for (const nested of Object.keys(lock)) if (nested.startsWith(`${key}/node_modules/`)) queue.push(nested);
    const entry = lock[key]!;
    const optionalPeers = (entry.peerDependenciesMeta ?? {}) as Record<string, { optional?: boolean }>;
    const needs = [...Object.keys((entry.dependencies ?? {}) as object), ...Object.keys((entry.optionalDependencies ?? {}) as object),
      ...Object.keys((entry.peerDependencies ?? {}) as object).filter((d) => optionalPeers[d]?.optional !== true)];
    for (const dep of needs) {
      let base = key;
      for (;;) {
        const candidate = `${base}/node_modules/${dep}`;
        if (lock[candidate] !== undefined) { queue.push(candidate); break; }
        const up = base.lastIndexOf('/node_modules/');
        if (up < 0) { queue.push(`node_modules/${dep}`); break; }
        base = base.slice(0, up);
      }
    }
  }
  return wanted;
}

/**
 * Makes a consumer app in `dir` that depends on the tarball (by default the root package's; or a
 * {@link Packed} workspace package) and on the named devDependencies of this project (for example
 * `@types/node` for a TypeScript consumer), and installs it offline: the lockfile holds the package,
 * its dependencies and required peers, transitively, as this project's lockfile resolves them.
 * `ignoreScripts` (default true) skips install scripts, and then better-sqlite3's binding is copied in
 * when the app has better-sqlite3 (see the file header); a workspace package's test installs with
 * scripts on, to show there are none to run.
 */
export async function installConsumer(dir: string, tarball: string | Packed, devPackages: readonly string[] = [],
  o: { ignoreScripts?: boolean } = {}): Promise<RunResult> {
  const lock = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const packed: Packed = typeof tarball === 'string' ? { name: 'agent-authz', tarball, manifest: manifestOf() } : tarball;
  const own = packed.manifest;
  const spec = `file:${path.relative(dir, packed.tarball)}`;
  const devDependencies: Record<string, string> = {};
  for (const p of devPackages) {
    const entry = lock[`node_modules/${p}`];
    if (entry === undefined) throw new Error(`${p} is not in package-lock.json`);
    devDependencies[p] = String(entry.version);
  }
  const optionalPeers = (own.peerDependenciesMeta ?? {}) as Record<string, { optional?: boolean }>;
  const prodRoots = [...Object.keys((own.dependencies ?? {}) as object),
    ...Object.keys((own.peerDependencies ?? {}) as object).filter((d) => optionalPeers[d]?.optional !== true)];
  const prod = lockClosure(lock, prodRoots);
  const dev = lockClosure(lock, devPackages);
  const packages: Record<string, unknown> = {};
  for (const key of [...prod, ...dev].sort()) {
    const { dev: _d, devOptional: _o, ...entry } = lock[key]!;
    packages[key] = prod.has(key) ? entry : { ...entry, dev: true };
  }
  const manifest = { name: 'consumer-app', version: '1.0.0', private: true, type: 'module', dependencies: { [packed.name]: spec }, devDependencies };
  packages[''] = { name: manifest.name, version: manifest.version, dependencies: manifest.dependencies, devDependencies };
  packages[`node_modules/${packed.name}`] = {
    version: own.version, resolved: spec, license: own.license, dependencies: own.dependencies,
    peerDependencies: own.peerDependencies, peerDependenciesMeta: own.peerDependenciesMeta, engines: own.engines, bin: own.bin,
  };
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  const lockfile = { name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages };
  fs.writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(lockfile, null, 2));
  const ignoreScripts = o.ignoreScripts ?? true;
  const r = await run('npm', ['ci', '--offline', ...(ignoreScripts ? ['--ignore-scripts'] : []), '--no-audit', '--no-fund', '--loglevel=error'],
    { cwd: dir, timeoutMs: 120_000 });
  if (r.code === 0 && ignoreScripts && fs.existsSync(path.join(dir, 'node_modules/better-sqlite3'))) {
    const release = path.join(dir, 'node_modules/better-sqlite3/build/Release');
    fs.mkdirSync(release, { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node'), path.join(release, 'better_sqlite3.node'));
  }
  return r;
}

/** A long-running child process. */
export interface Proc { readonly pid: number; output(): string; exited(): boolean; stop(signal?: NodeJS.Signals): Promise<number | null> }

/** Starts a long-running process (through `env`, which execs it: same pid); `stop()` sends `signal` (SIGTERM), then SIGKILL after 10 s. */
export function startProc(cmd: string, args: readonly string[], o: { cwd: string; env: NodeJS.ProcessEnv }): Proc {
  const child = spawnPlain(cmd, args, o.cwd, o.env);
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  let done = false;
  const exit = new Promise<number | null>((resolve) => child.once('close', (code) => { done = true; resolve(code); }));
  return {
    pid: child.pid ?? -1,
    output: () => out,
    exited: () => done,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (!done) child.kill(signal);
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exit;
      clearTimeout(killer);
      return code;
    },
  };
}

/**
 * Comments each subtest of `t` with its wall time and the CPU time it used (this process and the children that ended
 * meanwhile: npm, builds, servers stopped in it), so that a slow step shows in the TAP output (issue 30).
 */
export function reportSteps(t: Test): void {
  let wall = 0;
  let cpu = 0;
  t.beforeEach(() => { wall = Date.now(); cpu = selfCpu(); });
  t.afterEach((sub) => {
    sub.comment(`${sub.name}: ${((Date.now() - wall) / 1000).toFixed(1)} s wall, ${(selfCpu() - cpu).toFixed(1)} s CPU`);
  });
}

/** Waits (at most `timeoutMs`) until GET `url` answers `status`; throws with the process output otherwise. */
export async function waitFor(url: string, proc: Proc, o: { status?: number; timeoutMs?: number } = {}): Promise<void> {
  const deadline = Date.now() + (o.timeoutMs ?? 30_000);
  for (;;) {
    if (proc.exited()) throw new Error(`the process exited before ${url} answered:\n${proc.output()}`);
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.status === (o.status ?? 200)) return;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`${url} did not answer ${o.status ?? 200} in time:\n${proc.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
