/**
 * The benchmark (`npm run bench`; see docs/benchmarks.md). Loopback only,
 * real processes: the sidecar started as users start it (`node --import tsx
 * sidecar/main.ts` with SIDECAR_* variables, a fresh data dir, an in-process
 * SMTP sink), the gateway started with `gateway-plugin/main.ts --config`,
 * real bundles from present, real SQLite files. This process is the load
 * generator (undici keep-alive pools); the servers are separate processes.
 *
 *   npm run bench                       full run (native + noble; ≤ 8 min)
 *   npm run bench -- --smoke            tiny run for CI (noble; ≤ 15 s)
 *   npm run bench -- --only=verify,gateway --backends=native
 *   npm run bench -- --profile          also profile the sidecar and gateway (--cpu-prof)
 *
 * Prints one table (stdout; progress goes to stderr), writes
 * bench/out/results-<time>.json, bench/out/latest.json, bench/out/chart.svg
 * and, on full runs, docs/benchmarks-chart.svg.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import crypto from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { Pool } from 'undici';
import { BenchSeedDb, dbBytes } from '../sidecar/store/sqlite/bench-seed.ts';
import { DB_FILE_NAME } from '../sidecar/store/index.ts';
import { AAD, createSecretBox } from '../sidecar/secrets.ts';
import { parsePlan } from './plan.ts';
import type { Backend, Plan } from './plan.ts';
import { NODE24, ROOT, ensureNode24SqliteBinding, node24Available } from './node24.ts';
import { Child, childEnv, cpuSeconds, freePort, killAll, rssBytes, tsArgs, waitForHttp } from './procs.ts';
import { login, makeBundles, makeChallenges, pool, presentAll, setUp, startMailSink } from './flow.ts';
import type { MailSink, Setup } from './flow.ts';
import { pooled, runLoad } from './load.ts';
import type { LoadResult, Req } from './load.ts';
import { formatProfile, summarizeProfile } from './profile.ts';
import { bestRps, evaluateTargets, renderSvg, renderTable, stripSamples } from './report.ts';
import type { BackendResults, GatewayVariant, Results } from './report.ts';

const OUT = path.join(ROOT, 'bench/out');
const T0 = performance.now();
const log = (s: string): void => { process.stderr.write(`[bench ${((performance.now() - T0) / 1000).toFixed(1).padStart(5)} s] ${s}\n`); };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Shared state of one run. */
interface Run {
  plan: Plan;
  mail: MailSink;
  masterKey: string;
  tmp: string;
  sqlite24: string | undefined;
  results: Results;
}

/** A running sidecar. */
interface Sidecar { child: Child; url: string; dataDir: string; dbFile: string; backend: Backend }

/** Retries a start that lost the race for a port picked by freePort(). */
async function retryPort<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
      log(`port taken; retrying (${(err as Error).message.split('\n')[0]})`);
    }
  }
}

function startSidecar(run: Run, backend: Backend, dataDir: string, o: { nodeFlags?: string[]; name?: string; webhooks?: boolean } = {}): Promise<Sidecar> {
  return retryPort(() => startSidecarOnce(run, backend, dataDir, o));
}

async function startSidecarOnce(run: Run, backend: Backend, dataDir: string, o: { nodeFlags?: string[]; name?: string; webhooks?: boolean }): Promise<Sidecar> {
  const port = await freePort();
  const env = childEnv({
    SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: dataDir, SIDECAR_SMTP_URL: run.mail.url,
    SIDECAR_MASTER_KEY: run.masterKey, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_ALPHA_CREDITS: '100000000',
    SIDECAR_SEND_CODE_PER_MINUTE: '10000', SIDECAR_LOG_LEVEL: 'warn',
    // Bundles are made ahead of the measured steps: keep them fresh for the whole run.
    SIDECAR_CHALLENGE_TTL_SECONDS: '3600', SIDECAR_PROOF_FRESHNESS_SECONDS: '3600',
    ...(o.webhooks ? { SIDECAR_WEBHOOK_ALLOW_INSECURE: '1' } : {}),
    ...(process.env.BENCH_CRYPTO_WORKERS ? { SIDECAR_CRYPTO_WORKERS: process.env.BENCH_CRYPTO_WORKERS } : {}),
    ...(process.env.BENCH_CRYPTO_INLINE_WHEN_IDLE ? { SIDECAR_CRYPTO_INLINE_WHEN_IDLE: process.env.BENCH_CRYPTO_INLINE_WHEN_IDLE } : {}),
    ...(backend === 'native' ? { SIDECAR_SQLITE_BINDING: run.sqlite24! } : {}),
  });
  delete env.NODE_ENV;
  const bin = backend === 'native' ? NODE24 : process.execPath;
  const child = new Child(o.name ?? `sidecar(${backend})`, bin, tsArgs('sidecar/main.ts', o.nodeFlags ?? []), env);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/readyz`, child, 60_000);
  return { child, url, dataDir, dbFile: path.join(dataDir, DB_FILE_NAME), backend };
}

async function stopSidecar(s: Sidecar): Promise<void> {
  const code = await s.child.stop(15_000);
  if (code !== 0) log(`warning: ${s.child.name} exited with ${code}`);
}

/** Checkpoints the WAL into the file (from a second connection) and returns file + WAL bytes. */
async function checkpointedBytes(dbFile: string): Promise<number> {
  const db = new BenchSeedDb(dbFile, { live: true });
  try {
    for (let i = 0; i < 40 && !db.checkpoint(); i++) await sleep(50);
  } finally {
    db.close();
  }
  return dbBytes(dbFile);
}

function freshDir(run: Run, name: string): string {
  const d = path.join(run.tmp, name);
  fs.rmSync(d, { recursive: true, force: true });
  fs.mkdirSync(d, { recursive: true });
  return d;
}

function need(seconds: number, rate: number, max: number): number {
  return Math.max(8, Math.min(max, Math.ceil(seconds * rate * 1.15) + 8));
}

/** Bundles per second the sidecar can make (challenge + present): measured, else from the sign ceiling. */
function presentRate(br: BackendResults): number {
  return bestRps(br.present) ?? br.ceiling!.signPerSec * 0.6;
}

// ---------------------------------------------------------------- crypto ceiling

async function cryptoCeiling(run: Run, backend: Backend): Promise<NonNullable<BackendResults['ceiling']>> {
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

// ---------------------------------------------------------------- present + verify

function verifyRunner(p: Pool, s: Setup, bodies: string[]) {
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

async function presentAndVerify(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults): Promise<void> {
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

// ---------------------------------------------------------------- gateway comparison

async function startHelper(mode: 'upstream' | 'plain' | 'jose' | 'stub' | 'all', args: string[], env: Record<string, string> = {}): Promise<{ child: Child; urls: Record<string, string> }> {
  const child = new Child(mode, process.execPath, [...tsArgs('bench/servers.ts'), mode, ...args], childEnv(env));
  const names = mode === 'all' ? ['upstream', 'plain', 'jose', 'stub'] : [mode];
  const urls: Record<string, string> = {};
  for (const name of names) {
    const m = await child.waitForLine(new RegExp(`^READY ${name} (\\d+)$`), 30_000);
    urls[name] = `http://127.0.0.1:${m[1]}`;
  }
  return { child, urls };
}

function startGateway(run: Run, sc: Sidecar, s: Setup, upstreamUrl: string, nodeFlags: string[] = [], sidecarUrl = sc.url): Promise<{ child: Child; url: string }> {
  return retryPort(() => startGatewayOnce(run, sidecarUrl, s, upstreamUrl, nodeFlags));
}

async function startGatewayOnce(run: Run, sidecarUrl: string, s: Setup, upstreamUrl: string, nodeFlags: string[]): Promise<{ child: Child; url: string }> {
  const port = await freePort();
  const file = path.join(run.tmp, `gateway-${port}.json`);
  fs.writeFileSync(file, JSON.stringify({
    upstream_url: upstreamUrl, sidecar_url: sidecarUrl, api_key_env: 'BENCH_GATEWAY_API_KEY',
    routes: [{ method: 'GET', path: '/items/*', scope: s.scope }],
    listen: { host: '127.0.0.1', port }, metrics: false, log_level: 'warn',
  }, null, 2));
  const child = new Child('gateway', process.execPath, [...tsArgs('gateway-plugin/main.ts', nodeFlags), '--config', file], childEnv({ BENCH_GATEWAY_API_KEY: s.apiKey }));
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/readyz`, child, 60_000);
  return { child, url };
}

/** The servers of the gateway comparison (upstream, plain proxy, jose proxy, gateway; the stub sidecar and its gateway). */
interface GatewayProcs {
  children: Child[];
  urls: Record<GatewayVariant, string>;
  /** The process that serves each variant (the upstream for `direct`). */
  pids: Record<GatewayVariant, number>;
  /** The stand-in sidecar behind the `stub` variant's gateway. */
  stubPid: number;
  jwt: string;
}

async function startGatewayProcs(run: Run, sc: Sidecar, s: Setup): Promise<GatewayProcs> {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { extractable: true });
  const jwt = await new SignJWT({ scope: s.scope }).setProtectedHeader({ alg: 'EdDSA' }).setIssuer('bench-issuer').setAudience('bench-api')
    .setSubject('agent-1').setIssuedAt().setExpirationTime('2h').sign(privateKey);
  const jwk = { BENCH_JWT_PUBLIC_JWK: JSON.stringify(await exportJWK(publicKey)) };
  if (run.plan.smoke) {
    // One helper process for the three baselines and the stub sidecar (startup dominates a tiny run).
    const all = await startHelper('all', [`--scope=${s.scope}`], jwk);
    const gws = await Promise.allSettled([startGateway(run, sc, s, all.urls.upstream!), startGateway(run, sc, s, all.urls.upstream!, [], all.urls.stub!)]);
    if (gws.some((x) => x.status === 'rejected')) {
      await Promise.all([all.child, ...gws.flatMap((x) => (x.status === 'fulfilled' ? [x.value.child] : []))].map((c) => c.stop(5000)));
      throw (gws.find((x) => x.status === 'rejected') as PromiseRejectedResult).reason;
    }
    const [gw, gs] = gws.map((x) => (x as PromiseFulfilledResult<{ child: Child; url: string }>).value) as [{ child: Child; url: string }, { child: Child; url: string }];
    return {
      children: [all.child, gw.child, gs.child], urls: { gateway: gw.url, stub: gs.url, plain: all.urls.plain!, jose: all.urls.jose!, direct: all.urls.upstream! },
      pids: { gateway: gw.child.pid, stub: gs.child.pid, plain: all.child.pid, jose: all.child.pid, direct: all.child.pid }, stubPid: all.child.pid, jwt,
    };
  }
  const up = await startHelper('upstream', []);
  const upstreamUrl = up.urls.upstream!;
  type Started = { child: Child; urls: Record<string, string> };
  const started = await Promise.allSettled([
    startHelper('plain', [`--upstream=${upstreamUrl}`]),
    startHelper('jose', [`--upstream=${upstreamUrl}`, `--scope=${s.scope}`], jwk),
    startGateway(run, sc, s, upstreamUrl).then((g) => ({ child: g.child, urls: { gateway: g.url } })),
    startHelper('stub', []),
  ]);
  let stubGw: PromiseSettledResult<Started> | undefined;
  const stubUrl = started[3].status === 'fulfilled' ? started[3].value.urls.stub! : undefined;
  if (stubUrl !== undefined) {
    [stubGw] = await Promise.allSettled([startGateway(run, sc, s, upstreamUrl, [], stubUrl).then((g) => ({ child: g.child, urls: { stub: g.url } }))]);
  }
  const all = stubGw ? [...started, stubGw] : started;
  const failed = all.find((x) => x.status === 'rejected');
  if (failed) {
    await Promise.all([up.child, ...all.flatMap((x) => (x.status === 'fulfilled' ? [x.value.child] : []))].map((c) => c.stop(5000)));
    throw (failed as PromiseRejectedResult).reason;
  }
  const [plain, jose, gw, stubSc, gs] = all.map((x) => (x as PromiseFulfilledResult<Started>).value) as [Started, Started, Started, Started, Started];
  return {
    children: [up.child, plain.child, jose.child, gw.child, stubSc.child, gs.child],
    urls: { gateway: gw.urls.gateway!, stub: gs.urls.stub!, plain: plain.urls.plain!, jose: jose.urls.jose!, direct: upstreamUrl },
    pids: { gateway: gw.child.pid, stub: gs.child.pid, plain: plain.child.pid, jose: jose.child.pid, direct: up.child.pid }, stubPid: stubSc.child.pid, jwt,
  };
}

async function gatewayComparison(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults, procs: GatewayProcs): Promise<void> {
  const g = run.plan.gateway;
  const ceil = br.ceiling!;
  const { children, urls, jwt, pids } = procs;
  const pools = { gateway: pool(urls.gateway, g.concurrency), stub: pool(urls.stub, g.concurrency), plain: pool(urls.plain, g.concurrency), jose: pool(urls.jose, g.concurrency), direct: pool(urls.direct, g.concurrency) };
  const sp = pool(sc.url, 64);
  try {
    // Bundles: the gateway cannot beat the sidecar's verify rate; size from what verify achieved.
    const best = Math.max(...(br.verify ?? []).map((r) => r.rps), 0) || ceil.verifyPerSec * 0.7;
    const c1 = br.verify?.find((r) => r.concurrency === 1);
    const latRate = 1e6 / ((c1?.p50 ?? 1e6 / ceil.verifyPerSec) + 600);
    // The gateway adds a hop, so it runs below the sidecar's best verify rate: size for 80 % of it,
    // within the generation budget.
    let wantTp = need(g.tpSeconds, best * 0.8, run.plan.maxBundles);
    let wantLat = need(g.latSeconds, latRate, run.plan.maxBundles);
    const warm = need(g.warmupSeconds, best * 0.8, run.plan.maxBundles);
    const budget = Math.floor(run.plan.genSeconds * presentRate(br));
    if (warm + g.rounds * (wantTp + wantLat) > budget) {
      const f = Math.max(0.05, (budget - warm) / (g.rounds * (wantTp + wantLat)));
      wantTp = Math.max(8, Math.floor(wantTp * f));
      wantLat = Math.max(8, Math.floor(wantLat * f));
    }
    const total = Math.min(run.plan.maxBundles, warm + g.rounds * (wantTp + wantLat));
    log(`${backend}: gateway: making ${total} proof headers`);
    const headers = await makeBundles(sp, s, total, 'header', 300);
    let used = 0;
    const auth = `Bearer ${jwt}`;
    const variants: GatewayVariant[] = ['gateway', 'stub', 'plain', 'jose', 'direct'];
    // The stub answers allow without reading the proof: one real header serves every stub request.
    const stubHeader = headers[headers.length - 1]!;
    const req = (v: GatewayVariant) => (i: number): Req => {
      const path = `/items/${i}`;
      if (v === 'gateway') return { method: 'GET', path, headers: { 'x-service-proof': headers[used + i]! } };
      if (v === 'stub') return { method: 'GET', path, headers: { 'x-service-proof': stubHeader } };
      if (v === 'jose') return { method: 'GET', path, headers: { authorization: auth } };
      return { method: 'GET', path };
    };
    // CPU seconds per variant at c=50: the serving process, the upstream and (gateway) the sidecar.
    const cpu: Record<GatewayVariant, { proxy: number; upstream: number; sidecar: number; n: number }> = {
      gateway: { proxy: 0, upstream: 0, sidecar: 0, n: 0 }, stub: { proxy: 0, upstream: 0, sidecar: 0, n: 0 }, plain: { proxy: 0, upstream: 0, sidecar: 0, n: 0 },
      jose: { proxy: 0, upstream: 0, sidecar: 0, n: 0 }, direct: { proxy: 0, upstream: 0, sidecar: 0, n: 0 },
    };
    const load = async (v: GatewayVariant, concurrency: number, count: number, seconds: number, account = false): Promise<LoadResult> => {
      const n = v === 'gateway' ? Math.min(count, headers.length - used) : 200_000;
      const sidecarPid = v === 'stub' ? procs.stubPid : sc.child.pid;
      const c0 = account ? [cpuSeconds(pids[v]), cpuSeconds(pids.direct), cpuSeconds(sidecarPid)] : [];
      const r = await runLoad({ pool: pools[v], concurrency, count: n, maxSeconds: seconds, request: req(v) });
      if (account) {
        const c = cpu[v];
        c.proxy += cpuSeconds(pids[v]) - c0[0]!;
        c.upstream += cpuSeconds(pids.direct) - c0[1]!;
        c.sidecar += cpuSeconds(sidecarPid) - c0[2]!;
        c.n += r.count;
      }
      if (v === 'gateway') {
        for (let i = used; i < used + r.count; i++) headers[i] = '';
        used += r.count;
      }
      return r;
    };
    // Warm-up at the measured concurrency, long enough for V8 to optimize every server's hot path
    // (a short warm-up at low concurrency left the first round at about half the second's rate).
    for (const v of variants) await load(v, g.concurrency, warm, g.warmupSeconds);
    const tp: Record<GatewayVariant, LoadResult[]> = { gateway: [], stub: [], plain: [], jose: [], direct: [] };
    const lat: Record<GatewayVariant, LoadResult[]> = { gateway: [], stub: [], plain: [], jose: [], direct: [] };
    for (let round = 0; round < g.rounds; round++) {
      for (const v of variants) tp[v].push(await load(v, g.concurrency, wantTp, g.tpSeconds, true));
      for (const v of variants) lat[v].push(await load(v, 1, wantLat, g.latSeconds));
      log(`${backend}: gateway round ${round + 1}/${g.rounds}: c=${g.concurrency} ${variants.map((v) => `${v} ${tp[v].at(-1)!.rps.toFixed(0)}/s`).join(', ')}`);
    }
    br.gateway = {};
    for (const v of variants) {
      const c = cpu[v];
      const per = (x: number): number => (x * 1000) / Math.max(1, c.n);
      br.gateway[v] = {
        c50: pooled(tp[v]), c1: pooled(lat[v]),
        cpuMsPerReq: { server: v === 'direct' ? per(c.upstream) : per(c.proxy), upstream: per(c.upstream), ...(v === 'gateway' || v === 'stub' ? { sidecar: per(c.sidecar) } : {}) },
      };
    }
  } finally {
    await Promise.all([...Object.values(pools), sp].map((p) => p.close().catch(() => undefined)));
    await Promise.all(children.map((c) => c.stop(5000)));
  }
}

/** Profiles the gateway: a fresh gateway process with --cpu-prof under c=50 load for a few seconds. */
async function profileGateway(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults): Promise<void> {
  const dir = path.join(OUT, `prof-${backend}-gateway`);
  fs.rmSync(dir, { recursive: true, force: true });
  const up = await startHelper('upstream', []);
  const gw = await startGateway(run, sc, s, up.urls.upstream!, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  const sp = pool(sc.url, 64);
  const gp = pool(gw.url, 50);
  const at = (): number => Number(process.hrtime.bigint() / 1000n);
  let t0 = 0;
  let t1 = 0;
  let exit = 0;
  try {
    const best = (bestRps(br.verify) ?? br.ceiling!.verifyPerSec * 0.7) * 0.8;
    const headers = await makeBundles(sp, s, Math.min(need(run.plan.profileSeconds, best, run.plan.maxBundles), Math.floor(run.plan.genSeconds * presentRate(br))), 'header', 300);
    const req = (i: number): Req => ({ method: 'GET', path: `/items/${i}`, headers: { 'x-service-proof': headers[i]! } });
    // Warm up at the measured concurrency, so connection set-up stays out of the profiled window.
    const warm = Math.min(300, Math.floor(headers.length / 4));
    await runLoad({ pool: gp, concurrency: 50, count: warm, maxSeconds: 10, request: req });
    t0 = at();
    await runLoad({ pool: gp, concurrency: 50, count: headers.length - warm, maxSeconds: run.plan.profileSeconds, request: (i) => req(warm + i) });
    t1 = at();
    await gp.close();
    await gw.child.stop(10_000);
    exit = at();
  } finally {
    await sp.close();
    await gp.close().catch(() => undefined);
    await gw.child.stop(10_000);
    await up.child.stop(5000);
  }
  const file = fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) { log('gateway profile: no .cpuprofile written'); return; }
  const summary = summarizeProfile(path.join(dir, file), { top: 15, fromEndUs: [exit - t0, exit - t1] });
  br.profiles = { ...br.profiles, gateway: summary };
  process.stderr.write(formatProfile(summary, `${backend}: gateway under c=50`) + '\n');
}

/**
 * Profiles the sidecar: makes bundles and challenges on the running sidecar,
 * restarts it on the same data dir with --cpu-prof, runs verify at c=64 and
 * present at c=16 (each for a few seconds), stops it and summarises each
 * window of the profile. Returns the restarted (unprofiled) sidecar.
 */
async function profileSidecar(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults): Promise<Sidecar> {
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
    const verify = summarizeProfile(f, { top: 15, fromEndUs: [marks.exit - marks.v0, marks.exit - marks.v1] });
    const present = summarizeProfile(f, { top: 15, fromEndUs: [marks.exit - marks.p0, marks.exit - marks.p1] });
    br.profiles = { ...br.profiles, verify, present };
    process.stderr.write(formatProfile(verify, `${backend}: sidecar main thread, verify c=64`) + '\n');
    process.stderr.write(formatProfile(present, `${backend}: sidecar main thread, present c=16`) + '\n');
    for (const w of files.filter((x) => x !== file)) {
      const wf = path.join(dir, w);
      process.stderr.write(formatProfile(summarizeProfile(wf, { top: 5, fromEndUs: [marks.exit - marks.v0, marks.exit - marks.v1] }), `${backend}: crypto worker ${w}, verify c=64`) + '\n');
      process.stderr.write(formatProfile(summarizeProfile(wf, { top: 5, fromEndUs: [marks.exit - marks.p0, marks.exit - marks.p1] }), `${backend}: crypto worker ${w}, present c=16`) + '\n');
    }
  } else log('sidecar profile: no .cpuprofile written');
  return startSidecar(run, backend, sc.dataDir);
}

// ---------------------------------------------------------------- scaling + webhooks (one backend)

async function verifyP50Rounds(run: Run, sides: { name: string; sc: Sidecar }[], s: Setup): Promise<Record<string, LoadResult>> {
  const k = run.plan.scaling.verifiesPerRound;
  const out: Record<string, LoadResult[]> = {};
  const pools = new Map(sides.map((x) => [x.name, pool(x.sc.url, 16)]));
  try {
    for (let round = 0; round <= run.plan.scaling.rounds; round++) {
      // Rotate the order each round, so no data set always runs first (or right after seeding I/O).
      for (const x of sides.map((_, i) => sides[(i + round) % sides.length]!)) {
        const p = pools.get(x.name)!;
        const bodies = await makeBundles(p, s, round === 0 ? Math.max(8, Math.floor(k / 2)) : k, 'verify', 120);
        const r = await verifyRunner(p, s, bodies).run(1, bodies.length, 60);
        if (round > 0) (out[x.name] ??= []).push(r); // round 0 warms up
      }
    }
  } finally {
    await Promise.all([...pools.values()].map((p) => p.close()));
  }
  return Object.fromEntries(Object.entries(out).map(([n, rs]) => [n, pooled(rs)]));
}

/** A copy of a sidecar's database taken right after the set-up flow: the base of the store steps. */
interface StoreBase { backend: Backend; file: string; setup: Setup }

function snapshotBase(run: Run, sc: Sidecar, s: Setup): StoreBase {
  const file = path.join(run.tmp, `${sc.backend}-store-base.sqlite`);
  const db = new BenchSeedDb(sc.dbFile, { live: true });
  try { db.snapshot(file); } finally { db.close(); }
  return { backend: sc.backend, file, setup: s };
}

async function storeSections(run: Run, backend: Backend, base?: StoreBase): Promise<void> {
  const { plan } = run;
  if (!base) {
    const sc0 = await startSidecar(run, backend, freshDir(run, `${backend}-store-base`), { name: `sidecar(${backend}, store base)` });
    try {
      base = snapshotBase(run, sc0, await setUp(sc0.url, run.mail, `store-${backend}@bench.example`));
    } finally {
      await stopSidecar(sc0);
    }
  }
  const s = base.setup;
  const copy = (name: string): string => {
    const d = freshDir(run, `${backend}-${name}`);
    fs.copyFileSync(base.file, path.join(d, DB_FILE_NAME));
    return d;
  };

  const scaling = plan.sections.has('scaling') ? (): Promise<void> => scalingStep(run, backend, s, copy) : undefined;
  const webhooks = plan.sections.has('webhooks') ? (): Promise<void> => webhooksStep(run, backend, s, copy) : undefined;
  // Smoke runs overlap the two (startup dominates a tiny run); measured runs keep them apart.
  if (plan.smoke) await Promise.all([scaling?.(), webhooks?.()]);
  else {
    await scaling?.();
    await webhooks?.();
  }
}

async function scalingStep(run: Run, backend: Backend, s: Setup, copy: (name: string) => string): Promise<void> {
  const { plan } = run;
  const sc = plan.scaling;
  const dirs = { small: copy('audit-small'), big: copy('audit-big'), certs: copy('certs') };
  const seedT0 = performance.now();
  const seed = (dir: string, fn: (db: BenchSeedDb) => void): void => {
    const db = new BenchSeedDb(path.join(dir, DB_FILE_NAME));
    try { fn(db); db.checkpoint(); } finally { db.close(); }
  };
  seed(dirs.small, (db) => db.seedAudit(s.certId, sc.small));
  const t1 = performance.now();
  seed(dirs.big, (db) => db.seedAudit(s.certId, sc.big));
  const t2 = performance.now();
  seed(dirs.certs, (db) => { db.seedAudit(s.certId, sc.small); db.seedCertificatesAndAgents(s.certId, sc.certs); });
  const t3 = performance.now();
  log(`${backend}: seeded ${sc.small} audit rows (${((t1 - seedT0) / 1000).toFixed(1)} s), ${sc.big} audit rows (${((t2 - t1) / 1000).toFixed(1)} s), ${sc.certs} certificates + agents (${((t3 - t2) / 1000).toFixed(1)} s)`);
  const names = { small: `audit ${sc.small}`, big: `audit ${sc.big}`, certs: `certs ${sc.certs}` };
  const sides = await Promise.all((Object.keys(dirs) as (keyof typeof dirs)[]).map(async (k) => ({
    name: k, sc: await startSidecar(run, backend, dirs[k], { name: `sidecar(${backend}, ${names[k]})` }),
  })));
  try {
    const p50 = await verifyP50Rounds(run, sides, s);
    // Audit reads with a session, interleaved between the small and the big audit table.
    const reads: Record<string, LoadResult[]> = { small: [], big: [] };
    const users = { small: await login(sides[0]!.sc.url, run.mail, s.email), big: await login(sides[1]!.sc.url, run.mail, s.email) };
    for (let round = 0; round <= plan.scaling.rounds; round++) {
      for (const k of round % 2 ? ['big', 'small'] as const : ['small', 'big'] as const) {
        const side = sides.find((x) => x.name === k)!;
        const p = pool(side.sc.url, 1);
        const cookie = [...users[k].jar].map(([a, b]) => `${a}=${b}`).join('; ');
        const r = await runLoad({
          pool: p, concurrency: 1, count: round === 0 ? 20 : plan.scaling.auditReads, maxSeconds: 20,
          request: () => ({ method: 'GET', path: '/v1/service/audit/personal?limit=25', headers: { cookie } }),
          onResponse: (_i, status, text) => status === 200 && text.startsWith('{"events":[{'),
        });
        await p.close();
        if (round > 0) reads[k]!.push(r);
      }
    }
    const counts = Object.fromEntries(sides.map((x) => {
      const db = new BenchSeedDb(x.sc.dbFile, { live: true });
      try { return [x.name, db.counts()]; } finally { db.close(); }
    }));
    run.results.scaling = {
      backend, rows: { small: sc.small, big: sc.big, certs: sc.certs }, counts,
      seedSeconds: { small: (t1 - seedT0) / 1000, big: (t2 - t1) / 1000, certs: (t3 - t2) / 1000 },
      verify: { small: p50.small!, big: p50.big!, certs: p50.certs! },
      auditRead: { small: pooled(reads.small!), big: pooled(reads.big!) },
    };
    log(`${backend}: scaling verify p50: ${names.small} ${p50.small!.p50.toFixed(0)} µs, ${names.big} ${p50.big!.p50.toFixed(0)} µs, ${names.certs} ${p50.certs!.p50.toFixed(0)} µs; audit read p50 ${run.results.scaling.auditRead.big.p50.toFixed(0)} µs at ${sc.big} rows`);
  } finally {
    await Promise.all(sides.map((x) => stopSidecar(x.sc)));
  }
  }

async function webhooksStep(run: Run, backend: Backend, s: Setup, copy: (name: string) => string): Promise<void> {
  const { plan } = run;
  const n = plan.webhooks.events;
  const dir = copy('webhooks');
  const received = new Set<string>();
  let first = 0;
  let last = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((r) => { done = r; });
  let expected = Infinity;
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['x-service-delivery-id'] ?? '');
      const now = performance.now();
      if (!received.has(id)) {
        received.add(id);
        if (!first) first = now;
        last = now;
      }
      res.writeHead(204).end();
      if (received.size >= expected) done();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
  const box = createSecretBox(new Uint8Array(Buffer.from(run.masterKey, 'base64')));
  const db = new BenchSeedDb(path.join(dir, DB_FILE_NAME));
  try {
    const rows = Array.from({ length: n }, (_, i) => {
      const id = crypto.randomUUID();
      const body = Buffer.from(JSON.stringify({ event: 'delegation.revoked', cert_id: `cert-${crypto.randomUUID()}`, agent_id: s.agentId, connection_id: s.connectionId, org_id: 'bench', reason: `bench-${i}` }));
      return { id, eventType: 'delegation.revoked', bodyEnc: box.seal(body, AAD.outboxBody(id)) };
    });
    db.seedOutbox(s.connectionId, rows);
    db.setCallbackUrl(db.platformOf(s.connectionId), url);
    expected = db.outboxStates().pending ?? n;
    db.checkpoint();
  } finally {
    db.close();
  }
  const t0 = performance.now();
  const sc = await startSidecar(run, backend, dir, { name: `sidecar(${backend}, webhooks)`, webhooks: true });
  const ready = performance.now();
  try {
    await Promise.race([all, sleep(plan.webhooks.maxSeconds * 1000)]);
  } finally {
    await stopSidecar(sc);
    await new Promise<void>((r) => receiver.close(() => r()));
  }
  const spanS = Math.max(1e-3, (last - first) / 1000);
  run.results.webhooks = {
    backend, enqueued: expected, delivered: received.size, perSec: received.size > 1 ? (received.size - 1) / spanS : 0,
    startupS: (ready - t0) / 1000, allDeliveredAfterReadyS: received.size >= expected ? (last - ready) / 1000 : undefined,
  };
  log(`${backend}: webhooks: ${received.size}/${expected} delivered, ${run.results.webhooks.perSec.toFixed(0)}/s`);
}

// ---------------------------------------------------------------- main

function machine(): Results['meta']['machine'] {
  const cpu = /model name\s*:\s*(.*)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  return { nproc: os.availableParallelism(), cpuModel: cpu.trim(), memGb: Math.round(os.totalmem() / 2 ** 30), loadAvg: os.loadavg().map((x) => Number(x.toFixed(2))) };
}

async function main(): Promise<number> {
  const started = performance.now();
  let plan: Plan;
  try {
    plan = parsePlan(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  const watchdog = setTimeout(() => {
    process.stderr.write(`[bench] watchdog: run exceeded ${plan.maxSeconds} s; killing children\n`);
    killAll();
    process.exit(1);
  }, plan.maxSeconds * 1000);
  watchdog.unref();

  const major = Number(process.versions.node.split('.')[0]);
  let backends = plan.backends;
  if (backends.includes('native') && !node24Available()) {
    log('native backend skipped: node_modules/node/bin/node (Node 24 with ml-dsa-65) is not available');
    backends = backends.filter((b) => b !== 'native');
  }
  if (backends.includes('noble') && major >= 24) {
    log('noble backend skipped: the sidecar picks its ML-DSA backend by feature detection, and this Node has native ML-DSA');
    backends = backends.filter((b) => b !== 'noble');
  }
  if (!backends.length) { log('no backend to run'); return 1; }

  fs.mkdirSync(OUT, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-authz-bench-'));
  const mail = await startMailSink();
  const run: Run = {
    plan, mail, tmp, masterKey: crypto.randomBytes(32).toString('base64'),
    sqlite24: backends.includes('native') ? ensureNode24SqliteBinding(log) : undefined,
    results: {
      meta: {
        date: new Date().toISOString(), smoke: plan.smoke, full: plan.full, scale: plan.scale, command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
        sections: [...plan.sections], backends, machine: machine(), node: { loadGenerator: process.version }, durationS: 0,
      },
      backends: {},
    },
  };
  let failed = false;
  let storeBase: StoreBase | undefined;
  let storeP: Promise<void> | undefined;
  try {
    const perBackend = ['crypto', 'present', 'verify', 'gateway'].some((x) => plan.sections.has(x as never));
    for (const backend of perBackend ? backends : []) {
      const br: BackendResults = {};
      run.results.backends[backend] = br;
      const needSidecar = ['present', 'verify', 'gateway'].some((x) => plan.sections.has(x as never));
      // Smoke runs start the sidecar while the ceiling loop runs; measured runs keep the ceiling quiet.
      let scP = needSidecar && plan.smoke ? startSidecar(run, backend, freshDir(run, `${backend}-main`)) : undefined;
      scP?.catch(() => undefined);
      let ceiling;
      try {
        ceiling = await cryptoCeiling(run, backend);
      } catch (err) {
        if (scP) await stopSidecar(await scP).catch(() => undefined);
        throw err;
      }
      br.ceiling = ceiling;
      run.results.meta.node[backend] = ceiling.node;
      if (!needSidecar) continue;
      scP ??= startSidecar(run, backend, freshDir(run, `${backend}-main`));
      let sc = await scP;
      try {
        const s = await setUp(sc.url, run.mail, `bench-${backend}@bench.example`);
        if (backend === backends[0] && (plan.sections.has('scaling') || plan.sections.has('webhooks'))) {
          storeBase = snapshotBase(run, sc, s);
          // Smoke runs do the store steps alongside the rest (process start-up dominates a tiny run).
          if (plan.smoke) {
            storeP = storeSections(run, backends[0]!, storeBase);
            storeP.catch(() => undefined);
          }
        }
        log(`${backend}: sidecar pid ${sc.child.pid} ready on ${sc.url}; flow done (agent ${s.agentId})`);
        // Smoke runs start the gateway's servers while present/verify run (startup dominates a tiny run).
        let gwProcs = plan.smoke && plan.sections.has('gateway') ? startGatewayProcs(run, sc, s) : undefined;
        gwProcs?.catch(() => undefined);
        try {
          if (plan.sections.has('present') || plan.sections.has('verify')) await presentAndVerify(run, backend, sc, s, br);
          if (plan.sections.has('gateway')) {
            gwProcs ??= startGatewayProcs(run, sc, s);
            await gatewayComparison(run, backend, sc, s, br, await gwProcs);
            gwProcs = undefined;
          }
        } finally {
          if (gwProcs) await Promise.all((await gwProcs.catch(() => ({ children: [] as Child[] }))).children.map((c) => c.stop(5000)));
        }
        const primary = backend === backends[0];
        const t = evaluateTargets(run.results, backend);
        const missed = (names: string[]): boolean => t.some((x) => names.includes(x.id) && x.met === false);
        const wantSidecar = plan.profile === 'always' || (plan.profile === 'auto' && primary && missed(['cpu', 'verify-ratio', 'present']));
        const wantGateway = plan.sections.has('gateway') && (plan.profile === 'always' || (plan.profile === 'auto' && primary && missed(['gw-plain', 'gw-jose', 'gw-p99', 'gw-latency'])));
        if (wantSidecar && plan.sections.has('verify')) sc = await profileSidecar(run, backend, sc, s, br);
        if (wantGateway) await profileGateway(run, backend, sc, s, br);
      } finally {
        await stopSidecar(sc);
      }
    }
    if (storeP) await storeP;
    else if (plan.sections.has('scaling') || plan.sections.has('webhooks')) await storeSections(run, backends[0]!, storeBase);
  } catch (err) {
    failed = true;
    process.stderr.write(`[bench] FAILED: ${(err as Error).stack ?? String(err)}\n`);
  } finally {
    killAll();
    await mail.close();
    if (process.env.BENCH_KEEP_TMP) log(`kept the data dirs in ${tmp}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  }
  run.results.meta.durationS = (performance.now() - started) / 1000;
  run.results.targets = evaluateTargets(run.results, backends[0]!);
  const table = renderTable(run.results);
  const json = JSON.stringify(stripSamples(run.results), null, 2);
  const stamp = run.results.meta.date.replace(/[:.]/g, '-');
  fs.writeFileSync(path.join(OUT, `results-${stamp}${plan.smoke ? '-smoke' : ''}.json`), json);
  fs.writeFileSync(path.join(OUT, 'latest.json'), json);
  fs.writeFileSync(path.join(OUT, 'latest-table.md'), table + '\n');
  const svg = renderSvg(run.results);
  fs.writeFileSync(path.join(OUT, 'chart.svg'), svg);
  if (plan.full && !failed) fs.writeFileSync(path.join(ROOT, 'docs/benchmarks-chart.svg'), svg);
  process.stdout.write(table + '\n');
  log(`done in ${run.results.meta.durationS.toFixed(1)} s; results in ${path.relative(ROOT, OUT)}/latest.json`);
  const errors = Object.values(run.results.backends).flatMap((b) => [...(b.present ?? []), ...(b.verify ?? [])]).reduce((a, r) => a + r.errors, 0);
  if (errors) log(`warning: ${errors} failed requests in the present/verify steps`);
  return failed ? 1 : 0;
}

main().then((code) => {
  killAll();
  process.exit(code);
}, (err: unknown) => {
  process.stderr.write(`[bench] ${(err as Error).stack ?? String(err)}\n`);
  killAll();
  process.exit(1);
});
