/**
 * Preload for the sidecar on Node 24 in tests and benchmarks (never in the
 * product): `node --import ./test/shared/node24-sqlite.mjs …` makes every import of
 * `better-sqlite3` load the copy built for Node 24's ABI in
 * `.cache/node24-sqlite/` (see test/shared/node24.ts, ensureNode24SqliteBinding), so
 * the installed build (for the machine's Node) and the Node 24 build can be
 * used side by side without a product setting. Uses `module.registerHooks`
 * (Node >= 22.15), which applies to `import` and `require` alike.
 */
import { registerHooks } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const pkg = fileURLToPath(new URL('../../.cache/node24-sqlite/node_modules/better-sqlite3/', import.meta.url));
if (!existsSync(`${pkg}build/Release/better_sqlite3.node`)) {
  throw new Error(`test/shared/node24-sqlite.mjs: no Node 24 build of better-sqlite3 in ${pkg} (run ensureNode24SqliteBinding first)`);
}
const target = pathToFileURL(`${pkg}lib/index.js`).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === 'better-sqlite3') return { url: target, format: 'commonjs', shortCircuit: true };
    return nextResolve(specifier, context);
  },
});
