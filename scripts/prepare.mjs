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
// 2. The build, the same as `npm run build`: `tsc -p tsconfig.build.json` to dist/ (JavaScript,
//    .d.ts, source maps), then the console with Vite into dist/console/. A production install
//    from a clone (`npm ci --omit=dev`) has neither TypeScript nor Vite: then an existing dist/
//    is kept, and without one the script says how to build and fails.
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';

const command = process.env.npm_command ?? '';
const buildOnly = process.argv[2] === 'build';
const packing = command === 'pack' || command === 'publish';

/** Runs node with `args`; exits with its status when it fails. */
function run(args) {
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (!packing && !buildOnly) {
  fs.rmSync('node_modules/.bin/node', { force: true });
  if (fs.existsSync('node_modules/tap/package.json')) run(['node_modules/tap/dist/esm/run.mjs', 'build']);
}

if (fs.existsSync('node_modules/typescript/bin/tsc')) {
  run(['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json']);
  run(['node_modules/vite/bin/vite.js', 'build', '--config', 'console/vite.config.ts']);
} else if (fs.existsSync('dist/sidecar/main.js')) {
  process.stderr.write('prepare: TypeScript is not installed (--omit=dev); keeping the existing dist/\n');
} else {
  process.stderr.write('prepare: TypeScript is not installed (--omit=dev) and dist/ is missing: run `npm ci` (with dev dependencies) and `npm run build` first\n');
  process.exit(1);
}
