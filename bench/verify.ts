/**
 * The per-backend crypto, present and verify steps: the crypto-only ceiling
 * (bench/crypto-ceiling.ts as a child process), present at each concurrency
 * level, verify at each level (with the server CPU per verify and the bytes
 * each step adds to the database), and the sidecar's CPU profile.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Pool } from 'undici';
import { NODE24, ROOT } from '../test/shared/node24.js';
import type { Backend } from './plan.js';
import { Child, childEnv, cpuSeconds, rssBytes, tsArgs } from './procs.js';
import { makeBundles, makeChallenges, pool, presentAll } from './flow.js';
import type { Setup } from './flow.js';
import { runLoad } from './load.js';
import type { LoadResult } from './load.js';
import { formatProfile, readProfile, summarizeProfile } from './profile.js';
import { writeFlameGraph } from './flamegraph.js';
import { bestRps } from './report.js';
import type { BackendResults } from './report.js';
import { checkpointedBytes, startSidecar, stopSidecar } from './sidecar.js';
import type { Sidecar } from './sidecar.js';
import { OUT, log, need, presentRate, sleep } from './common.js';
import type { Run } from './common.js';

/** Runs bench/crypto-ceiling.ts for `backend` and returns its sign and verify rates (the crypto-only ceiling). */
export async function cryptoCeiling(run: Run, backend: Backend): Promise<NonNullable<BackendResults['ceiling']>> {
  const bin = backend === 'native' ? NODE24 : process.execPath;
  const child = new Child(`crypto-ceiling(${backend})`, bin, [...tsArgs('bench/crypto-ceiling.ts'), `--backend=${backend}`, `--seconds=${run.plan.ceilingSeconds}`], childEnv({}));
  const m = await child.waitForLine(/^\{.*\}$/, 60_000);
  await child.exited;
  type Op = { opsPerSec: number; usPerOp: number; cpuUsPerOp: number; cpuShare: number };
  const r = JSON.parse(m[0]) as { node: string; verify: Op; sign: Op };
  log(`${backend}: crypto ceiling verify ${r.verify.opsPerSec.toFixed(0)}/s (${r.verify.usPerOp.toFixed(0)} µs), sign ${r.sign.opsPerSec.toFixed(0)}/s (${r.sign.usPerOp.toFixed(0)} µs) on ${r.node}; CPU share ${r.verify.cpuShare.toFixed(2)}`);
  return {
    node: r.node, verifyPerSec: r.verify.opsPerSec, verifyUs: r.verify.usPerOp, signPerSec: r.sign.opsPerSec, signUs: r.sign.usPerOp,
    verifyCpuUs: r.verify.cpuUsPerOp, signCpuUs: r.sign.cpuUsPerOp, cpuShare: Math.min(r.verify.cpuShare, r.sign.cpuShare),
  };
}

/**
 * Sends the verify requests of `bodies` (one bundle each, each used once) to
 * the sidecar; `run` spends up to `count` of them at `concurrency`, `left`
 * says how many are unspent.
 */
export function verifyRunner(p: Pool, s: Setup, bodies: string[]) {
  let used = 0;
  const headers = { 'x-service-api-key': s.apiKey, 'content-type': 'application/json' };
  return {
    left: () => bodies.length - used,
    async run(concurrency: number, count: number, seconds: number): Promise<LoadResult> {
      const base = used;
      const n = Math.min(count, bodies.length - used);
      const r = await runLoad({
        pool: p, concurrency, count: n, maxSeconds: seconds,
        request: (i) => ({ method: 'POST', path: '/v1/service/verify', headers, body: bodies[base + i]! }),
        onResponse: (_i, status, text) => status === 200 && text.includes('"decision":"allow"'),
      });
      used += r.count;
      // Free the spent bodies.
      for (let i = base; i < used; i++) bodies[i] = '';
      return r;
    },
  };
}

/** The present and verify steps for one backend: fills `br.present`, `br.verify` and the CPU, RSS and bytes figures. */
export async function presentAndVerify(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults): Promise<void> {
  const { plan } = run;
  const ceil = br.ceiling!;
  const p = pool(sc.url, 64);
  try {
    // Present: challenges first (unmeasured), then each level on its own challenges.
    const bodies: string[] = [];
    if (plan.sections.has('present')) {
      br.present = [];
      for (const c of plan.levels) {
        const secs = plan.presentSeconds[c]!;
        const ch = await makeChallenges(p, s, need(secs, ceil.signPerSec, plan.maxBundles), 120);
        const { result, bundles } = await presentAll(p, s, ch, c, 'verify', secs);
        for (const b of bundles) bodies.push(b);
        br.present.push(result);
        log(`${backend}: present c=${c}: ${result.rps.toFixed(0)}/s p50 ${result.p50.toFixed(0)} µs p99 ${result.p99.toFixed(0)} µs (${result.count} req, ${result.errors} err)`);
      }
    }
    if (!plan.sections.has('verify')) return;
    // Bundles for each level, within the generation budget (noble signs ~4× slower than it verifies).
    let perLevel = plan.levels.map((c) => need(plan.verifySeconds[c]!, ceil.verifyPerSec, plan.maxBundles));
    const budget = Math.max(bodies.length, Math.floor(plan.genSeconds * presentRate(br)));
    const sum = perLevel.reduce((a, n) => a + n, 0);
    if (plan.warmupVerifies + sum > budget) perLevel = perLevel.map((n) => Math.max(8, Math.floor((n * (budget - plan.warmupVerifies)) / sum)));
    const want = plan.warmupVerifies + perLevel.reduce((a, n) => a + n, 0);
    // The top-up presents every challenge it makes: it gives the bytes per challenge + present.
    const extra = Math.max(want - bodies.length, Math.min(200, Math.ceil(ceil.signPerSec * 0.3)));
    log(`${backend}: making ${extra} more bundles for verify`);
    const bytes0 = await checkpointedBytes(sc.dbFile);
    for (const b of await makeBundles(p, s, extra, 'verify', 300)) bodies.push(b);
    const bytes1 = await checkpointedBytes(sc.dbFile);
    br.bytesPerPresent = (bytes1 - bytes0) / extra;

    // RTT baseline for "verify server time".
    br.healthzC1 = await runLoad({ pool: p, concurrency: 1, count: plan.healthzRequests, maxSeconds: 5, request: () => ({ method: 'GET', path: '/healthz' }) });
    const v = verifyRunner(p, s, bodies);
    await v.run(16, plan.warmupVerifies, 30);
    br.verify = [];
    let verified = 0;
    for (const [i, c] of plan.levels.entries()) {
      const secs = plan.verifySeconds[c]!;
      const cpu0 = cpuSeconds(sc.child.pid);
      const r = await v.run(c, i === plan.levels.length - 1 ? v.left() : perLevel[i]!, secs);
      const cpu1 = cpuSeconds(sc.child.pid);
      verified += r.count - r.errors;
      br.verify.push(r);
      if (c === Math.max(...plan.levels)) br.cpuMsPerVerify = ((cpu1 - cpu0) * 1000) / Math.max(1, r.count);
      log(`${backend}: verify c=${c}: ${r.rps.toFixed(0)}/s p50 ${r.p50.toFixed(0)} µs p99 ${r.p99.toFixed(0)} µs p99.9 ${r.p999.toFixed(0)} µs (${r.count} req, ${r.errors} err, ${v.left()} bundles left)`);
    }
    br.rssMb = rssBytes(sc.child.pid) / 2 ** 20;
    const bytes2 = await checkpointedBytes(sc.dbFile);
    br.bytesPerVerify = verified ? (bytes2 - bytes1) / (verified + plan.warmupVerifies) : undefined;
  } finally {
    await p.close();
  }
}

/**
 * Profiles the sidecar: makes bundles and challenges on the running sidecar,
 * restarts it on the same data dir with --cpu-prof, runs verify at c=64 and
 * present at c=16 (each for a few seconds), stops it and summarises each
 * window of the profile. Returns the restarted (unprofiled) sidecar.
 */
export async function profileSidecar(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults): Promise<Sidecar> {
  const secs = run.plan.profileSeconds;
  const ceil = br.ceiling!;
  let p = pool(sc.url, 64);
  const verifyRate = bestRps(br.verify) ?? ceil.verifyPerSec * 0.7;
  const bodies = await makeBundles(p, s, Math.min(need(secs, verifyRate, run.plan.maxBundles), Math.floor(run.plan.genSeconds * presentRate(br))), 'verify', 300);
  const challenges = await makeChallenges(p, s, need(secs, presentRate(br), run.plan.maxBundles), 120);
  await p.close();
  await stopSidecar(sc);
  const dir = path.join(OUT, `prof-${backend}-sidecar`);
  fs.rmSync(dir, { recursive: true, force: true });
  const prof = await startSidecar(run, backend, sc.dataDir, { nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${dir}`], name: `sidecar(${backend}, --cpu-prof)` });
  p = pool(prof.url, 64);
  const at = (): number => Number(process.hrtime.bigint() / 1000n);
  let marks: { v0: number; v1: number; p0: number; p1: number; exit: number };
  try {
    const v = verifyRunner(p, s, bodies);
    await v.run(64, Math.min(300, Math.floor(bodies.length / 4)), 10);
    const v0 = at();
    await v.run(64, bodies.length, secs);
    const v1 = at();
    await sleep(100);
    const p0 = at();
    await presentAll(p, s, challenges, 16, 'verify', secs);
    const p1 = at();
    await p.close();
    await prof.child.stop(30_000);
    marks = { v0, v1, p0, p1, exit: at() };
  } finally {
    await p.close().catch(() => undefined);
    await prof.child.stop(30_000);
  }
  // One profile per thread: CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; thread 0 is the
  // main thread (HTTP, SQLite), the others are the crypto workers.
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort();
  const file = files.find((f) => /\.0\.\d+\.cpuprofile$/.test(f)) ?? files[0];
  if (file) {
    const f = path.join(dir, file);
    // The two measured windows, in µs before the profile's end.
    const vWin: [number, number] = [marks.exit - marks.v0, marks.exit - marks.v1];
    const pWin: [number, number] = [marks.exit - marks.p0, marks.exit - marks.p1];
    const main = readProfile(f);
    const verify = summarizeProfile(f, { top: 15, fromEndUs: vWin, profile: main });
    const present = summarizeProfile(f, { top: 15, fromEndUs: pWin, profile: main });
    br.profiles = { ...br.profiles, verify, present };
    process.stderr.write(formatProfile(verify, `${backend}: sidecar main thread, verify c=64`) + '\n');
    process.stderr.write(formatProfile(present, `${backend}: sidecar main thread, present c=16`) + '\n');
    const node = backend === 'native' ? 'Node 24, native ML-DSA-65' : 'Node 20, @noble/post-quantum';
    const flames = [
      writeFlameGraph(f, path.join(dir, 'flame-verify.svg'), { title: `Sidecar main thread, verify at c=64 (${node})`, fromEndUs: vWin, profile: main }),
      writeFlameGraph(f, path.join(dir, 'flame-present.svg'), { title: `Sidecar main thread, present at c=16 (${node})`, fromEndUs: pWin, profile: main }),
    ];
    const workers = files.filter((x) => x !== file);
    workers.forEach((w, i) => {
      const wf = path.join(dir, w);
      const wp = readProfile(wf);
      process.stderr.write(formatProfile(summarizeProfile(wf, { top: 5, fromEndUs: vWin, profile: wp }), `${backend}: crypto worker ${w}, verify c=64`) + '\n');
      process.stderr.write(formatProfile(summarizeProfile(wf, { top: 5, fromEndUs: pWin, profile: wp }), `${backend}: crypto worker ${w}, present c=16`) + '\n');
      if (i === 0) flames.push(writeFlameGraph(wf, path.join(dir, 'flame-verify-worker.svg'), { title: `Sidecar crypto worker, verify at c=64 (${node})`, fromEndUs: vWin, profile: wp }));
    });
    br.profiles.flames = [...(br.profiles.flames ?? []), ...flames.map((x) => path.relative(ROOT, x))];
    log(`${backend}: flame graphs in ${path.relative(ROOT, dir)}/flame-*.svg`);
  } else log('sidecar profile: no .cpuprofile written');
  return startSidecar(run, backend, sc.dataDir);
}
