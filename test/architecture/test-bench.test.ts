/**
 * test/ and bench/ import each other only through test/shared/, the helpers both use (a
 * throwaway PostgreSQL, the Node 24 better-sqlite3 build, the front proxies' configs). So a
 * benchmark never runs a test harness and a test never depends on how a benchmark is written.
 *
 * - a file of test/ outside test/shared/ and test/bench/ imports nothing of bench/;
 *   test/bench/ holds the bench code's own tests, which import the code they test;
 * - a file of bench/ imports nothing of test/ outside test/shared/;
 * - test/shared/ imports nothing of test/ outside itself and nothing of bench/, so what the
 *   benchmark loads through it stays small.
 *
 * Imports are read by the scanner of the import-graph test (static, type-only, dynamic).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { buildGraph, sourceFiles } from './import-graph.js';
import type { ImportGraph } from './import-graph.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The one folder both sides may import. */
export const SHARED = 'test/shared';
/** The tests of the bench code, which import the code they test. */
const BENCH_TESTS = 'test/bench';

const under = (file: string, folder: string): boolean => file.startsWith(`${folder}/`);

/** The imports that cross between test/ and bench/ other than through {@link SHARED}, as `a → b`. */
export function crossings(graph: ImportGraph): string[] {
  const out: string[] = [];
  for (const [file, edges] of graph) {
    for (const target of edges) {
      const toBench = under(target, 'bench');
      const toTest = under(target, 'test') && !under(target, SHARED);
      let bad = false;
      if (under(file, SHARED)) bad = toBench || toTest;
      else if (under(file, BENCH_TESTS)) bad = false;
      else if (under(file, 'test')) bad = toBench;
      else if (under(file, 'bench')) bad = toTest;
      if (bad) out.push(`${file} → ${target}`);
    }
  }
  return out.sort();
}

t.test('test/ and bench/ meet only in test/shared/', async (t) => {
  const files = sourceFiles(REPO, ['test', 'bench']).filter((f) => !f.startsWith('test/sidecar/ops/generated-client/'));
  const { graph, unresolved } = buildGraph(REPO, files);
  t.ok(files.filter((f) => under(f, 'bench')).length >= 20, 'the bench files are scanned');
  t.ok(files.filter((f) => under(f, SHARED)).length >= 3, 'the shared folder is scanned');
  t.ok([...graph].some(([f, e]) => under(f, 'bench') && [...e].some((x) => under(x, SHARED))), 'bench/ does use test/shared/');
  t.same(unresolved, [], 'every relative import names a file');
  t.same(crossings(graph), [], 'no import crosses between test/ and bench/ outside test/shared/');
});

t.test('the rule names each kind of crossing', async (t) => {
  const graph: ImportGraph = new Map([
    ['test/helpers/pg.ts', new Set(['bench/pg-server.ts', 'test/shared/pg-server.ts'])],
    ['bench/agents.ts', new Set(['test/gateway-plugin/proxies.ts', 'test/shared/proxy-configs.ts', 'src/a.ts'])],
    ['test/shared/x.ts', new Set(['test/helpers/net.ts', 'bench/common.ts', 'test/shared/y.ts'])],
    ['test/bench/report.test.ts', new Set(['bench/report.ts'])],
  ]);
  t.same(crossings(graph), [
    'bench/agents.ts → test/gateway-plugin/proxies.ts',
    'test/helpers/pg.ts → bench/pg-server.ts',
    'test/shared/x.ts → bench/common.ts',
    'test/shared/x.ts → test/helpers/net.ts',
  ]);
});
