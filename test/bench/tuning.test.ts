/**
 * The benchmark's tuning variables (bench/common.ts): which Node flags reach
 * the sidecar and gateway processes, what is refused (by form, by kind, and
 * by Node itself in the probe of bench/procs.ts), and that a tuned run says
 * so in its table's title.
 */
import t from 'tap';
import { productNodeFlags, sidecarTuningEnv, tuningOf } from '../../bench/common.js';
import { probeNodeFlags } from '../../bench/procs.js';
import { renderTable } from '../../bench/report.js';
import type { Results } from '../../bench/report.js';

t.test('BENCH_NODE_FLAGS: whitespace-separated --name and --name=value flags', async (t) => {
  t.same(productNodeFlags({}), []);
  t.same(productNodeFlags({ BENCH_NODE_FLAGS: '   ' }), []);
  t.same(productNodeFlags({ BENCH_NODE_FLAGS: '--single-threaded-gc' }), ['--single-threaded-gc']);
  t.same(productNodeFlags({ BENCH_NODE_FLAGS: ' --single-threaded-gc\t--max-semi-space-size=32 ' }), ['--single-threaded-gc', '--max-semi-space-size=32']);
});

t.test('BENCH_NODE_FLAGS: anything else is a TypeError that names the variable and the value', async (t) => {
  for (const bad of ['single-threaded-gc', '-e', '--', '--x y', '--a=b c', '--Upper']) {
    t.throws(() => productNodeFlags({ BENCH_NODE_FLAGS: bad }), { name: 'TypeError', message: /^BENCH_NODE_FLAGS: not a Node flag/ }, bad);
  }
});

t.test('BENCH_NODE_FLAGS: options that change what the process runs, or open a debugger, are refused', async (t) => {
  for (const bad of ['--require=./x.js', '--import=./x.mjs', '--eval=1', '--print=1', '--loader=./l.mjs', '--inspect', '--inspect=0.0.0.0:9229', '--inspect-brk', '--env-file=.env', '--single-threaded-gc --watch']) {
    t.throws(() => productNodeFlags({ BENCH_NODE_FLAGS: bad }), { name: 'TypeError', message: /^BENCH_NODE_FLAGS: ".*" would run other code or open a debugger/ }, bad);
  }
  // Look-alikes of those names are only checked by the probe below.
  t.same(productNodeFlags({ BENCH_NODE_FLAGS: '--inspector-tuning' }), ['--inspector-tuning']);
});

t.test('the probe starts Node with the flags and refuses those it does not know, with its own message', async (t) => {
  t.doesNotThrow(() => probeNodeFlags(['--single-threaded-gc'], [process.execPath]));
  t.doesNotThrow(() => probeNodeFlags([], ['/nonexistent/node']), 'no flags: nothing to start');
  t.throws(() => probeNodeFlags(['--single-thread-gc'], [process.execPath]), { name: 'TypeError', message: /^BENCH_NODE_FLAGS: .* refused --single-thread-gc: .*bad option/ });
  t.throws(() => probeNodeFlags(['--single-threaded-gc'], ['/nonexistent/node']), { name: 'TypeError', message: /^BENCH_NODE_FLAGS: \/nonexistent\/node refused/ });
});

t.test('tuningOf lists the set tuning variables in a fixed order', async (t) => {
  t.same(tuningOf({}), []);
  t.same(tuningOf({ BENCH_NODE_FLAGS: '  ', BENCH_CRYPTO_WORKERS: '' }), [], 'blank values are not tuning');
  t.same(tuningOf({ BENCH_NODE_FLAGS: ' --single-threaded-gc ', BENCH_CRYPTO_WORKERS: '0', OTHER: 'x', BENCH_CRYPTO_INLINE_WHEN_IDLE: '0' }),
    ['BENCH_CRYPTO_WORKERS=0', 'BENCH_NODE_FLAGS=--single-threaded-gc'], 'the removed inline settings are no tuning');
});

t.test('sidecarTuningEnv: each BENCH_CRYPTO_* setting becomes the sidecar\'s SIDECAR_CRYPTO_* one', async (t) => {
  t.same(sidecarTuningEnv({}), {});
  t.same(sidecarTuningEnv({ BENCH_CRYPTO_WORKERS: '0', BENCH_NODE_FLAGS: '--single-threaded-gc' }),
    { SIDECAR_CRYPTO_WORKERS: '0' }, 'the Node flags are not the sidecar\'s');
  t.same(sidecarTuningEnv({ BENCH_CRYPTO_WORKERS: '' }), {}, 'an empty one is not passed');
  // The sidecar refuses SIDECAR_CRYPTO_INLINE_WHEN_*: they must never be passed on.
  t.same(sidecarTuningEnv({ BENCH_CRYPTO_INLINE_WHEN_IDLE: '0', BENCH_CRYPTO_INLINE_WHEN_SHARED: '1' }), {}, 'the removed inline settings are not passed on');
});

function results(tuning?: string[]): Results {
  return {
    meta: {
      date: '2026-11-23T00:00:00.000Z', smoke: false, full: false, scale: 1, command: 'npm run bench', sections: ['crypto'], backends: ['native'],
      machine: { nproc: 2, cpuModel: 'test', memGb: 1, loadAvg: [0, 0, 0] }, node: { loadGenerator: 'v20' }, durationS: 1,
      ...(tuning ? { tuning } : {}),
    },
    backends: {},
  };
}

t.test('the table title names the tuning of a tuned run, and nothing for an untuned one', async (t) => {
  const title = (r: Results): string => renderTable(r).split('\n')[0]!;
  t.match(title(results(['BENCH_NODE_FLAGS=--single-threaded-gc'])), / — tuned: BENCH_NODE_FLAGS=--single-threaded-gc — 1\.0 s$/);
  t.notMatch(title(results([])), /tuned/);
  t.notMatch(title(results()), /tuned/);
});
