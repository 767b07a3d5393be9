/**
 * Every package's dependency list matches what its entry points import (issue 30, "Guards"). For each
 * package of the repository — the root `agent-authz` (the sidecar, its CLI and the compatibility
 * subpaths) and the workspaces under packages/ — the source import graph is walked from the package's
 * entry points (the `exports` and `bin` targets mapped back to their .ts sources, or a workspace's
 * build inputs, the `files` of packages/<name>/tsconfig.json), type-only imports and
 * `new URL('./worker.js', import.meta.url)` workers included. Then:
 *
 * - every external bare specifier it reaches is declared (a dependency or a peer; for the bundled
 *   client, a peer or a devDependency that the bundle carries), Node's built-ins aside;
 * - every declared dependency and peer is imported somewhere in that graph, or is a required peer of
 *   another dependency (`@opentelemetry/api` for the OpenTelemetry SDK);
 * - the client declares no runtime dependency at all and its graph has no `node:` import;
 * - the workspaces are exactly packages/*, and every package carries the root's version (lockstep).
 *
 * The self-check runs the same comparison over a synthetic tree, so the test is shown to fail.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { blank, resolveSpecifier, specifiers } from './import-graph.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The parts of a package.json this test reads. */
interface Manifest {
  name: string;
  version: string;
  workspaces?: string[];
  exports?: Record<string, string | Record<string, string>>;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

/** What a package's graph imports from outside the repository, by package name → the files that import it. */
export type External = Map<string, Set<string>>;

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or undefined for a Node built-in. */
export function packageOf(spec: string): string | undefined {
  if (spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0]!)) return undefined;
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * The specifiers of `new URL('<relative>.js', import.meta.url)` in `src`: compiled worker entry points
 * (a `.mjs` development shim beside them, which tsc does not ship, is not one).
 */
function workerSpecifiers(src: string): string[] {
  const { code, literals } = blank(src);
  return [...code.matchAll(/new\s+URL\s*\(\s*'#(\d+)'\s*,\s*import\.meta\.url\s*\)/g)].map((m) => literals[Number(m[1])]!)
    .filter((s) => (s.startsWith('./') || s.startsWith('../')) && s.endsWith('.js'));
}

/** The non-optional peer dependencies of the installed package `name` (what it needs its dependent to provide). */
function peersOf(repo: string, name: string): string[] {
  const file = path.join(repo, 'node_modules', name, 'package.json');
  if (!fs.existsSync(file)) return [];
  type Peers = { peerDependencies?: Record<string, string>; peerDependenciesMeta?: Record<string, { optional?: boolean }> };
  const m = JSON.parse(fs.readFileSync(file, 'utf8')) as Peers;
  return Object.keys(m.peerDependencies ?? {}).filter((p) => m.peerDependenciesMeta?.[p]?.optional !== true);
}

/**
 * Walks the import graph of `repo` from `entries` (repository-relative .ts/.mjs files): the files
 * reached and the external packages they import (type-only imports included: a .d.ts keeps them).
 */
export function walk(repo: string, entries: readonly string[]): { files: Set<string>; external: External; unresolved: string[] } {
  const exists = (f: string): boolean => fs.existsSync(path.join(repo, f)) && fs.statSync(path.join(repo, f)).isFile();
  const files = new Set<string>();
  const external: External = new Map();
  const unresolved: string[] = [];
  const queue = [...entries];
  for (let steps = 0; queue.length > 0; steps++) {
    if (steps > 10_000) throw new Error('package-deps: the import graph does not end');
    const file = queue.pop()!;
    if (files.has(file)) continue;
    if (!exists(file)) { unresolved.push(`entry ${file}`); continue; }
    files.add(file);
    const src = fs.readFileSync(path.join(repo, file), 'utf8');
    for (const spec of [...specifiers(src), ...workerSpecifiers(src)]) {
      if (spec.startsWith('./') || spec.startsWith('../')) {
        const target = resolveSpecifier(file, spec, exists);
        if (target) queue.push(target);
        else unresolved.push(`${file}: '${spec}'`);
        continue;
      }
      const pkg = packageOf(spec);
      if (pkg === undefined) continue;
      if (!external.has(pkg)) external.set(pkg, new Set());
      external.get(pkg)!.add(file);
    }
  }
  return { files, external, unresolved };
}

/** The .ts source of a built file named in a manifest (`./dist/a/b.js` → `a/b.ts`), or of the files a bin imports. */
function sourcesOf(repo: string, pkgDir: string, target: string): string[] {
  const rel = path.posix.normalize(path.posix.join(pkgDir, target));
  const built = /^(?:packages\/[^/]+\/)?dist\/(.+)\.js$/.exec(rel);
  if (built) return [`${built[1]}.ts`];
  if (rel.endsWith('.mjs')) {
    // A bin: the compiled files it imports, mapped back to their sources.
    return specifiers(fs.readFileSync(path.join(repo, rel), 'utf8')).flatMap((s) => sourcesOf(repo, path.posix.dirname(rel), s));
  }
  return [];
}

/** One package: its folder, manifest and entry points. */
interface Pkg { dir: string; manifest: Manifest; entries: string[] }

/** The repository's packages: the root and each workspace. */
function packages(repo: string): Pkg[] {
  const read = (dir: string): Manifest => JSON.parse(fs.readFileSync(path.join(repo, dir, 'package.json'), 'utf8')) as Manifest;
  const root = read('.');
  const out: Pkg[] = [];
  const targets = (m: Manifest): string[] => [
    ...Object.values(m.exports ?? {}).flatMap((v) => (typeof v === 'string' ? [v] : Object.values(v))).filter((v) => v.endsWith('.js')),
    ...Object.values(m.bin ?? {}),
  ];
  out.push({ dir: '.', manifest: root, entries: [...new Set(targets(root).flatMap((f) => sourcesOf(repo, '', f)))] });
  for (const dir of root.workspaces ?? []) {
    const m = read(dir);
    const tsconfig = JSON.parse(fs.readFileSync(path.join(repo, dir, 'tsconfig.json'), 'utf8')) as { files: string[] };
    out.push({ dir, manifest: m, entries: tsconfig.files.map((f) => path.posix.normalize(path.posix.join(dir, f))) });
  }
  return out;
}

/**
 * What is wrong with one package's declared dependencies, as sentences. A declared dependency nothing
 * imports is allowed only as a required peer of another dependency (`peersOf`: the package provides it).
 */
export function mismatches(pkg: Pkg, external: External, peersOf: (name: string) => string[] = () => []): string[] {
  const m = pkg.manifest;
  const bundled = pkg.dir === 'packages/client';
  const deps = Object.keys(m.dependencies ?? {});
  const peers = Object.keys(m.peerDependencies ?? {});
  const allowed = new Set([...deps, ...peers, ...(bundled ? Object.keys(m.devDependencies ?? {}) : [])]);
  const out: string[] = [];
  for (const [name, by] of [...external].sort()) {
    const where = [...by].sort().slice(0, 2).join(', ');
    if (!allowed.has(name) && name !== m.name) out.push(`${m.name} imports ${name} (${where}) but does not declare it`);
  }
  const provided = new Set(deps.flatMap((d) => peersOf(d)));
  for (const name of [...allowed].sort()) {
    if (!external.has(name) && !provided.has(name)) out.push(`${m.name} declares ${name} but nothing it ships imports it`);
  }
  if (bundled && deps.length > 0) out.push(`${m.name} must have no runtime dependency, has ${deps.join(', ')}`);
  return out;
}

t.test('every package declares exactly what its entry points import', async (t) => {
  const all = packages(REPO);
  t.same(all.map((p) => p.manifest.name), ['agent-authz', '@agent-authz/client', '@agent-authz/gateway', '@agent-authz/receiver']);
  for (const pkg of all) {
    const { files, external, unresolved } = walk(REPO, pkg.entries);
    t.ok(pkg.entries.length >= 1 && files.size >= pkg.entries.length + 2, `${pkg.manifest.name}: ${pkg.entries.length} entries, ${files.size} files`);
    t.same(unresolved, [], `${pkg.manifest.name}: every entry and relative import names a file`);
    const used = [...external.keys()].sort().join(', ');
    t.same(mismatches(pkg, external, (name) => peersOf(REPO, name)), [], `${pkg.manifest.name}: dependencies = [${used}]`);
  }
});

t.test('the client: no runtime dependency, no node: import, only the MCP SDK outside', async (t) => {
  const client = packages(REPO).find((p) => p.dir === 'packages/client')!;
  t.same(client.manifest.dependencies ?? {}, {}, 'no dependencies');
  const { files, external } = walk(REPO, client.entries);
  const nodeImports = [...files].flatMap((f) => specifiers(fs.readFileSync(path.join(REPO, f), 'utf8'))
    .filter((s) => packageOf(s) === undefined && !s.startsWith('.')).map((s) => `${f}: ${s}`));
  t.same(nodeImports, [], 'no Node built-in anywhere in its graph');
  t.same([...external.keys()].sort(), ['@modelcontextprotocol/sdk', '@noble/hashes'], 'the MCP SDK (optional peer) and the bundled hash');
  const fetchOnly = walk(REPO, ['client/index.ts']);
  t.same([...fetchOnly.external.keys()], ['@noble/hashes'], 'the fetch entry reaches no MCP SDK');
});

t.test('the gateway and the receiver carry no native addon, mailer or post-quantum library', async (t) => {
  for (const dir of ['packages/gateway', 'packages/receiver']) {
    const pkg = packages(REPO).find((p) => p.dir === dir)!;
    const runtime = Object.keys(pkg.manifest.dependencies ?? {});
    t.same(runtime.filter((d) => /^(better-sqlite3|nodemailer|@noble\/post-quantum|pg)$/.test(d)), [], `${pkg.manifest.name}: none in dependencies`);
    const { external } = walk(REPO, pkg.entries);
    t.notOk(external.has('@noble/post-quantum') || external.has('nodemailer'), `${pkg.manifest.name}: none in its graph`);
  }
});

t.test('the workspaces are packages/*, all at the root version (lockstep)', async (t) => {
  const root = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')) as Manifest;
  const dirs = fs.readdirSync(path.join(REPO, 'packages')).filter((d) => fs.existsSync(path.join(REPO, 'packages', d, 'package.json')));
  t.same([...(root.workspaces ?? [])].sort(), dirs.map((d) => `packages/${d}`).sort(), 'every packages/* folder is a workspace');
  for (const p of packages(REPO)) t.equal(p.manifest.version, root.version, `${p.manifest.name}@${p.manifest.version}`);
});

t.test('self-check: an undeclared import, an unused declaration and a client dependency are reported', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'package-deps-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (f: string, s: string): void => {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), s);
  };
  write('client/index.ts', "import { x } from '../src/a.js';\nimport type { Y } from 'typed-only';\nexport const z = x;\n");
  write('src/a.ts', "import 'left-pad/x.js';\nimport fs from 'node:fs';\nexport const x = new URL('./w.js', import.meta.url) && fs;\n");
  write('src/w.ts', "import { h } from '@scope/worker-lib/sub';\nexport default h;\n");
  const { files, external, unresolved } = walk(dir, ['client/index.ts']);
  t.same([...files].sort(), ['client/index.ts', 'src/a.ts', 'src/w.ts'], 'relative imports and workers are followed');
  t.same(unresolved, []);
  t.same([...external.keys()].sort(), ['@scope/worker-lib', 'left-pad', 'typed-only'], 'bare specifiers by package, built-ins aside');
  const pkg: Pkg = {
    dir: 'packages/client', entries: ['client/index.ts'],
    manifest: { name: 'c', version: '1.0.0', dependencies: { 'left-pad': '1' }, peerDependencies: { 'typed-only': '1', unused: '1' } },
  };
  t.same(mismatches(pkg, external), [
    'c imports @scope/worker-lib (src/w.ts) but does not declare it',
    'c declares unused but nothing it ships imports it',
    'c must have no runtime dependency, has left-pad',
  ]);
  t.same(mismatches({ ...pkg, dir: '.' }, external, (n) => (n === 'left-pad' ? ['unused'] : [])), [
    'c imports @scope/worker-lib (src/w.ts) but does not declare it',
  ], 'a required peer of a dependency may be declared without an import; outside the client, dependencies are fine');
});
