/**
 * The gateway's own cost (issue 36): the agent-authz gateway behind the stub
 * sidecar (bench/servers.ts `stub`: allow without work) against the "hop"
 * proxy (plain proxy + one call to the do-nothing `allow` service), at c=50,
 * in interleaved rounds, as CPU milliseconds per request of the proxy process
 * and of the decision service behind it. Several gateway checkouts can be
 * compared in the same rounds (`--gateway=LABEL:DIR`, e.g. a copy of an older
 * commit), so machine noise hits every variant alike; the figures to read are
 * the per-round ratios gateway ÷ hop and their spread. Without a real sidecar
 * it runs in seconds, not minutes: `npm run bench -- --only=gateway` gives the
 * full comparison. The proof header is a real bundle, signed here with a fresh
 * hybrid key (the stub never looks at it; the gateway pre-checks its shape).
 *
 *   npx tsx bench/gateway-cost.ts [--rounds=4] [--seconds=3] [--warmup=10] [--concurrency=50]
 *     [--gateway=LABEL:DIR]... [--profile=DIR] [--strace] [--threads] [--dist] [--node-flags=A,B]
 *
 * `--profile=DIR` instead profiles the first gateway and then a hop proxy
 * (`--cpu-prof`) for `--seconds` under load each and prints the top self-time
 * entries of that window.
 * `--strace` counts the proxies' system calls per request (strace -c; slows them down);
 * `--threads` splits their CPU per request by thread (main, GC helpers, libuv pool);
 * `--dist` runs each checkout's compiled gateway (dist/, `npm run build`) without tsx.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { ROOT } from '../test/shared/node24.js';
import { createSigner } from '../src/crypto/hybrid.js';
import { encodeProofHeader, signProof } from '../src/proof.js';
import { CLOCK_TICKS, Child, childEnv, cpuSeconds, freePort, waitForHttp } from './procs.js';
import { pool } from './flow.js';
import { runLoad } from './load.js';
import type { Req } from './load.js';
import { startHelper } from './gateway.js';
import { formatProfile, readProfile, summarizeProfile } from './profile.js';

const arg = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ROUNDS = Number(arg('rounds') ?? 4);
const SECONDS = Number(arg('seconds') ?? 3);
const CONCURRENCY = Number(arg('concurrency') ?? 50);
/** Unmeasured load on each variant before the rounds (JIT compilation settles). */
const WARMUP = Number(arg('warmup') ?? 10);
const PROFILE = arg('profile');
const STRACE = process.argv.includes('--strace');
const THREADS = process.argv.includes('--threads');
const DIST = process.argv.includes('--dist');
/** `--node-flags=A,B`: more Node flags for the gateways (e.g. --trace-deopt). */
const GATEWAY_FLAGS = arg('node-flags')?.split(',') ?? [];
const GATEWAYS = process.argv.filter((a) => a.startsWith('--gateway=')).map((a) => {
  const [label, dir] = a.slice(10).split(':') as [string, string | undefined];
  return { label, dir: path.resolve(dir ?? ROOT) };
});
if (GATEWAYS.length === 0) GATEWAYS.push({ label: 'gateway', dir: ROOT });
const SCOPE = 'data:read';
const API_KEY = 'bench-gateway-cost-key';

/** One real proof header (signed with a fresh key; nobody checks the signature here). */
function proofHeaderValue(): string {
  const signer = createSigner(new Uint8Array(randomBytes(64)));
  const id = (n: number): string => `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
  return encodeProofHeader(signProof({
    v: 1, typ: 'agent-authz.proof', challenge: randomBytes(24).toString('base64url'), aud: id(1), agent_id: id(2),
    cert_id: `cert-${id(3)}`, cert_sha256: randomBytes(32).toString('hex'), presented_at: new Date().toISOString(),
  }, signer));
}

/** Starts the standalone gateway of checkout `dir` in front of `upstream`, calling `sidecar`. */
async function startGateway(
  dir: string, upstream: string, sidecar: string, tmp: string, flags: string[] = [],
): Promise<{ child: Child; url: string }> {
  const port = await freePort();
  const file = path.join(tmp, `gateway-${port}.json`);
  fs.writeFileSync(file, JSON.stringify({
    upstream_url: upstream, sidecar_url: sidecar, api_key_env: 'BENCH_GATEWAY_API_KEY',
    routes: [{ method: 'GET', path: '/items/*', scope: SCOPE }],
    listen: { host: '127.0.0.1', port }, metrics: false, log_level: 'warn',
  }));
  // --dist: the compiled gateway (dist/, `npm run build`) as the production image runs it, without tsx.
  const main = path.join(dir, DIST ? 'dist/gateway-plugin/standalone/main.js' : 'gateway-plugin/standalone/main.ts');
  const loader = DIST ? [] : ['--import', 'tsx'];
  const child = new Child(`gateway ${dir}`, process.execPath, [...flags, ...loader, main, '--config', file],
    childEnv({ BENCH_GATEWAY_API_KEY: API_KEY }));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/readyz`, child, 60_000);
  } catch (err) {
    await child.stop(5000);
    throw err;
  }
  return { child, url };
}

type Figures = { rps: number; proxyMs: number; serviceMs: number; errors: number };

/** Load on `url` at the set concurrency for the set time; CPU ms per request of `proxyPid` and `servicePid`. */
async function measure(
  url: string, proxyPid: number, servicePid: number, header: string, seconds = SECONDS,
): Promise<Figures> {
  const p = pool(url, CONCURRENCY);
  const trace = STRACE ? await straced(proxyPid) : undefined;
  try {
    const headers = { 'x-service-proof': header };
    const req = (i: number): Req => ({ method: 'GET', path: `/items/${i}`, headers });
    const c0 = [cpuSeconds(proxyPid), cpuSeconds(servicePid)];
    const t0 = THREADS ? threadCpu(proxyPid) : undefined;
    const r = await runLoad({ pool: p, concurrency: CONCURRENCY, count: 1e7, maxSeconds: seconds, request: req });
    const per = (s: number): number => (s * 1000) / Math.max(1, r.count);
    if (t0 !== undefined) {
      const t1 = threadCpu(proxyPid);
      const by = [...t1].map(([name, sec]) => `${name} ${(((sec - (t0.get(name) ?? 0)) * 1000) / r.count).toFixed(3)}`);
      process.stdout.write(`  CPU ms per request of ${proxyPid} by thread: ${by.join(', ')}\n`);
    }
    if (trace !== undefined) process.stdout.write(`  syscalls per request of ${proxyPid}: ${await trace(r.count)}\n`);
    return {
      rps: r.rps, errors: r.errors,
      proxyMs: per(cpuSeconds(proxyPid) - c0[0]!), serviceMs: per(cpuSeconds(servicePid) - c0[1]!),
    };
  } finally {
    await p.close();
  }
}

/**
 * `--strace`: counts the system calls of `pid` (strace -c) until the returned function is called
 * with the number of requests served meanwhile; it resolves to the calls per request by name.
 */
async function straced(pid: number): Promise<(requests: number) => Promise<string>> {
  const out = path.join(os.tmpdir(), `gateway-cost-strace-${pid}-${Date.now()}.txt`);
  const child = spawn('strace', ['-c', '-f', '-p', String(pid), '-o', out], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 500));
  return async (requests) => {
    child.kill('SIGINT');
    await new Promise((r) => child.once('exit', r));
    const rows = fs.readFileSync(out, 'utf8').split('\n').map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length >= 5 && /^\d/.test(f[3] ?? '') && f.at(-1) !== 'total');
    fs.rmSync(out, { force: true });
    return rows.map((f) => `${f.at(-1)} ${(Number(f[3]) / Math.max(1, requests)).toFixed(2)}`).join(', ');
  };
}

/** `--threads`: CPU seconds of the main thread of `pid` and of its other threads (all named `node`). */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : 'others';
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(name, (out.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS);
    } catch { /* the thread ended */ }
  }
  return out;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-cost-'));
  const children: Child[] = [];
  try {
    const header = proofHeaderValue();
    const up = await startHelper('upstream', []);
    children.push(up.child);
    const stub = await startHelper('stub', []);
    children.push(stub.child);
    const allow = await startHelper('allow', []);
    children.push(allow.child);
    const hop = await startHelper('hop', [`--upstream=${up.url}`, `--verify=${allow.url}`]);
    children.push(hop.child);
    const sidecarUrl = stub.url;
    if (PROFILE !== undefined) {
      const dir = GATEWAYS[0]!.dir;
      await profile('gateway (stub sidecar)', (flags) => startGateway(dir, up.url, sidecarUrl, tmp, flags),
        stub.child.pid, header, path.join(path.resolve(PROFILE), 'gateway'));
      const hopArgs = [`--upstream=${up.url}`, `--verify=${allow.url}`];
      await profile('hop', (flags) => startHelper('hop', hopArgs, {}, flags),
        allow.child.pid, header, path.join(path.resolve(PROFILE), 'hop'));
      return;
    }
    const gws = [];
    for (const g of GATEWAYS) {
      const gw = await startGateway(g.dir, up.url, sidecarUrl, tmp, GATEWAY_FLAGS);
      children.push(gw.child);
      gws.push({ ...g, ...gw });
    }
    const pids = gws.map((g) => `${g.label} ${g.child.pid}`).join(', ');
    process.stdout.write(`pids: ${pids}, hop ${hop.child.pid}, stub ${stub.child.pid}, allow ${allow.child.pid}\n`);
    // Warm-up: every variant once, unmeasured (JIT, connections).
    for (const g of gws) await measure(g.url, g.child.pid, stub.child.pid, header, WARMUP);
    await measure(hop.url, hop.child.pid, allow.child.pid, header, WARMUP);
    const ratios = new Map<string, number[]>(gws.map((g) => [g.label, []]));
    const show = (name: string, f: Figures, ratio?: number): void => {
      const rate = f.rps.toFixed(0).padStart(6);
      process.stdout.write(`  ${name.padEnd(12)} ${rate}/s  proxy ${f.proxyMs.toFixed(3)} ms/req`
        + `  service ${f.serviceMs.toFixed(3)} ms/req${ratio === undefined ? '' : `  ratio ${ratio.toFixed(2)}`}`
        + `${f.errors ? `  errors ${f.errors}` : ''}\n`);
    };
    for (let round = 0; round < ROUNDS; round++) {
      process.stdout.write(`round ${round + 1}/${ROUNDS} (c=${CONCURRENCY}, ${SECONDS} s each)\n`);
      // The hop runs between the gateways, and the gateways' order alternates by round.
      const order = round % 2 === 0 ? gws : [...gws].reverse();
      const results = new Map<string, Figures>();
      for (const [i, g] of order.entries()) {
        results.set(g.label, await measure(g.url, g.child.pid, stub.child.pid, header));
        if (i === 0) results.set('hop', await measure(hop.url, hop.child.pid, allow.child.pid, header));
      }
      const h = results.get('hop')!;
      show('hop', h);
      for (const g of gws) {
        const f = results.get(g.label)!;
        ratios.get(g.label)!.push(f.proxyMs / h.proxyMs);
        show(g.label, f, f.proxyMs / h.proxyMs);
      }
    }
    process.stdout.write('gateway CPU per request ÷ hop CPU per request (per round):\n');
    for (const [label, rs] of ratios) {
      process.stdout.write(`  ${label.padEnd(12)} median ${median(rs).toFixed(2)}  min ${Math.min(...rs).toFixed(2)}`
        + `  max ${Math.max(...rs).toFixed(2)}  [${rs.map((r) => r.toFixed(2)).join(' ')}]\n`);
    }
  } finally {
    await Promise.all(children.map((c) => c.stop(5000)));
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** A process started with `flags` (the gateway or the hop) profiled under load (see the file header). */
async function profile(
  name: string, start: (flags: string[]) => Promise<{ child: Child; url: string }>, servicePid: number,
  header: string, out: string,
): Promise<void> {
  fs.rmSync(out, { recursive: true, force: true });
  const proc = await start(['--cpu-prof', `--cpu-prof-dir=${out}`]);
  const at = (): number => Number(process.hrtime.bigint() / 1000n);
  let window: [number, number];
  try {
    await measure(proc.url, proc.child.pid, servicePid, header);
    const t0 = at();
    const f = await measure(proc.url, proc.child.pid, servicePid, header);
    const t1 = at();
    await proc.child.stop(10_000);
    const exit = at();
    window = [exit - t0, exit - t1];
    process.stdout.write(`${name}: ${f.rps.toFixed(0)}/s, ${f.proxyMs.toFixed(3)} ms/req (with --cpu-prof)\n`);
  } finally {
    await proc.child.stop(10_000);
  }
  const file = fs.readdirSync(out).find((x) => x.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error('no .cpuprofile written');
  const full = path.join(out, file);
  const summary = summarizeProfile(full, { top: 15, fromEndUs: window, profile: readProfile(full) });
  process.stdout.write(formatProfile(summary, `${name} under c=${CONCURRENCY}`) + '\n');
}

await main();
