/**
 * The agent rows (issue 22): MCP tool-call throughput through the
 * agent-authz gateway against the plain proxy in front of the same real MCP
 * server, and forward-auth through NGINX (`auth_request` to the gateway's
 * forward-auth endpoint, the configuration of docs/forward-auth.md) against
 * NGINX alone in front of the same upstream. Real processes only: the
 * sidecar of the run, gateways started like users start them
 * (`gateway-plugin/standalone/main.ts --config`), Debian's nginx, the helper
 * servers of bench/agent-servers.ts and the plain proxy of bench/servers.ts.
 * Every request to a gateway carries a fresh real proof; interleaved rounds
 * at the plan's concurrency, then c=1.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Backend } from './plan.js';
import { Child, childEnv, freePort, tsArgs, waitForHttp } from './procs.js';
import { makeBundles, pool } from './flow.js';
import type { Setup } from './flow.js';
import { pooled, runLoad } from './load.js';
import type { LoadResult, Req } from './load.js';
import { bestRps } from './report.js';
import type { BackendResults } from './report.js';
import type { AgentResults, AgentVariant } from './agents-report.js';
import { retryPort } from './sidecar.js';
import type { Sidecar } from './sidecar.js';
import { log, need, presentRate } from './common.js';
import type { Run } from './common.js';
import { NGINX_BIN, nginxSite } from '../test/shared/proxy-configs.js';

/** The started servers of the agent rows. */
export interface AgentProcs {
  children: Child[];
  /** Base URL per variant (the forward-auth variants are absent when nginx is not installed). */
  urls: Partial<Record<AgentVariant, string>>;
}

const hostPort = (url: string): string => new URL(url).host;

async function helper(script: string, args: string[], names: string[]): Promise<{ child: Child; urls: Record<string, string> }> {
  const child = new Child(`${path.basename(script)} ${args[0]}`, process.execPath, [...tsArgs(script), ...args], childEnv({}));
  const urls: Record<string, string> = {};
  try {
    for (const name of names) urls[name] = `http://127.0.0.1:${(await child.waitForLine(new RegExp(`^READY ${name} (\\d+)$`), 30_000))[1]}`;
  } catch (err) {
    await child.stop(5000);
    throw err;
  }
  return { child, urls };
}

/** Starts a standalone gateway (proxy or forward_auth mode) with `config` merged in; resolves when /readyz answers 200. */
function startGateway(run: Run, sc: Sidecar, s: Setup, name: string, config: Record<string, unknown>): Promise<{ child: Child; url: string }> {
  return retryPort(async () => {
    const port = await freePort();
    const file = path.join(run.tmp, `${name}-${port}.json`);
    fs.writeFileSync(file, JSON.stringify({
      sidecar_url: sc.url, api_key_env: 'BENCH_GATEWAY_API_KEY', listen: { host: '127.0.0.1', port }, metrics: false, log_level: 'warn', ...config,
    }, null, 2));
    const child = new Child(name, process.execPath, [...tsArgs('gateway-plugin/standalone/main.ts', run.nodeFlags), '--config', file], childEnv({ BENCH_GATEWAY_API_KEY: s.apiKey }));
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitForHttp(`${url}/readyz`, child, 60_000);
    } catch (err) {
      await child.stop(5000);
      throw err;
    }
    return { child, url };
  });
}

/** Starts nginx with two servers on one worker: NGINX alone, and NGINX with the documented auth_request config. */
async function startNginx(run: Run, authz: string, upstream: string): Promise<{ child: Child; alone: string; auth: string }> {
  const dir = fs.mkdtempSync(path.join(run.tmp, 'nginx-'));
  const [alone, auth] = [await freePort(), await freePort()];
  const site = nginxSite(auth, hostPort(authz), hostPort(upstream));
  fs.writeFileSync(path.join(dir, 'nginx.conf'), `worker_processes 1;
error_log ${dir}/error.log warn;
pid ${dir}/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  keepalive_requests 100000;
${site}
server {
  listen 127.0.0.1:${alone};
  large_client_header_buffers 4 32k;
  location / { proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://app; }
}
}
`);
  const child = new Child('nginx', NGINX_BIN, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], childEnv({}));
  try {
    await waitForHttp(`http://127.0.0.1:${alone}/`, child, 15_000);
  } catch (err) {
    await child.stop(5000);
    throw err;
  }
  return { child, alone: `http://127.0.0.1:${alone}`, auth: `http://127.0.0.1:${auth}` };
}

/** Starts the servers of the agent rows (smoke runs: one helper process). */
export async function startAgentProcs(run: Run, sc: Sidecar, s: Setup): Promise<AgentProcs> {
  const children: Child[] = [];
  const keep = <T extends { child: Child }>(x: T): T => {
    children.push(x.child);
    return x;
  };
  try {
    const helpers = run.plan.smoke
      ? [keep(await helper('bench/agent-servers.ts', ['all'], ['mcp', 'upstream']))]
      : await Promise.all([helper('bench/agent-servers.ts', ['mcp'], ['mcp']), helper('bench/agent-servers.ts', ['upstream'], ['upstream'])]).then((h) => h.map(keep));
    const urls = Object.assign({}, ...helpers.map((h) => h.urls)) as Record<string, string>;
    const mcpRoute = { method: 'POST', path: '/mcp', scope: s.scope, mcp: { tools: { get_weather: s.scope } } };
    const withNginx = fs.existsSync(NGINX_BIN);
    if (!withNginx) log(`agents: ${NGINX_BIN} is not installed: the forward-auth rows are skipped`);
    const [plain, gw, fa] = await Promise.all([
      helper('bench/servers.ts', ['plain', `--upstream=${urls.mcp}`], ['plain']).then(keep),
      startGateway(run, sc, s, 'mcp-gateway', { upstream_url: urls.mcp, routes: [mcpRoute] }).then(keep),
      withNginx ? startGateway(run, sc, s, 'forward-auth', { mode: 'forward_auth', trusted_proxies: ['127.0.0.1'], routes: [{ method: 'GET', path: '/items/*', scope: s.scope }] }).then(keep) : undefined,
    ]);
    const nginx = fa === undefined ? undefined : keep(await startNginx(run, fa.url, urls.upstream!));
    return { children, urls: { mcpPlain: plain.urls.plain!, mcpGateway: gw.url, ...(nginx ? { nginx: nginx.alone, nginxAuth: nginx.auth } : {}) } };
  } catch (err) {
    await Promise.all(children.map((c) => c.stop(5000)));
    throw err;
  }
}

const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const mcpCall = (i: number): string => `{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Lisbon"}}}`;

/** The agent rows for one backend: fills `br.agents`; stops the servers of `procs` at the end. */
export async function agentComparison(run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults, procs: AgentProcs): Promise<void> {
  const g = run.plan.gateway;
  const variants = (['mcpPlain', 'mcpGateway', 'nginx', 'nginxAuth'] as const).filter((v) => procs.urls[v] !== undefined);
  const pools = new Map<AgentVariant, ReturnType<typeof pool>>(variants.map((v) => [v, pool(procs.urls[v]!, g.concurrency)]));
  const sp = pool(sc.url, 64);
  try {
    // Proofs for the two gateway variants, sized like the gateway comparison's (80 % of the best verify rate), within the budget.
    const best = (bestRps(br.verify) ?? br.ceiling!.verifyPerSec * 0.7) * 0.8;
    const proved = variants.filter((v) => v === 'mcpGateway' || v === 'nginxAuth').length;
    let wantTp = need(g.tpSeconds, best, run.plan.maxBundles);
    const c1 = br.verify?.find((r) => r.concurrency === 1);
    let wantLat = need(g.latSeconds, 1e6 / ((c1?.p50 ?? 1e6 / br.ceiling!.verifyPerSec) + 600), run.plan.maxBundles);
    const warm = need(g.warmupSeconds, best, run.plan.maxBundles);
    const budget = Math.floor(run.plan.genSeconds * presentRate(br));
    const perVariant = (): number => warm + g.rounds * (wantTp + wantLat);
    if (perVariant() * proved > budget) {
      const f = Math.max(0.05, budget / (perVariant() * proved));
      wantTp = Math.max(8, Math.floor(wantTp * f));
      wantLat = Math.max(8, Math.floor(wantLat * f));
    }
    const total = Math.min(run.plan.maxBundles * proved, perVariant() * proved);
    log(`${backend}: agents: making ${total} proof headers`);
    const proofs = await makeBundles(sp, s, total, 'header', 300);
    let used = 0;
    const request = (v: AgentVariant) => (i: number): Req => {
      const proof = v === 'mcpGateway' || v === 'nginxAuth' ? { 'x-service-proof': proofs[used + i] ?? '' } : undefined;
      if (v === 'mcpPlain' || v === 'mcpGateway') return { method: 'POST', path: '/mcp', headers: { ...MCP_HEADERS, ...proof }, body: mcpCall(i) };
      return { method: 'GET', path: `/items/${i}`, headers: proof ?? {} };
    };
    const load = async (v: AgentVariant, concurrency: number, count: number, seconds: number): Promise<LoadResult> => {
      const proved1 = v === 'mcpGateway' || v === 'nginxAuth';
      const n = proved1 ? Math.max(0, Math.min(count, proofs.length - used)) : 200_000;
      const r = await runLoad({
        pool: pools.get(v)!, concurrency, count: n, maxSeconds: seconds, request: request(v),
        onResponse: (_i, status, text) => status === 200 && (v === 'nginx' || v === 'nginxAuth' || text.includes('"result"')),
      });
      if (proved1) used += r.count;
      return r;
    };
    for (const v of variants) await load(v, g.concurrency, warm, g.warmupSeconds);
    const tp = new Map(variants.map((v) => [v, [] as LoadResult[]]));
    const lat = new Map(variants.map((v) => [v, [] as LoadResult[]]));
    for (let round = 0; round < g.rounds; round++) {
      for (const v of variants) tp.get(v)!.push(await load(v, g.concurrency, wantTp, g.tpSeconds));
      for (const v of variants) lat.get(v)!.push(await load(v, 1, wantLat, g.latSeconds));
      log(`${backend}: agents round ${round + 1}/${g.rounds}: c=${g.concurrency} ${variants.map((v) => `${v} ${tp.get(v)!.at(-1)!.rps.toFixed(0)}/s`).join(', ')}`);
    }
    const out: AgentResults = {};
    for (const v of variants) out[v] = { c50: pooled(tp.get(v)!), c1: pooled(lat.get(v)!) };
    br.agents = out;
  } finally {
    await Promise.all([...pools.values(), sp].map((p) => p.close().catch(() => undefined)));
    await Promise.all(procs.children.map((c) => c.stop(5000)));
  }
}
