// Builds the packages by audience (packages/*, npm workspaces; docs/architecture.md "Packages") from the
// repository's top-level sources. `npm pack -w packages/<name>` runs it as the package's `prepack`;
// `node scripts/build-packages.mjs [client|gateway|receiver ...]` runs it by hand (no name: all three).
//
// - @agent-authz/gateway and @agent-authz/receiver: `tsc -p packages/<name>/tsconfig.json`, whose only
//   inputs are the entry points; tsc compiles them and exactly the files they import (the src/ core
//   included) into packages/<name>/dist/, in the repository's folder layout, with .d.ts and source maps.
//   Their own dependencies are the libraries those files import (test/architecture/package-deps.test.ts).
// - @agent-authz/client: esbuild bundles client/index.ts, client/mcp.ts and client/a2a.ts (ESM, platform
//   `neutral`, code splitting so the entries share one copy of the code) with the core and @noble/hashes inside: the
//   package has no runtime dependency, and a `node:` import fails the build (neutral resolves no
//   built-in). The MCP SDK stays external (an optional peer). tsc writes the declarations, compiled
//   without Node's types and with the DOM library: a Node-only global in the client fails the build too.
//
// Each package is built into a fresh folder beside dist/ and swapped in whole. LICENSE is copied in.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ALL = ['client', 'gateway', 'receiver'];
const names = process.argv.length > 2 ? process.argv.slice(2) : ALL;
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');

/** Runs `node args` in `cwd`; exits with its status when it fails. */
function node(args, cwd) {
  const r = spawnSync(process.execPath, args, { cwd, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/** Builds the client's JavaScript into `out` with esbuild. */
async function bundleClient(out) {
  const esbuild = await import('esbuild');
  const r = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: { index: 'client/index.ts', mcp: 'client/mcp.ts', a2a: 'client/a2a.ts' },
    outdir: out, bundle: true, splitting: true, format: 'esm', platform: 'neutral', target: 'es2022',
    mainFields: ['module', 'main'], conditions: ['import', 'default'],
    external: ['@modelcontextprotocol/sdk', '@modelcontextprotocol/sdk/*'],
    sourcemap: true, sourcesContent: true, legalComments: 'eof', chunkNames: 'chunks/[name]-[hash]',
    logLevel: 'warning', metafile: true,
  });
  const imported = new Set();
  for (const o of Object.values(r.metafile.outputs)) for (const i of o.imports) if (i.external) imported.add(i.path);
  const stray = [...imported].filter((p) => !p.startsWith('@modelcontextprotocol/sdk/'));
  if (stray.length > 0) throw new Error(`@agent-authz/client: the bundle imports ${stray.join(', ')}`);
}

for (const name of names) {
  if (!ALL.includes(name)) {
    process.stderr.write(`build-packages: unknown package ${name} (one of ${ALL.join(', ')})\n`);
    process.exit(2);
  }
  const dir = path.join(ROOT, 'packages', name);
  const next = path.join(dir, `.dist-${process.pid}`);
  fs.rmSync(next, { recursive: true, force: true });
  try {
    // tsc writes to the tsconfig's outDir (dist/…): point it at the fresh folder instead.
    const outDir = name === 'client' ? path.join(next, 'types') : next;
    node([TSC, '-p', path.join(dir, 'tsconfig.json'), '--outDir', outDir], ROOT);
    if (name === 'client') await bundleClient(next);
    fs.rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
    fs.renameSync(next, path.join(dir, 'dist'));
  } finally {
    fs.rmSync(next, { recursive: true, force: true });
  }
  fs.copyFileSync(path.join(ROOT, 'LICENSE'), path.join(dir, 'LICENSE'));
  process.stdout.write(`build-packages: packages/${name}/dist\n`);
}
