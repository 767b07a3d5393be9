/**
 * The sub-delegation chain rows of the benchmark table (bench/chains-report.ts through report.ts)
 * on made-up figures: each depth's c=1 p50 / p99, throughput and CPU per verify, and its ratios
 * to depth 0; no ratio and no NaN where a depth is missing; the `--only=chains` part in the plan.
 */
import t from 'tap';
import { summarize } from '../../bench/load.js';
import { renderTable } from '../../bench/report.js';
import type { BackendResults, Results } from '../../bench/report.js';
import { chainCell } from '../../bench/chains-report.js';
import { SECTIONS, parsePlan } from '../../bench/plan.js';

/** A load result of `n` requests all at `us` µs over `seconds`, at concurrency `c`. */
const load = (n: number, us: number, seconds: number, c: number, errors = 0) =>
  summarize(new Float64Array(n).fill(us), seconds, c, errors);

function results(b: BackendResults): Results {
  return {
    meta: {
      date: '2026-11-28T00:00:00.000Z', smoke: false, full: false, scale: 1, command: 'npm run bench', sections: ['chains'],
      backends: ['native'], machine: { nproc: 2, cpuModel: 'test', memGb: 1, loadAvg: [0, 0, 0] }, node: { loadGenerator: 'v20' },
      durationS: 1,
    },
    backends: { native: b },
  };
}

const row = (table: string, label: string): string | undefined =>
  table.split('\n').find((l) => l.startsWith(`| ${label} `))?.split('|')[2]?.trim();

t.test('the chain rows: figures per depth and the ratios to depth 0', async (t) => {
  const depth = (d: number, us: number, n: number, cpu: number, errors = 0) =>
    ({ depth: d, c1: load(100, us, 1, 1), cN: load(n, us * 8, 1, 16, errors), cpuMsPerVerify: cpu });
  const chains = { concurrency: 16, rounds: 3, depths: [depth(0, 2000, 1000, 0.5), depth(1, 2200, 900, 0.55),
    depth(3, 2500, 800, 0.6), depth(8, 3000, 500, 1, 2)] };
  const table = renderTable(results({ chains }));
  t.match(table, /\*\*Sub-delegation chains — .*c=16 req\/s/, 'section title names the concurrency');
  t.equal(row(table, 'Chain depth 0 (the root certificate: the baseline)'), '2,000 / 2,000 µs · 1,000/s · 0.500 ms');
  t.equal(row(table, 'Chain depth 1 (1 link below the root)'),
    '2,200 (×1.10) / 2,200 (×1.10) µs · 900/s (×0.90) · 0.550 ms (×1.10)');
  t.equal(row(table, 'Chain depth 8 (8 links below the root)'),
    '3,000 (×1.50) / 3,000 (×1.50) µs · 500/s (×0.50) · 1.000 ms (×2.00) (2 err)', 'errors shown');
  t.notMatch(table, /NaN/);
  // Without the baseline: figures, no ratios.
  t.equal(chainCell({ ...chains, depths: chains.depths.slice(1) }, 3), '2,500 / 2,500 µs · 800/s · 0.600 ms');
  t.equal(chainCell(undefined, 3), '—');
  t.notMatch(renderTable(results({})), /Sub-delegation chains/, 'no section without the step');
});

t.test('the chains part in the plan', async (t) => {
  t.ok(SECTIONS.includes('chains'));
  t.same([...parsePlan(['--only=chains']).sections], ['chains']);
  t.ok(parsePlan([]).sections.has('chains'), 'in the default run');
  t.ok(parsePlan(['--smoke']).sections.has('chains'), 'in the smoke run');
  t.same(parsePlan(['--scale=0.2']).chains.depths, [1, 3, 8], 'the depths are never scaled');
  t.ok(parsePlan(['--smoke']).chains.c1Seconds <= 0.2, 'tiny in the smoke run');
  t.same(parsePlan(['--smoke']).chains.depths, [8], 'the smoke run builds only the deepest chain');
});
