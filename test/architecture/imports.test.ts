/**
 * The import rules of the project, checked over the real import graph of
 * every source file under src/, runtime/, sidecar/, gateway-plugin/,
 * receiver/ (and client/ when it exists), type-only imports included:
 *
 * - src/ is the pure core: it imports nothing from the services, runtime/ or
 *   the libraries;
 * - gateway-plugin/ imports nothing from sidecar/ (a gateway user installs no sidecar);
 * - runtime/ (shared by both services) imports neither service;
 * - no import circles (the failure names the circle's path).
 *
 * The self-checks run the same checks over synthetic graphs and a synthetic
 * source tree in a temporary folder, so the test is shown to fail when a rule
 * is broken.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { blank, buildGraph, findCycles, ruleViolations, sourceFiles, specifiers } from './import-graph.js';
import type { ImportGraph, ImportRule } from './import-graph.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROOTS = ['src', 'runtime', 'sidecar', 'gateway-plugin', 'receiver', 'client'] as const;

/** The project's rules. */
const RULES: readonly ImportRule[] = [
  { from: 'src', to: ['sidecar', 'gateway-plugin', 'runtime', 'receiver', 'client'], why: 'src/ is the pure core' },
  { from: 'gateway-plugin', to: ['sidecar'], why: 'the gateway does not import the sidecar' },
  { from: 'runtime', to: ['sidecar', 'gateway-plugin'], why: 'runtime/ is shared by both services' },
];

/** Everything wrong with a source tree: unresolved specifiers, broken rules, circles. */
function problems(repo: string): { files: number; edges: number; unresolved: string[]; violations: string[]; cycles: string[] } {
  const files = sourceFiles(repo, ROOTS);
  const { graph, unresolved } = buildGraph(repo, files);
  let edges = 0;
  for (const e of graph.values()) edges += e.size;
  return { files: files.length, edges, unresolved, violations: ruleViolations(graph, RULES), cycles: findCycles(graph).map((c) => c.join(' → ')) };
}

t.test('the project keeps its import rules', async (t) => {
  const p = problems(REPO);
  // Guards against a scanner that silently finds nothing.
  t.ok(p.files >= 80, `${p.files} source files scanned`);
  t.ok(p.edges >= 200, `${p.edges} relative imports read`);
  t.same(p.unresolved, [], 'every relative import names a file');
  t.same(p.violations, [], 'no import crosses a forbidden boundary');
  t.same(p.cycles, [], 'no import circles');
});

t.test('the decision pipeline is reachable and imports nothing from http/', async (t) => {
  const { graph } = buildGraph(REPO, sourceFiles(REPO, ROOTS));
  const decide = [...graph.keys()].filter((f) => f.startsWith('sidecar/decide/'));
  t.ok(decide.length >= 3, 'the decide/ files are in the graph');
  const rules: ImportRule[] = [{ from: 'sidecar/decide', to: ['sidecar/http', 'sidecar/routes'], why: 'decide/ is not HTTP' }];
  t.same(ruleViolations(graph, rules), [], 'decide/ imports nothing from http/ or routes/');
});

t.test('self-check: a broken rule and a circle are reported', async (t) => {
  const g: ImportGraph = new Map([
    ['src/a.ts', new Set(['src/b.ts'])],
    ['src/b.ts', new Set(['sidecar/x.ts'])],
    ['sidecar/x.ts', new Set(['sidecar/y.ts'])],
    ['sidecar/y.ts', new Set(['sidecar/z.ts', 'src/a.ts'])],
    ['sidecar/z.ts', new Set(['sidecar/x.ts'])],
    ['gateway-plugin/g.ts', new Set(['src/a.ts', 'sidecar/z.ts'])],
    ['receiver/r.ts', new Set(['receiver/r.ts'])],
  ]);
  t.same(ruleViolations(g, RULES), [
    'gateway-plugin/g.ts → sidecar/z.ts (the gateway does not import the sidecar)',
    'src/b.ts → sidecar/x.ts (src/ is the pure core)',
  ]);
  const cycles = findCycles(g).map((c) => c.join(' → ')).sort();
  t.same(cycles, [
    'receiver/r.ts → receiver/r.ts',
    'sidecar/x.ts → sidecar/y.ts → sidecar/z.ts → sidecar/x.ts',
  ], 'one circle per tangle of files, the shortest back to its first file');
  const acyclic: ImportGraph = new Map([['a.ts', new Set(['b.ts', 'c.ts'])], ['b.ts', new Set(['c.ts'])], ['c.ts', new Set()]]);
  t.same(findCycles(acyclic), [], 'a diamond is no circle');
  // A long chain closed at its end: the iterative walk neither overflows nor misses it.
  const chain: ImportGraph = new Map();
  for (let i = 0; i < 20_000; i++) chain.set(`f${i}.ts`, new Set([`f${(i + 1) % 20_000}.ts`]));
  const [long] = findCycles(chain);
  t.equal(long?.length, 20_001, 'a 20,000-file circle');
});

t.test('self-check: a synthetic tree with a type-only violation and a circle fails', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'import-graph-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (file: string, text: string): void => {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  };
  write('src/core.ts', "import type { Ctx } from '../sidecar/context.js';\nexport const x = 1 as unknown as Ctx;\n");
  write('sidecar/context.ts', "import type { Cache } from './decide/cache.js';\nexport interface Ctx { cache: Cache }\n");
  write('sidecar/decide/cache.ts', "import type { Auth } from '../http/auth.js';\nexport type Cache = Map<string, Auth>;\n");
  write('sidecar/http/auth.ts', "import type { Ctx } from '../context.js';\nexport type Auth = (c: Ctx) => void;\n");
  write('gateway-plugin/index.ts', "export async function f() { return import('../sidecar/context.js'); }\n");
  write('receiver/index.ts', "import { nope } from './missing.js';\n");
  const p = problems(dir);
  t.same(p.violations, [
    'gateway-plugin/index.ts → sidecar/context.ts (the gateway does not import the sidecar)',
    'src/core.ts → sidecar/context.ts (src/ is the pure core)',
  ], 'type-only and dynamic imports count');
  t.same(p.cycles, ['sidecar/context.ts → sidecar/decide/cache.ts → sidecar/http/auth.ts → sidecar/context.ts'], 'the circle, named by its path');
  t.same(p.unresolved, ["receiver/index.ts: './missing.js'"], 'an import of a missing file is reported');
});

t.test('the scanner reads imports, not comments or strings', async (t) => {
  const src = [
    '/** @example',
    " * import { nope } from './commented.js';",
    ' */',
    "// import './line-comment.js';",
    "import type { A } from './a.js';",
    "import b, { type C } from './b.js';",
    'import {',
    '  d,',
    '  e,',
    "} from '../d.js';",
    "import './side-effect.js';",
    "export * from './star.js';",
    "export { f } from './f.js';",
    "const s = \"import x from './in-string.js'\";",
    "const u = `import y from './in-template.js' ${'x'}`;",
    "const re = /from '.\\/in-regex.js'/;",
    "const q = 'it\\'s from here';",
    "type T = import('./type-query.js').T;",
    "const lazy = await import('./dynamic.js');",
    "const r = require('./required.cjs');",
    'const ratio = a / b / c;',
    "export type { G } from './g.js';",
  ].join('\n');
  t.same(specifiers(src), [
    './a.js', './b.js', '../d.js', './side-effect.js', './star.js', './f.js',
    './type-query.js', './dynamic.js', './required.cjs', './g.js',
  ]);
  const { code, literals } = blank("const a = 'x'; // c\nconst b = `t${1}`;");
  t.notOk(code.includes('// c'), 'comments are blanked');
  t.same(literals, ['x'], 'string contents are kept apart');
});
