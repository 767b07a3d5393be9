/**
 * The AuthZEN rows of the benchmark table (bench/authzen-report.ts through
 * report.ts) on made-up figures: items per second per batch size, the c=1 p50
 * ratio to the interleaved verify (else the verify step's c=1), the batch of
 * 100 against verify's best level; and the request bodies bench/authzen.ts
 * sends (batch sizes, execute_all, the --only=authzen part).
 */
import t from 'tap';
import { summarize } from '../../bench/load.js';
import { renderTable } from '../../bench/report.js';
import type { BackendResults, Results } from '../../bench/report.js';
import { batchBody, evaluationBody } from '../../bench/authzen.js';
import { SECTIONS, parsePlan } from '../../bench/plan.js';
import type { Setup } from '../../bench/flow.js';

/** A load result of `n` requests all at `us` µs over `seconds`, at concurrency `c`. */
const load = (n: number, us: number, seconds: number, c: number, errors = 0) =>
  summarize(new Float64Array(n).fill(us), seconds, c, errors);

function results(b: BackendResults): Results {
  return {
    meta: {
      date: '2026-11-28T00:00:00.000Z', smoke: false, full: false, scale: 1, command: 'npm run bench', sections: ['authzen'],
      backends: ['native'], machine: { nproc: 2, cpuModel: 'test', memGb: 1, loadAvg: [0, 0, 0] }, node: { loadGenerator: 'v20' },
      durationS: 1,
    },
    backends: { native: b },
  };
}

const row = (table: string, label: string): string | undefined =>
  table.split('\n').find((l) => l.startsWith(`| ${label} `))?.split('|')[2]?.trim();

t.test('the AuthZEN rows: items/s per batch size and the ratios to verify', async (t) => {
  const b: BackendResults = {
    verify: [load(100, 4000, 1, 1), load(800, 20_000, 1, 16), load(600, 90_000, 1, 64)],
    authzen: {
      evalC1: load(500, 2000, 1, 1), verifyC1: load(200, 5000, 1, 1), rounds: 3, concurrency: 4,
      batches: [
        { size: 1, load: load(400, 9000, 1, 4), itemsPerSec: 400, cpuMsPerItem: 1.2 },
        { size: 10, load: load(90, 40_000, 1, 4), itemsPerSec: 900, cpuMsPerItem: 0.6 },
        { size: 100, load: load(12, 300_000, 1, 4, 1), itemsPerSec: 1200, cpuMsPerItem: 0.5 },
      ],
    },
  };
  const table = renderTable(results(b));
  t.match(table, /^\| \*\*AuthZEN grant checks \(no proof\) .* batches \(execute_all\) at c=4\*\*/m);
  t.equal(row(table, 'AuthZEN evaluation c=1'), '500/s · 2,000 / 2,000 / 2,000 µs');
  t.equal(row(table, 'Verify c=1 in rounds interleaved with it'), '200/s · 5,000 / 5,000 / 5,000 µs');
  t.equal(row(table, 'AuthZEN evaluation c=1 p50 ÷ verify c=1 p50 (interleaved; else the verify step)'), '0.40 (2,000 ÷ 5,000 µs)');
  t.equal(row(table, 'AuthZEN evaluations, batch of 1'), '400 items/s (400 req/s · p50 9,000 µs; CPU 1.200 ms/item)');
  t.equal(row(table, 'AuthZEN evaluations, batch of 10'), '900 items/s (90 req/s · p50 40,000 µs; CPU 0.600 ms/item)');
  t.equal(row(table, 'AuthZEN evaluations, batch of 100'), '1,200 items/s (12 req/s · p50 300,000 µs; CPU 0.500 ms/item) (1 err)');
  t.equal(row(table, 'AuthZEN batch of 100 items/s ÷ verify req/s (best level of the verify step)'), '1.50 (1,200 ÷ 800/s at c=16)');

  // Without the interleaved verify (smoke runs): the ratio uses the verify step's c=1 and says so.
  const smoke = renderTable(results({ ...b, authzen: { ...b.authzen!, verifyC1: undefined } }));
  t.equal(row(smoke, 'AuthZEN evaluation c=1 p50 ÷ verify c=1 p50 (interleaved; else the verify step)'), '0.50 (2,000 ÷ 4,000 µs, verify step)');
  t.equal(row(smoke, 'Verify c=1 in rounds interleaved with it'), '—');
  // Without verify at all (--only=authzen): no ratio, no NaN.
  const alone = renderTable(results({ authzen: { ...b.authzen!, verifyC1: undefined } }));
  t.equal(row(alone, 'AuthZEN batch of 100 items/s ÷ verify req/s (best level of the verify step)'), '—');
  t.notMatch(alone, /NaN/);
  // No AuthZEN figures: no AuthZEN rows.
  t.notMatch(renderTable(results({ verify: b.verify })), /AuthZEN/);
});

t.test('the bodies: one grant check, and batches of n items with execute_all', async (t) => {
  const s = { agentId: 'agt_1', scope: 'data:read' } as Setup;
  t.same(evaluationBody(s), { subject: { type: 'agent', id: 'agt_1' }, action: { name: 'data:read' }, resource: { type: 'http', id: 'GET /v1/orders' } });
  for (const n of [1, 10, 100]) {
    const body = batchBody(s, n) as { evaluations: { resource: { id: string } }[]; options: unknown; subject: unknown };
    t.equal(body.evaluations.length, n);
    t.same(body.options, { evaluations_semantic: 'execute_all' });
    t.same(body.subject, { type: 'agent', id: 'agt_1' });
    t.equal(new Set(body.evaluations.map((e) => e.resource.id)).size, n, 'each item on its own resource');
    t.notMatch(JSON.stringify(body), /proof/, 'no proof: a grant check');
  }
  t.ok(SECTIONS.includes('authzen'));
  t.same([...parsePlan(['--only=authzen']).sections], ['authzen']);
  t.ok(parsePlan([]).sections.has('authzen'), 'in the default run');
  t.ok(parsePlan(['--smoke']).sections.has('authzen'), 'in the smoke run');
  t.same(parsePlan(['--scale=0.2']).authzen.batchSizes, [1, 10, 100]);
});
