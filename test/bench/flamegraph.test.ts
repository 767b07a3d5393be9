/**
 * The benchmark's flame graphs (bench/flamegraph.ts) on a hand-made V8 CPU
 * profile: times per call path, idle left out, the time window, merged
 * paths, and an SVG whose boxes have the widths and names of the tree.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { flameTree, renderFlameGraph, writeFlameGraph } from '../../bench/flamegraph.js';
import type { FlameNode } from '../../bench/flamegraph.js';
import type { CpuProfile } from '../../bench/profile.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const own = `file://${ROOT}/sidecar/decide/pipeline.ts`;
const frame = (functionName: string, url = '', lineNumber = 0) => ({ functionName, url, lineNumber, scriptId: '0', columnNumber: 0 });

/**
 * (root) → run (own) → parse (npm) ; run → write (node) ; (root) → (idle) ; (root) → (garbage collector);
 * (root) → run (own, a second node for the same frame: merged with the first).
 */
function profile(): CpuProfile {
  const nodes = [
    { id: 1, callFrame: frame('(root)'), children: [2, 5, 6, 7] },
    { id: 2, callFrame: frame('run', own, 10), children: [3, 4] },
    { id: 3, callFrame: frame('parse', `file://${ROOT}/node_modules/secure-json-parse/index.js`, 16) },
    { id: 4, callFrame: frame('write<>&', 'node:internal/stream_base_commons', 122) },
    { id: 5, callFrame: frame('(idle)') },
    { id: 6, callFrame: frame('(garbage collector)') },
    { id: 7, callFrame: frame('run', own, 10) },
  ];
  // Each sample weighs the delta to the next one; every delta is 100 µs.
  const samples = [2, 3, 3, 4, 5, 5, 6, 7, 2, 3];
  return { nodes, startTime: 0, endTime: 1000, samples, timeDeltas: samples.map(() => 100) } as CpuProfile;
}

const find = (n: FlameNode, name: string): FlameNode | undefined => n.name === name ? n : n.children.map((c) => find(c, name)).find(Boolean);

t.test('the tree adds up sample times per call path, without idle time', async (t) => {
  const root = flameTree(profile());
  t.equal(root.total, 800, '8 of 10 samples are busy');
  t.same(root.children.map((c) => c.name).sort(), ['(garbage collector)', 'run sidecar/decide/pipeline.ts'], '(root) is left out; both run nodes merge');
  const run = find(root, 'run sidecar/decide/pipeline.ts')!;
  t.equal(run.total, 700);
  t.equal(run.self, 300, 'three samples in run itself (one through the second node)');
  t.equal(run.kind, 'own');
  const parse = find(root, 'parse secure-json-parse/index.js:17')!;
  t.equal(parse.total, 300);
  t.equal(parse.kind, 'npm');
  t.equal(find(root, 'write<>& node:internal/stream_base_commons:123')?.kind, 'node');
  t.equal(find(root, '(garbage collector)')?.kind, 'native');
});

t.test('the window keeps only the samples inside it', async (t) => {
  // Samples at t = 100 … 1000; 500 µs before the end up to the end: t ≥ 500 (samples 5–10).
  const root = flameTree(profile(), { fromEndUs: [500, 0] });
  t.equal(root.total, 400, 'idle at 500 and 600 is dropped: gc, run, run, parse');
  t.equal(find(root, 'run sidecar/decide/pipeline.ts')?.total, 300);
});

t.test('the SVG has one box per path, widths in proportion, names escaped', async (t) => {
  const svg = renderFlameGraph(flameTree(profile()), { title: 'test <graph>', width: 820 });
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.match(svg, /test &#60;graph&#62;/, 'the title is escaped');
  t.notMatch(svg, /write<>&/, 'frame names are escaped');
  t.match(svg, /write&#60;&#62;&#38;/);
  const widths = [...svg.matchAll(/<title>([^<]*)<\/title><rect [^>]*width="([\d.]+)"/g)].map((m) => [m[1]!.split(' — ')[0], Number(m[2])] as const);
  const w = new Map(widths);
  t.equal(widths.length, 5, 'all, run, parse, write, gc');
  t.equal(w.get('all'), 800, 'the whole width less the margins');
  t.equal(w.get('run sidecar/decide/pipeline.ts'), 700);
  t.equal(w.get('parse secure-json-parse/index.js:17'), 300);
  t.equal(w.get('(garbage collector)'), 100);
  t.match(svg, /busy 1 ms/);
});

t.test('writeFlameGraph reads a .cpuprofile file', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flame-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'x.cpuprofile');
  fs.writeFileSync(file, JSON.stringify(profile()));
  writeFlameGraph(file, path.join(dir, 'x.svg'), { title: 'x' });
  const svg = fs.readFileSync(path.join(dir, 'x.svg'), 'utf8');
  t.match(svg, /<\/svg>\n$/);
  t.match(svg, /x\.cpuprofile/, 'the file name is the default subtitle');
});
