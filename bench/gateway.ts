/**
 * The gateway comparison: the agent-authz gateway + sidecar against a stub
 * sidecar behind the same gateway, a plain proxy, a jose JWT proxy and the
 * upstream alone (bench/servers.ts processes), throughput at the plan's
 * concurrency and latency at c=1, with the CPU per request; and the
 * gateway's CPU profile.
 */
import fs from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { Backend } from './plan.js';
import { ROOT } from '../test/shared/node24.js';
import { Child, childEnv, cpuSeconds, freePort, tsArgs, waitForHttp } from './procs.js';
import { makeBundles, pool } from './flow.js';
import type { Setup } from './flow.js';
import { pooled, runLoad } from './load.js';
import type { LoadResult, Req } from './load.js';
import { formatProfile, readProfile, summarizeProfile } from './profile.js';
import { writeFlameGraph } from './flamegraph.js';
import { bestRps } from './report.js';
import type { BackendResults, GatewayVariant } from './report.js';
import { retryPort, verifyThreads } from './sidecar.js';
import type { Sidecar } from './sidecar.js';
import { OUT, log, need, presentRate } from './common.js';
import type { Run } from './common.js';

/** A helper server of bench/servers.ts. */
export type HelperMode = 'upstream' | 'plain' | 'jose' | 'stub' | 'allow' | 'hop';
/** A started server process and its base URL. */
type Proc = { child: Child; url: string };

/** Starts bench/servers.ts in `mode` ('all': every helper in one process; the URLs by name). */
async function startHelpers(mode: HelperMode | 'all', args: string[], env: Record<string, string> = {}, nodeFlags: string[] = []): Promise<{ child: Child; urls: Record<string, string> }> {
  const child = new Child(mode, process.execPath, [...tsArgs('bench/servers.ts', nodeFlags), mode, ...args], childEnv(env));
  const names = mode === 'all' ? ['upstream', 'plain', 'jose', 'stub', 'allow', 'hop'] : [mode];
  const urls: Record<string, string> = {};
  try {
    for (const name of names) {
      const m = await child.waitForLine(new RegExp(`^READY ${name} (\\d+)$`), 30_000);
      urls[name] = `http://127.0.0.1:${m[1]}`;
    }
  } catch (err) {
    await child.stop(5000);
    throw err;
  }
  return { child, urls };
}

/** Starts one helper server (bench/servers.ts `mode`; `nodeFlags` for its Node, e.g. --cpu-prof). */
export async function startHelper(mode: HelperMode, args: string[], env: Record<string, string> = {}, nodeFlags: string[] = []): Promise<Proc> {
  const h = await startHelpers(mode, args, env, nodeFlags);
  return { child: h.child, url: h.urls[mode]! };
}

/** Waits for every start and records the started processes in `children` (the caller stops them); throws the first failure. */
async function startedAll(starts: Promise<Proc>[], children: Child[]): Promise<Proc[]> {
  const r = await Promise.allSettled(starts);
  for (const x of r) if (x.status === 'fulfilled') children.push(x.value.child);
  const failed = r.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) throw failed.reason;
  return r.map((x) => (x as PromiseFulfilledResult<Proc>).value);
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
  const child = new Child('gateway', process.execPath, [...tsArgs('gateway-plugin/standalone/main.ts', [...run.nodeFlags, ...nodeFlags]), '--config', file], childEnv({ BENCH_GATEWAY_API_KEY: s.apiKey }));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/readyz`, child, 60_000);
  } catch (err) {
    await child.stop(5000);
    throw err;
  }
  return { child, url };
}

/** The servers of the gateway comparison (upstream, proxies, gateway; the stub sidecar and its gateway; the verify-hop floor and its allow service). */
export interface GatewayProcs {
  children: Child[];
  urls: Record<GatewayVariant, string>;
  /** The process that serves each variant (the upstream for `direct`). */
  pids: Record<GatewayVariant, number>;
  /** The stand-in sidecar behind the `stub` variant's gateway. */
  stubPid: number;
  /** The allow service behind the `hop` variant. */
  allowPid: number;
  jwt: string;
}

/** Starts the servers of the gateway comparison (in smoke runs one helper process serves the baselines, the stub and the hop). */
export async function startGatewayProcs(run: Run, sc: Sidecar, s: Setup): Promise<GatewayProcs> {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { extractable: true });
  const jwt = await new SignJWT({ scope: s.scope }).setProtectedHeader({ alg: 'EdDSA' }).setIssuer('bench-issuer').setAudience('bench-api')
    .setSubject('agent-1').setIssuedAt().setExpirationTime('2h').sign(privateKey);
  const jwk = { BENCH_JWT_PUBLIC_JWK: JSON.stringify(await exportJWK(publicKey)) };
  const children: Child[] = [];
  try {
    if (run.plan.smoke) {
      // One helper process for the baselines, the stub sidecar and the hop (startup dominates a tiny run).
      const all = await startHelpers('all', [`--scope=${s.scope}`], jwk);
      children.push(all.child);
      const [gw, gs] = await startedAll([startGateway(run, sc, s, all.urls.upstream!), startGateway(run, sc, s, all.urls.upstream!, [], all.urls.stub!)], children) as [Proc, Proc];
      const h = all.child.pid;
      return {
        children, urls: { gateway: gw.url, stub: gs.url, plain: all.urls.plain!, jose: all.urls.jose!, hop: all.urls.hop!, direct: all.urls.upstream! },
        pids: { gateway: gw.child.pid, stub: gs.child.pid, plain: h, jose: h, hop: h, direct: h }, stubPid: h, allowPid: h, jwt,
      };
    }
    const [up] = await startedAll([startHelper('upstream', [])], children) as [Proc];
    const [plain, jose, gw, stub, allow] = await startedAll([
      startHelper('plain', [`--upstream=${up.url}`]),
      startHelper('jose', [`--upstream=${up.url}`, `--scope=${s.scope}`], jwk),
      startGateway(run, sc, s, up.url),
      startHelper('stub', []),
      startHelper('allow', []),
    ], children) as [Proc, Proc, Proc, Proc, Proc];
    const [gs, hop] = await startedAll([
      startGateway(run, sc, s, up.url, [], stub.url),
      startHelper('hop', [`--upstream=${up.url}`, `--verify=${allow.url}`]),
    ], children) as [Proc, Proc];
    return {
      children, urls: { gateway: gw.url, stub: gs.url, plain: plain.url, jose: jose.url, hop: hop.url, direct: up.url },
      pids: { gateway: gw.child.pid, stub: gs.child.pid, plain: plain.child.pid, jose: jose.child.pid, hop: hop.child.pid, direct: up.child.pid },
      stubPid: stub.child.pid, allowPid: allow.child.pid, jwt,
    };
  } catch (err) {
    await Promise.all(children.map((c) => c.stop(5000)));
    throw err;
  }
}

/** The gateway comparison for one backend: fills `br.gateway`; stops the servers of `procs` at the end. */
export async function gatewayComparison(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults, procs: GatewayProcs): Promise<void> {
  const g = run.plan.gateway;
  const ceil = br.ceiling!;
  const { children, urls, jwt, pids } = procs;
  const variants: GatewayVariant[] = ['gateway', 'stub', 'hop', 'plain', 'jose', 'direct'];
  const pools = Object.fromEntries(variants.map((v) => [v, pool(urls[v], g.concurrency)])) as Record<GatewayVariant, ReturnType<typeof pool>>;
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
    // Headers for the warm-up round (c=50, then c=1) and for each measured round's two parts.
    const needed = (): number => warm + wantLat + g.rounds * (wantTp + wantLat);
    if (needed() > budget) {
      const f = Math.max(0.05, (budget - warm) / (needed() - warm));
      wantTp = Math.max(8, Math.floor(wantTp * f));
      wantLat = Math.max(8, Math.floor(wantLat * f));
    }
    const total = Math.min(run.plan.maxBundles, needed());
    log(`${backend}: gateway: making ${total} proof headers`);
    const headers = await makeBundles(sp, s, total, 'header', 300);
    let used = 0;
    const auth = `Bearer ${jwt}`;
    // The stub and the allow service answer allow without reading the proof: one real header serves all their requests.
    const stubHeader = headers[headers.length - 1]!;
    const req = (v: GatewayVariant) => (i: number): Req => {
      const path = `/items/${i}`;
      if (v === 'gateway') return { method: 'GET', path, headers: { 'x-service-proof': headers[used + i]! } };
      if (v === 'stub' || v === 'hop') return { method: 'GET', path, headers: { 'x-service-proof': stubHeader } };
      if (v === 'jose') return { method: 'GET', path, headers: { authorization: auth } };
      return { method: 'GET', path };
    };
    // CPU seconds per variant at c=50: the serving process, the upstream, the service behind it (sidecar, stub or allow) and this load generator.
    const cpu = Object.fromEntries(variants.map((v) => [v, { proxy: 0, upstream: 0, sidecar: 0, loadGen: 0, n: 0 }])) as
      Record<GatewayVariant, { proxy: number; upstream: number; sidecar: number; loadGen: number; n: number }>;
    // Where the sidecar checked the signatures in the gateway's measured c=50 rounds (inline when the machine is shared).
    const threads = { main: 0, worker: 0 };
    const load = async (v: GatewayVariant, concurrency: number, count: number, seconds: number, account = false): Promise<LoadResult> => {
      const n = v === 'gateway' ? Math.min(count, headers.length - used) : 200_000;
      const sidecarPid = v === 'stub' ? procs.stubPid : v === 'hop' ? procs.allowPid : sc.child.pid;
      // The scrapes of the sidecar's counters stay outside the CPU accounting below.
      const t0 = account && v === 'gateway' ? await verifyThreads(sc.url) : undefined;
      const c0 = account ? [cpuSeconds(pids[v]), cpuSeconds(pids.direct), cpuSeconds(sidecarPid)] : [];
      const self0 = process.cpuUsage();
      const r = await runLoad({ pool: pools[v], concurrency, count: n, maxSeconds: seconds, request: req(v) });
      if (account) {
        const c = cpu[v];
        const self = process.cpuUsage(self0);
        c.proxy += cpuSeconds(pids[v]) - c0[0]!;
        c.upstream += cpuSeconds(pids.direct) - c0[1]!;
        c.sidecar += cpuSeconds(sidecarPid) - c0[2]!;
        c.loadGen += (self.user + self.system) / 1e6;
        c.n += r.count;
      }
      const t1 = t0 ? await verifyThreads(sc.url) : undefined;
      if (t0 && t1) { threads.main += t1.main - t0.main; threads.worker += t1.worker - t0.worker; }
      if (v === 'gateway') {
        for (let i = used; i < used + r.count; i++) headers[i] = '';
        used += r.count;
      }
      return r;
    };
    // Warm-up: one unmeasured round in the pattern of the measured ones: every variant at the
    // measured concurrency (a short warm-up at low concurrency left the first round at about half
    // the second's rate), then at c=1. With the c=50 part alone the first measured round still ran
    // below the second: the gateway in 9 of 9 runs, the other variants in most (docs/benchmarks.md,
    // "The first round"). The first scrape loads fetch into this process: keep that out of the rounds.
    // The measured rounds keep their headers where the plan caps them (smoke runs): the warm-up gets what is left.
    const spare = (): number => Math.max(0, headers.length - used - g.rounds * (wantTp + wantLat));
    await verifyThreads(sc.url);
    for (const v of variants) await load(v, g.concurrency, Math.min(warm, spare()), g.warmupSeconds);
    for (const v of variants) await load(v, 1, Math.min(wantLat, spare()), g.latSeconds);
    const tp = Object.fromEntries(variants.map((v) => [v, [] as LoadResult[]])) as Record<GatewayVariant, LoadResult[]>;
    const lat = Object.fromEntries(variants.map((v) => [v, [] as LoadResult[]])) as Record<GatewayVariant, LoadResult[]>;
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
        cpuMsPerReq: {
          server: v === 'direct' ? per(c.upstream) : per(c.proxy), upstream: per(c.upstream), loadGen: per(c.loadGen),
          ...(v === 'gateway' || v === 'stub' || v === 'hop' ? { sidecar: per(c.sidecar) } : {}),
        },
        ...(v === 'gateway' && threads.main + threads.worker > 0 ? { verifyThreads: { ...threads } } : {}),
      };
    }
  } finally {
    await Promise.all([...Object.values(pools), sp].map((p) => p.close().catch(() => undefined)));
    await Promise.all(children.map((c) => c.stop(5000)));
  }
}

/** Profiles the gateway: a fresh gateway process with --cpu-prof under c=50 load for a few seconds. */
export async function profileGateway(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults): Promise<void> {
  const dir = path.join(OUT, `prof-${backend}-gateway`);
  fs.rmSync(dir, { recursive: true, force: true });
  const up = await startHelper('upstream', []);
  let gw: Proc;
  try {
    gw = await startGateway(run, sc, s, up.url, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  } catch (err) {
    await up.child.stop(5000);
    throw err;
  }
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
  const window: [number, number] = [exit - t0, exit - t1];
  const profile = readProfile(path.join(dir, file));
  const summary = summarizeProfile(path.join(dir, file), { top: 15, fromEndUs: window, profile });
  process.stderr.write(formatProfile(summary, `${backend}: gateway under c=50`) + '\n');
  const flame = writeFlameGraph(path.join(dir, file), path.join(dir, 'flame.svg'), { title: `Gateway under c=50 (${backend} sidecar behind it)`, fromEndUs: window, profile });
  br.profiles = { ...br.profiles, gateway: summary, flames: [...(br.profiles?.flames ?? []), path.relative(ROOT, flame)] };
  log(`${backend}: flame graph in ${path.relative(ROOT, dir)}/flame.svg`);
}
