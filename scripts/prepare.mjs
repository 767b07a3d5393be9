// The `prepare` script (and, as `node scripts/prepare.mjs build`, the build step of `npm start`,
// `npm test`, `npm run gateway` and `npm run backup`): runs after `npm ci` / `npm install` in a clone of this project, and
// before `npm pack` / `npm publish`. It never runs when a user installs the published package
// (npm runs no `prepare` for a registry or tarball install), and the package has no install
// scripts of its own: installing it runs nothing of ours.
//
// 1. Development setup (skipped for pack and publish):
//    a. The `node@24` devDependency (a Node 24 binary used by the cross-backend crypto tests
//       and the native-backend benchmark) links `node_modules/.bin/node`. npm puts that folder
//       first on PATH for every script, so `npm start` and `npm test` would silently run on
//       Node 24 instead of the Node that installed the project (and better-sqlite3 is built
//       for the installing Node). Remove the link; the binary stays at
//       node_modules/node/bin/node for the code that asks for it by path.
//    b. tap's TypeScript plugin is disabled in package.json (tests load through tsx), and tap
//       needs a rebuild of its plugin set after that change.
// 2. The build (scripts/build-dist.mjs, whose BUILD_STEPS are `tsc -p tsconfig.build.json`, then the console with
//    Vite): JavaScript, .d.ts and source maps in dist/, the console in dist/console/. It is built aside and swapped
//    in whole, skipped when its inputs did not change since the build in dist/, and one process at a time builds
//    (a second waits, then uses the finished build). `npm pack` / `npm publish` always build afresh. With
//    `--force` (`node scripts/prepare.mjs build --force`) it builds even when nothing changed. A production
//    install from a clone (`npm ci --omit=dev`) has neither TypeScript nor Vite: then an existing dist/ is kept,
//    and without one the script says how to build and fails.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureBuild } from './build-dist.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const command = process.env.npm_command ?? '';
const buildOnly = process.argv[2] === 'build';
const force = process.argv.includes('--force');
const packing = command === 'pack' || command === 'publish';
const say = (s) => process.stderr.write(`prepare: ${s}\n`);

/** Runs node with `args`; exits with its status when it fails. */
function run(args) {
  const r = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: root });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (!packing && !buildOnly) {
  fs.rmSync(path.join(root, 'node_modules/.bin/node'), { force: true });
  const tap = fs.existsSync(path.join(root, 'node_modules/tap/package.json'));
  if (tap) run(['node_modules/tap/dist/esm/run.mjs', 'build']);
}

if (fs.existsSync(path.join(root, 'node_modules/typescript/bin/tsc'))) {
  const waitMs = Number(process.env.AGENT_AUTHZ_BUILD_WAIT_MS || 600_000);
  const started = Date.now();
  try {
    const r = await ensureBuild(root, { force: force || packing, manifest: !packing, waitMs, say });
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    say(r === 'fresh' ? 'dist/ is up to date with the sources' : `built dist/ in ${seconds} s`);
  } catch (err) {
    say(err.message);
    process.exit(1);
  }
} else if (fs.existsSync(path.join(root, 'dist/sidecar/main.js'))) {
  say('TypeScript is not installed (--omit=dev); keeping the existing dist/');
} else {
  say('TypeScript is not installed (--omit=dev) and dist/ is missing: '
    + 'run `npm ci` (with dev dependencies) and `npm run build` first');
  process.exit(1);
}
