// The build of dist/ for `scripts/prepare.mjs` (npm ci, npm start, npm test, npm run gateway, npm run backup,
// npm pack):
// whole or not at all, skipped when nothing changed, and never two at once in one checkout.
//
// - BUILD_STEPS is the build (tsc, then the console with Vite): each step writes into a staging directory beside
//   dist/, dist.stage-<pid>/, that stands for dist/. When every step succeeded, the staging directory replaces
//   dist/ with two renames on one file system (dist/ to .cache/dist-build/old-<pid>/, the stage to dist/), and
//   the old build is removed. A reader sees the old build, the new one, or (for the instant between
//   the two renames) no dist/ at all — never a mix. A failed or interrupted build leaves dist/ as it was.
// - BUILD_INPUTS are what the build reads. Their SHA-256 (paths and contents, with the steps' command lines)
//   is written into the build as dist/.build-inputs.json; when it matches, the build is skipped.
// - One build at a time: the lock file .cache/dist-build/lock (created with link(2), so it appears with its
//   owner's pid, host, token and start time). A second process waits for it (at most BUILD_WAIT_MS, default
//   10 minutes), then checks the inputs again and uses the finished build. A lock whose owner is gone (a dead
//   pid on this host, or older than 30 minutes) is stale and removed (see breakStale).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

/**
 * The build, in order: each step's program (relative to the project) and its arguments, given `out`, the
 * directory that stands for dist/.
 */
export const BUILD_STEPS = [
  {
    name: 'tsc',
    program: 'node_modules/typescript/bin/tsc',
    args: (out) => ['-p', 'tsconfig.build.json', '--outDir', out],
  },
  {
    name: 'vite',
    program: 'node_modules/vite/bin/vite.js',
    args: (out) => ['build', '--config', 'console/vite.config.ts', '--outDir', path.join(out, 'console'),
      '--emptyOutDir'],
  },
];

/** What the build reads: folders (walked, without node_modules, dist and dot-folders) and files; `*` globs a name. */
export const BUILD_INPUTS = [
  'src', 'runtime', 'sidecar', 'gateway-plugin', 'client', 'receiver', 'console', 'packages',
  'tsconfig*.json', 'package.json', 'package-lock.json', 'scripts/build-dist.mjs',
];

/** The manifest inside a build: the inputs' hash it was built from. */
export const MANIFEST = '.build-inputs.json';
const STALE_MS = 30 * 60_000;
const POLL_MS = 200;

/** Every input file of the project at `root`, relative, sorted. */
export function inputFiles(root) {
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && e.name !== 'dist' && !e.name.startsWith('.')) walk(r);
      } else if (e.isFile()) out.push(r);
    }
  };
  const names = fs.readdirSync(root);
  for (const pattern of BUILD_INPUTS) {
    const re = new RegExp(`^${pattern.replace(/[.]/g, '\\.').replace(/\*/g, '[^/]*')}$`);
    const dir = path.dirname(pattern);
    const candidates = dir === '.' ? names.filter((n) => re.test(n)) : [pattern];
    for (const c of candidates) {
      const st = fs.statSync(path.join(root, c), { throwIfNoEntry: false });
      if (st?.isDirectory()) walk(c);
      else if (st?.isFile()) out.push(c);
    }
  }
  return [...new Set(out)].sort();
}

/** The SHA-256 of the inputs (each path and content) and of the steps' command lines: what a build is built from. */
export function inputsHash(root) {
  const h = crypto.createHash('sha256');
  h.update(JSON.stringify(BUILD_STEPS.map((s) => [s.program, ...s.args('<out>')])));
  for (const f of inputFiles(root)) {
    h.update(`\0${f}\0`);
    h.update(fs.readFileSync(path.join(root, f)));
  }
  return h.digest('hex');
}

/** The inputs' hash recorded in the build at `dir`, or null (no build, or none recorded). */
export function builtHash(dir) {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, MANIFEST), 'utf8')).inputs ?? null;
  } catch {
    return null;
  }
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
};

const readLock = (file) => {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    return { pid: 0, host: '', token: '', since: 0 }; // unreadable: stale by its age only
  }
};

/** True when the lock `l` (read from its file, modified at `mtimeMs`) has no live owner. */
function isStale(l, mtimeMs) {
  const since = Number.isFinite(l.since) && l.since > 0 ? l.since : mtimeMs;
  if (Date.now() - since > STALE_MS) return true;
  return l.host === os.hostname() && Number.isInteger(l.pid) && l.pid > 0 && !alive(l.pid);
}

/**
 * Takes the build lock in `dir`, waiting at most `waitMs` for another owner; returns the release function.
 * `say` reports a wait once. Throws when the wait runs out.
 */
export async function acquireLock(dir, { waitMs, say }) {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'lock');
  const token = crypto.randomBytes(12).toString('hex');
  const mine = path.join(dir, `lock.${process.pid}.${token}`);
  fs.writeFileSync(mine, JSON.stringify({ pid: process.pid, host: os.hostname(), token, since: Date.now() }) + '\n');
  const deadline = Date.now() + waitMs;
  let told = false;
  try {
    for (;;) {
      try {
        fs.linkSync(mine, file);
        return () => {
          if (readLock(file)?.token === token) fs.rmSync(file, { force: true });
        };
      } catch (err) {
        if (err.code !== 'EEXIST') throw err;
      }
      const st = fs.statSync(file, { throwIfNoEntry: false });
      const owner = st ? readLock(file) : null;
      if (owner && st && isStale(owner, st.mtimeMs)) {
        breakStale(file, owner, say);
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      if (Date.now() > deadline) {
        const who = `pid ${owner?.pid ?? '?'} on ${owner?.host ?? '?'}`;
        throw new Error(`another build holds ${file} (${who}) after ${waitMs} ms; remove the file if no build runs`);
      }
      if (!told && owner) {
        say(`waiting for the build of pid ${owner.pid} (${file})`);
        told = true;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    fs.rmSync(mine, { force: true });
  }
}

/**
 * Removes the stale lock `file` found held by `owner`. Only the holder of a second, short-lived lock (`file`.break)
 * removes a lock, and only after reading it again: two waiters that found the same stale lock cannot remove the
 * lock that one of them took meanwhile. A `.break` file older than 10 s was left by a crash and is removed.
 */
function breakStale(file, owner, say) {
  const guard = `${file}.break`;
  try {
    fs.closeSync(fs.openSync(guard, 'wx'));
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
    const st = fs.statSync(guard, { throwIfNoEntry: false });
    if (st && Date.now() - st.mtimeMs > 10_000) fs.rmSync(guard, { force: true });
    return;
  }
  try {
    if (readLock(file)?.token === owner.token) {
      fs.rmSync(file, { force: true });
      say(`removed the stale build lock of pid ${owner.pid} on ${owner.host}`);
    }
  } finally {
    fs.rmSync(guard, { force: true });
  }
}

/** Runs one step; resolves when it succeeds, rejects with its status otherwise. `track` learns the child. */
function runStep(root, step, out, track) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [step.program, ...step.args(out)], { cwd: root, stdio: 'inherit' });
    track(child);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      track(null);
      if (code === 0) resolve();
      else reject(new Error(`${step.name} failed (${signal ?? `exit ${code}`})`));
    });
  });
}

/**
 * Makes dist/ of the project at `root` current: skipped when its recorded inputs' hash matches (unless `force`),
 * else built aside under the lock and swapped in. `manifest: false` (npm pack) records no hash in the build.
 * Resolves to 'fresh' or 'built'.
 */
export async function ensureBuild(root, { force = false, manifest = true, waitMs = 600_000, say = () => {} } = {}) {
  const dist = path.join(root, 'dist');
  const work = path.join(root, '.cache', 'dist-build');
  if (!force && builtHash(dist) === inputsHash(root)) return 'fresh';
  const release = await acquireLock(work, { waitMs, say });
  // Beside dist/, at its depth: tsc writes the source maps' paths to the sources relative to where it writes.
  const stage = path.join(root, `dist.stage-${process.pid}`);
  const old = path.join(work, `old-${process.pid}`);
  let child = null;
  const onSignal = (signal) => {
    child?.kill(signal);
    fs.rmSync(stage, { recursive: true, force: true });
    release();
    process.exit(128 + os.constants.signals[signal]);
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const s of signals) process.on(s, onSignal);
  try {
    const hash = inputsHash(root); // again: the inputs may have changed while this process waited
    if (!force && builtHash(dist) === hash) return 'fresh';
    for (const [dir, left] of [[root, /^dist\.stage-\d+$/], [work, /^old-\d+$/]]) { // left by a crash
      for (const e of fs.readdirSync(dir).filter((n) => left.test(n))) {
        fs.rmSync(path.join(dir, e), { recursive: true, force: true });
      }
    }
    for (const step of BUILD_STEPS) await runStep(root, step, stage, (c) => { child = c; });
    const record = { inputs: hash, builtAt: new Date().toISOString() };
    if (manifest) fs.writeFileSync(path.join(stage, MANIFEST), JSON.stringify(record) + '\n');
    const hadDist = fs.lstatSync(dist, { throwIfNoEntry: false }) !== undefined;
    if (hadDist) fs.renameSync(dist, old);
    fs.renameSync(stage, dist);
    if (hadDist) fs.rmSync(old, { recursive: true, force: true });
    return 'built';
  } finally {
    for (const s of signals) process.off(s, onSignal);
    fs.rmSync(stage, { recursive: true, force: true });
    release();
  }
}
