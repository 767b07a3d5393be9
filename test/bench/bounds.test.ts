/**
 * The CPU bounds of the gateway targets (bench/bounds.ts) and the gateway
 * targets measured against them, on hand-made results.
 */
import t from 'tap';
import { gatewayBounds, pathCpuMs } from '../../bench/bounds.js';
import { evaluateTargets, renderTable } from '../../bench/report.js';
import type { BackendResults, Results } from '../../bench/report.js';
import type { LoadResult } from '../../bench/load.js';

const load = (rps: number, p99 = 10_000): LoadResult => ({
  concurrency: 50, count: 1000, errors: 0, firstError: undefined, elapsedS: 1, rps, p50: 5000, p90: 8000, p99, p999: p99, mean: 5000, max: p99, samples: new Float64Array(0),
});

function backend(gatewayRps: number): BackendResults {
  return {
    ceiling: { node: 'v24', verifyPerSec: 5000, verifyUs: 190, signPerSec: 1400, signUs: 700, verifyCpuUs: 190, signCpuUs: 700, cpuShare: 1 },
    gateway: {
      plain: { c50: load(24_000), c1: load(5000), cpuMsPerReq: { server: 0.04, upstream: 0.02, loadGen: 0.02 } },
      jose: { c50: load(9_800), c1: load(3000), cpuMsPerReq: { server: 0.13, upstream: 0.02, loadGen: 0.02 } },
      hop: { c50: load(11_000), c1: load(3000), cpuMsPerReq: { server: 0.085, upstream: 0.02, loadGen: 0.03, sidecar: 0.017 } },
      stub: { c50: load(7_000), c1: load(2000), cpuMsPerReq: { server: 0.14, upstream: 0.02, loadGen: 0.033, sidecar: 0.033 } },
      gateway: { c50: load(gatewayRps, 38_000), c1: load(1000), cpuMsPerReq: { server: 0.18, upstream: 0.024, loadGen: 0.045, sidecar: 0.36 } },
      direct: { c50: load(60_000), c1: load(10_000), cpuMsPerReq: { server: 0.013, upstream: 0.013, loadGen: 0.016 } },
    },
  };
}

function results(b: BackendResults, smoke = false): Results {
  return {
    meta: {
      date: '2026-11-23T00:00:00.000Z', smoke, full: false, scale: 1, command: 'npm run bench', sections: ['gateway'], backends: ['native'],
      machine: { nproc: 2, cpuModel: 'test', memGb: 1, loadAvg: [0, 0, 0] }, node: { loadGenerator: 'v20' }, durationS: 1,
    },
    backends: { native: b },
  };
}

t.test('path CPU adds the load generator, the serving process, the upstream and the service behind it', async (t) => {
  const b = backend(2700);
  t.equal(pathCpuMs(b, 'plain')!.toFixed(3), '0.080');
  t.equal(pathCpuMs(b, 'hop')!.toFixed(3), '0.152');
  t.equal(pathCpuMs(b, 'direct')!.toFixed(3), '0.029', 'the upstream once');
  t.equal(pathCpuMs({ gateway: { plain: { c50: load(1), c1: load(1), cpuMsPerReq: { server: 1, upstream: 1 } } } }, 'plain'), undefined, 'no load-generator figure, no path');
});

t.test('the bounds: cores ÷ (path CPU + one hybrid verify)', async (t) => {
  const x = gatewayBounds(backend(2700), 2)!;
  t.equal(Math.round(x.rps), Math.round(2000 / 0.27), 'plain path 0.080 + verify 0.190 ms');
  t.equal(x.plainRatio.toFixed(3), (2000 / 0.27 / 24_000).toFixed(3));
  t.equal(x.joseRatio.toFixed(3), (2000 / 0.27 / 9_800).toFixed(3));
  t.equal(Math.round(x.hop!.rps), Math.round(2000 / 0.342), 'hop path 0.152 + verify 0.190 ms');
  t.equal(Math.round(x.withGateway!.rps), Math.round(2000 / (0.226 + 0.19)), 'stub path 0.226 + verify 0.190 ms');
  t.equal(gatewayBounds({ gateway: backend(1).gateway }, 2), undefined, 'no ceiling, no bound');
});

t.test('the gateway targets: c=50 throughput ÷ the bound with a verify call, and c=1 added latency', async (t) => {
  const targets = evaluateTargets(results(backend(2700)), 'native');
  const bound = targets.find((x) => x.id === 'gw-bound')!;
  t.equal(bound.value, (2700 / (2000 / 0.342)).toFixed(2), 'gateway 2,700/s ÷ hop bound 5,848/s');
  t.equal(bound.met, false, '0.46 < 0.50');
  t.equal(evaluateTargets(results(backend(3000)), 'native').find((x) => x.id === 'gw-bound')!.met, true, '0.51 ≥ 0.50');
  t.same(targets.filter((x) => x.id.startsWith('gw-')).map((x) => x.id).sort(), ['gw-bound', 'gw-latency'], 'the proxy ratios and p99 are not targets');
  const table = renderTable({ ...results(backend(2700)), targets });
  t.match(table, /Gateway c=50 req\/s ÷ bound with a verify call\s*\|\s*0\.46 .*≥ 0\.50\s*\|\s*\*\*NOT MET\*\*/);
  t.match(table, /Bound with a verify call: cores ÷ \(hop path CPU \+ hybrid verify CPU\)\s*\|\s*5,848\/s = 0\.243× plain, 0\.596× jose/);
  t.match(table, /Gateway p99 at c=50 \(reported; not a target on 2 shared cores\)\s*\|\s*38\.00 ms\s*\|[^|]*\|\s*\|\s*\|/, 'p99 without a target');

  const b = backend(2700);
  delete b.gateway!.hop;
  t.equal(evaluateTargets(results(b), 'native').find((x) => x.id === 'gw-bound')!.met, undefined, 'no hop row: not measured');
});

t.test('smoke runs compute no bounds (their servers share one process)', async (t) => {
  const targets = evaluateTargets(results(backend(2700), true), 'native');
  t.equal(targets.find((x) => x.id === 'gw-bound')!.met, undefined, 'no bound, so the target is not evaluated');
  const table = renderTable({ ...results(backend(2700), true), targets });
  t.match(table, /whole path \(\+ load generator, upstream\)\s*\|\s*— /, 'no whole-path CPU either');
});
