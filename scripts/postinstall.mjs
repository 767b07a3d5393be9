// Runs after `npm ci` / `npm install` of this project.
//
// 1. The `node@24` devDependency (a Node 24 binary used by the cross-backend crypto
//    test and the native-backend benchmark) links `node_modules/.bin/node`. npm puts
//    that folder first on PATH for every script, so `npm start` and `npm test` would
//    silently run on Node 24 instead of the Node that installed the project (and
//    better-sqlite3 is built for the installing Node). Remove the link; the binary
//    stays at node_modules/node/bin/node for the code that asks for it by path.
// 2. tap's TypeScript plugin is disabled in package.json (tests load through tsx), and
//    tap needs a rebuild of its plugin set after that change. Production installs
//    (--omit=dev) have no tap; that is fine.
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';

fs.rmSync('node_modules/.bin/node', { force: true });
if (fs.existsSync('node_modules/tap/package.json')) {
  const r = spawnSync(process.execPath, ['node_modules/tap/dist/esm/run.mjs', 'build'], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
