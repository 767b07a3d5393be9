/**
 * Verifies inline while the machine is shared (sidecar/cpu-share.ts and the
 * pool's `inlineWhenShared`): the other processes' cores from two samples,
 * the thresholds and the dwell of the mode, failing readings and observers,
 * real readings of this machine (units), the pool's routing in either mode
 * and with a check too costly for the main thread (sharedInlineMaxMs),
 * and, through a real sidecar, real busy processes turning the mode on
 * (`agent_authz_crypto_machine_shared`) so that verifies run on the main
 * thread. Config: SIDECAR_CRYPTO_INLINE_WHEN_SHARED.
 */
import t from 'tap';
import os from 'node:os';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { CpuShareMonitor, SHARE_DWELL_SAMPLES, SHARE_THRESHOLDS, canJudgeMachine, othersCores, readCpu } from '../../sidecar/cpu-share.js';
import type { CpuSample } from '../../sidecar/cpu-share.js';
import { CryptoPool, InlineCrypto } from '../../sidecar/crypto-pool.js';
import type { CryptoOp, CryptoThread, VerifyKey } from '../../sidecar/crypto-pool.js';
import { loadConfig } from '../../sidecar/config.js';
import { createSigner, generateHybridKeyPair } from '../../src/crypto/hybrid.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { bundleFor, expectDecision, verify } from './decide/helpers.js';
import { parsePrometheusText, sampleValue } from './ops/helpers.js';

/** A sample `dtMs` after `prev` in which the machine (`cpus` CPUs) was `machine` cores busy and this process `own` cores. */
function after(prev: CpuSample, dtMs: number, machine: number, own: number): CpuSample {
  return { atMs: prev.atMs + dtMs, cpus: prev.cpus, machineBusyMs: prev.machineBusyMs + machine * dtMs, ownMs: prev.ownMs + own * dtMs };
}
const start: CpuSample = { atMs: 1_000, cpus: 2, machineBusyMs: 50_000, ownMs: 7_000 };

t.test('the other processes\' cores: machine busy minus this process, from two samples', async (t) => {
  t.equal(othersCores(start, after(start, 500, 1.5, 1.0)), 0.5);
  t.equal(othersCores(start, after(start, 500, 2, 2)), 0, 'all of it this process');
  t.equal(othersCores(start, after(start, 500, 1, 1.3)), 0, 'never below 0 (own time counted in another tick)');
  t.equal(othersCores(start, after(start, 1000, 2, 0)), 2, 'all of it others');
  t.equal(othersCores(start, after(start, 1000, 2.5, 0)), 2, 'never more than the CPUs (ticks counted late)');
  t.equal(othersCores(start, start), undefined, 'no time passed');
  t.equal(othersCores(start, { ...after(start, 500, 1, 0), cpus: 4 }), undefined, 'the CPU count changed');
});

t.test('the mode: shared below enterFree free cores, not shared again above leaveFree, each after a dwell', async (t) => {
  t.equal(SHARE_DWELL_SAMPLES, 2);
  const changes: [boolean, number, number][] = [];
  const m = new CpuShareMonitor({ onChange: (shared, others, cpus) => changes.push([shared, others, cpus]) });
  let s = start;
  const step = (machine: number, own: number): boolean => { s = after(s, 500, machine, own); m.update(s); return m.shared; };
  m.update(s);
  t.equal(m.others, undefined, 'one sample: nothing to compare yet');
  t.equal(step(1.2, 1.1), false, 'others 0.1 of 2 cores (a sidecar on its own)');
  t.ok(Math.abs(m.others! - 0.1) < 1e-9, 'others measured');
  const enter = 2 - SHARE_THRESHOLDS.enterFree;
  const leave = 2 - SHARE_THRESHOLDS.leaveFree;
  t.equal(step(1 + enter - 0.05, 1), false, 'just under the threshold: still not shared');
  t.equal(step(1.6, 1.0), false, 'others 0.6 (a busy gateway beside it) once: not yet');
  t.equal(step(1.2, 1.0), false, 'a quiet sample in between restarts the dwell');
  t.equal(step(1.6, 1.0), false, 'busy again: one sample');
  t.equal(step(1.7, 1.0), true, 'two in a row: shared');
  t.equal(step(1 + (enter + leave) / 2, 1), true, 'between the thresholds: stays shared');
  t.equal(step(1 + leave - 0.05, 1), true, 'free above leaveFree once: stays');
  t.equal(step(1 + leave - 0.05, 1), false, 'twice: not shared again');
  t.equal(step(1 + (enter + leave) / 2, 1), false, 'between the thresholds: stays not shared');
  t.equal(step(1 + (enter + leave) / 2, 1), false, '… however long');
  t.same(changes.map((c) => c[0]), [true, false], 'each change reported once');
  t.equal(changes[0]![2], 2);
  m.stop();
  t.equal(m.shared, false, 'stop resets the mode');
  t.equal(m.others, undefined, 'and the measure');
  t.throws(() => new CpuShareMonitor({ intervalMs: 0 }), TypeError, 'a nonsense interval is a programming error');
});

t.test('a failing reading or observer keeps the mode and the sampling', async (t) => {
  let fail = false;
  let now = start;
  let read = (): CpuSample => { now = after(now, 10, 2, 0); return now; };
  const m = new CpuShareMonitor({
    intervalMs: 10,
    read: () => { if (fail) throw new Error('no /proc'); return read(); },
    onChange: () => { throw new Error('observer failed'); },
  });
  m.start();
  t.ok(m.running);
  for (const end = Date.now() + 3_000; !m.shared && Date.now() < end;) await new Promise((r) => setTimeout(r, 10));
  t.equal(m.shared, true, 'others at 2 cores: shared, although the observer threw');
  fail = true;
  await new Promise((r) => setTimeout(r, 60));
  t.equal(m.shared, true, 'readings that throw keep the mode');
  // The timer runs on: readings that work again, with the others idle, turn the mode off.
  read = (): CpuSample => { now = after(now, 10, 0, 0); return now; };
  fail = false;
  for (const end = Date.now() + 3_000; m.shared && Date.now() < end;) await new Promise((r) => setTimeout(r, 10));
  t.equal(m.shared, false, 'sampling went on after the failures');
  t.equal(othersCores(start, { ...after(start, 500, 1, 0), cpus: 0 }), undefined, 'no CPUs listed: nothing to judge');
  m.stop();
  t.notOk(m.running);
});

t.test('real readings of this machine', async (t) => {
  const a = readCpu();
  t.equal(a.cpus, os.cpus().length);
  t.ok(a.machineBusyMs > 0, 'the machine has been busy');
  // Keep this process busy for 150 ms of CPU (at most 5 s of wall time on a loaded machine).
  const u0 = process.cpuUsage();
  for (const end = performance.now() + 5_000; performance.now() < end;) {
    const u = process.cpuUsage(u0);
    if (u.user + u.system >= 150_000) break;
  }
  const b = readCpu();
  const wall = b.atMs - a.atMs;
  t.ok(b.ownMs - a.ownMs >= 150, `this process's CPU time in ms (${(b.ownMs - a.ownMs).toFixed(0)})`);
  t.ok(b.ownMs - a.ownMs <= wall * a.cpus + 20, 'and not more than its threads could use in the wall time');
  t.ok(b.machineBusyMs - a.machineBusyMs <= wall * a.cpus + 20 * a.cpus, 'the machine\'s busy time is in ms as well (10 ms ticks)');
  const others = othersCores(a, b);
  t.ok(others !== undefined && others >= 0 && others <= a.cpus, `others ${others?.toFixed(2)} of ${a.cpus} cores`);
});

t.test('the pool: every verify inline while shared, to the workers when not; signing stays on the workers', async (t) => {
  const kp = generateHybridKeyPair();
  const msg = new TextEncoder().encode('{"a":1}');
  const sig = createSigner(kp.secretSeed).sign('proof', msg);
  const key: VerifyKey = { id: 'k', publicKey: kp.publicKey };
  const seen: string[] = [];
  const share = { shared: true };
  // Every check counts as cheap here (with the noble backend, Node 20, a check costs more than the default 0.5 ms).
  const pool = new CryptoPool(1, { inlineWhenShared: share, limits: { sharedInlineMaxMs: 1_000 }, onTask: (op: CryptoOp, thread: CryptoThread) => { seen.push(`${op}:${thread}`); } });
  t.teardown(() => pool.close());
  t.same(await Promise.all([0, 1, 2].map(() => pool.verify(key, 'proof', msg, sig))), [true, true, true]);
  t.equal(await pool.verify(key, 'cert', msg, sig), false, 'inline still refuses a wrong signature');
  const signed = pool.sign({ id: 'agent', seed: () => new Uint8Array(kp.secretSeed) }, 'proof', msg);
  t.equal(await pool.verify(key, 'proof', msg, sig), true);
  await signed;
  t.same(seen, ['verify:main', 'verify:main', 'verify:main', 'verify:main', 'sign:worker', 'verify:main'],
    'all in one turn and beside a task in flight, unlike idle inlining');
  seen.length = 0;
  share.shared = false;
  t.same(await Promise.all([0, 1].map(() => pool.verify(key, 'proof', msg, sig))), [true, true]);
  t.same(seen, ['verify:worker', 'verify:worker'], 'not shared (and no idle inlining): the workers');
  share.shared = true;
  await pool.close();
  await t.rejects(pool.verify(key, 'proof', msg, sig), { message: /closed/ }, 'a closed pool refuses, also while shared');

  // A check that costs more than sharedInlineMaxMs on the main thread: the first runs inline (to measure it), then the workers.
  seen.length = 0;
  const costly = new CryptoPool(1, { inlineWhenShared: { shared: true }, limits: { sharedInlineMaxMs: 0, sharedReprobeEvery: 3 }, onTask: (op: CryptoOp, thread: CryptoThread) => { seen.push(`${op}:${thread}`); } });
  t.teardown(() => costly.close());
  t.same(await Promise.all([0, 1, 2, 3, 4].map(() => costly.verify(key, 'proof', msg, sig))), [true, true, true, true, true]);
  t.same(seen, ['verify:main', 'verify:worker', 'verify:worker', 'verify:main', 'verify:worker'],
    'measured once, then to the workers although shared, with one in sharedReprobeEvery measured again');
});

t.test('the inline cost: only successful checks are timed', async (t) => {
  const kp = generateHybridKeyPair();
  const msg = new TextEncoder().encode('{"a":1}');
  const sig = createSigner(kp.secretSeed).sign('proof', msg);
  const inline = new InlineCrypto();
  const key: VerifyKey = { id: 'k', publicKey: kp.publicKey };
  t.equal(inline.minVerifyMs, Infinity, 'nothing measured yet');
  t.equal(await inline.verify(key, 'cert', msg, sig), false);
  const forged = { ...sig, ed25519: new Uint8Array(64) };
  t.equal(await inline.verify(key, 'proof', msg, forged), false, 'a wrong Ed25519 half stops before the ML-DSA half');
  t.equal(inline.minVerifyMs, Infinity, 'failed checks are not timed (they can stop after one half)');
  t.equal(await inline.verify(key, 'proof', msg, sig), true);
  t.ok(inline.minVerifyMs > 0 && inline.minVerifyMs < 1_000, `a valid check is (${inline.minVerifyMs.toFixed(3)} ms)`);
});

t.test('config: SIDECAR_CRYPTO_INLINE_WHEN_SHARED', async (t) => {
  t.equal(loadConfig({}).cryptoInlineWhenShared, true, 'on by default');
  t.equal(loadConfig({ SIDECAR_CRYPTO_INLINE_WHEN_SHARED: '0' }).cryptoInlineWhenShared, false);
  t.equal(loadConfig({ SIDECAR_CRYPTO_INLINE_WHEN_SHARED: 'true' }).cryptoInlineWhenShared, true);
  t.throws(() => loadConfig({ SIDECAR_CRYPTO_INLINE_WHEN_SHARED: 'yes' }), /SIDECAR_CRYPTO_INLINE_WHEN_SHARED: expected 1\/true or 0\/false/);
});

/** Starts `n` processes that keep a core busy each for at most `maxMs`, at the lowest priority (their time still counts as busy). */
function burners(n: number, maxMs: number): ChildProcess[] {
  const code = `const end = Date.now() + ${maxMs}; while (Date.now() < end) {}`;
  return Array.from({ length: n }, () => {
    const p = spawn(process.execPath, ['-e', code], { stdio: 'ignore' });
    p.on('error', () => undefined);
    try { if (p.pid) os.setPriority(p.pid, 19); } catch { /* not allowed here: normal priority */ }
    return p;
  });
}

const judge = canJudgeMachine() && os.cpus().length <= 16;
t.test('through the sidecar: busy processes beside it turn the mode on, and verifies run on the main thread',
  { skip: judge ? false : 'this machine cannot be judged (1 CPU, a cpuset, or more than 16 CPUs to keep busy)' }, async (t) => {
    const cpus = os.cpus().length;
    // Any check counts as cheap here: with the noble backend (Node 20) a check costs more than the default 0.5 ms.
    const sc = await startSidecar({ cryptoWorkers: 2, cryptoInlineWhenIdle: false, cryptoInlineWhenShared: true }, { cryptoLimits: { sharedInlineMaxMs: 1_000 } });
    t.teardown(() => sc.close());
    const f = await specFlow(sc, 'shared@example.com', { approve: ['data:read'] });
    const metric = async (name: string, labels: Record<string, string> = {}): Promise<number | undefined> =>
      sampleValue(parsePrometheusText(await (await fetch(`${sc.url}/metrics`)).text()), name, name, labels);
    // Enough busy processes that fewer than enterFree cores are left, whatever else runs.
    const procs = burners(Math.max(1, Math.ceil(cpus - SHARE_THRESHOLDS.enterFree + 0.5)), 30_000);
    t.teardown(() => { for (const p of procs) p.kill('SIGKILL'); });
    let shared = 0;
    for (const end = Date.now() + 10_000; Date.now() < end && shared !== 1;) {
      await new Promise((r) => setTimeout(r, 100));
      shared = (await metric('agent_authz_crypto_machine_shared')) ?? 0;
    }
    t.equal(shared, 1, 'agent_authz_crypto_machine_shared is 1');
    t.ok(((await metric('agent_authz_machine_other_cores')) ?? 0) > cpus - SHARE_THRESHOLDS.enterFree, 'the other processes\' cores are exported');
    const tasks = async (): Promise<number[]> => Promise.all(['verify:main', 'verify:worker', 'sign:main', 'sign:worker']
      .map(async (k) => (await metric('agent_authz_crypto_tasks_total', { op: k.split(':')[0]!, thread: k.split(':')[1]! })) ?? 0));
    const before = await tasks();
    for (let i = 0; i < 3; i++) expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized');
    const d = (await tasks()).map((v, i) => v - before[i]!);
    t.same(d, [3, 0, 0, 3], 'the three verifies ran on the main thread (idle inlining is off here); the three presents signed on the workers');
    for (const p of procs) p.kill('SIGKILL');
  });
