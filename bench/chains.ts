/**
 * The sub-delegation chain step (issue 33; docs/certificates.md "Sub-delegation"): on the running
 * benchmark sidecar, a second account holder grants its agent the right to delegate 8 levels
 * (`max_delegation_depth`), and the platform builds chains of depth 1, 3 and 8 below it (each a
 * line of new agents on the same connection, POST …/agents/{agent_id}/delegations with the
 * platform's API key). Then verify of a proof of each leaf, and of the root agent's own
 * certificate (depth 0, the baseline), at c=1 (latency) and at a moderate concurrency
 * (throughput, sidecar CPU per verify), in interleaved rounds in rotating order, so every depth
 * sees the same machine load. A verify counts only if it answers `allow` for the leaf's
 * certificate. Bundles are made ahead (each proof is single-use), within the generation budget.
 */
import type { Backend } from './plan.js';
import { cpuSeconds } from './procs.js';
import { Client, makeBundles, pool, setUp } from './flow.js';
import type { Setup } from './flow.js';
import { pooled, runLoad } from './load.js';
import type { LoadResult } from './load.js';
import type { ChainDepthResult } from './chains-report.js';
import type { BackendResults } from './report.js';
import type { Sidecar } from './sidecar.js';
import { log, need, presentRate } from './common.js';
import type { Run } from './common.js';

/** The right to delegate the root certificate gets (the deepest chain; SIDECAR_MAX_DELEGATION_DEPTH's default). */
const ROOT_RIGHT = 8;

/** One leaf to verify: its agent, its certificate and its unspent verify bodies. */
interface Leaf { depth: number; agentId: string; certId: string; bodies: string[]; used: number; runs: LoadResult[] }

/** Builds a chain of `depth` new agents below the root agent of `s`; returns the leaf agent and certificate. */
export async function buildChain(s: Setup, depth: number): Promise<{ agentId: string; certId: string }> {
  const platform = new Client(s.user.base, s.apiKey);
  let from = s.agentId;
  let certId = s.certId;
  for (let d = 1; d <= depth; d++) {
    const agent = await platform.req('POST', `/v1/service/connections/${s.connectionId}/agents`,
      { name: `chain${depth}-d${d}`, agent_type: 'api_agent' });
    if (agent.status !== 200) throw new Error(`chain agent: ${agent.status} ${agent.text.slice(0, 300)}`);
    const to = agent.body.agent_id as string;
    const r = await platform.req('POST', `/v1/service/connections/${s.connectionId}/agents/${from}/delegations`,
      { to_agent_id: to, scopes: [s.scope], max_delegation_depth: ROOT_RIGHT - d });
    if (r.status !== 200) throw new Error(`sub-delegate at depth ${d}: ${r.status} ${r.text.slice(0, 300)}`);
    from = to;
    certId = r.body.cert_id as string;
  }
  return { agentId: from, certId };
}

/** Runs the chain step on the sidecar `sc`; fills `br.chains`. */
export async function chainsStep(run: Run, backend: Backend, sc: Sidecar, br: BackendResults): Promise<void> {
  const { rounds, c1Seconds, seconds, concurrency, warmup, depths } = run.plan.chains;
  const s = await setUp(sc.url, run.mail, `chains-${backend}@bench.example`, ROOT_RIGHT);
  const p = pool(sc.url, Math.max(16, concurrency));
  try {
    const leaves: Leaf[] = [{ depth: 0, agentId: s.agentId, certId: s.certId, bodies: [], used: 0, runs: [] }];
    for (const d of depths) leaves.push({ depth: d, ...(await buildChain(s, d)), bodies: [], used: 0, runs: [] });
    // Bundles per depth: what c=1 and c=N need for their time (rates from the verify step, else
    // estimated from the ceiling), within the generation budget shared by the depths.
    const ceil = br.ceiling!;
    const rate1 = br.verify?.find((r) => r.concurrency === 1)?.rps ?? 1e6 / (ceil.verifyUs + 2000);
    const rateN = br.verify?.find((r) => r.concurrency === 16)?.rps ?? ceil.verifyPerSec * 0.5;
    const max = Math.floor(run.plan.maxBundles / leaves.length);
    let n1 = need(c1Seconds, rate1, max);
    let nN = need(seconds, rateN, max);
    const budget = Math.max(8 * rounds, Math.floor((run.plan.genSeconds * presentRate(br)) / leaves.length) - warmup);
    if (n1 + nN > budget) {
      n1 = Math.max(4 * rounds, Math.floor((n1 * budget) / (n1 + nN)));
      nN = Math.max(4 * rounds, budget - n1);
    }
    log(`${backend}: chains of depth ${depths.join(', ')} built; making ${warmup + n1 + nN} bundles per depth`);
    for (const l of leaves) {
      l.bodies = await makeBundles(p, { ...s, agentId: l.agentId }, warmup + n1 + nN, 'verify',
        Math.max(10, run.plan.genSeconds));
    }
    const headers = { 'x-service-api-key': s.apiKey, 'content-type': 'application/json' };
    const verify = async (l: Leaf, c: number, count: number, secs: number): Promise<LoadResult> => {
      const base = l.used;
      const r = await runLoad({
        pool: p, concurrency: c, count: Math.min(count, l.bodies.length - base), maxSeconds: secs,
        request: (i) => ({ method: 'POST', path: '/v1/service/verify', headers, body: l.bodies[base + i]! }),
        onResponse: (_i, status, text) => status === 200 && text.includes('"decision":"allow"')
          && text.includes(`"cert_id":"${l.certId}"`),
      });
      l.used += r.count;
      return r;
    };
    // Warm-up: the first verify of a chain checks its links' signatures; later ones find them cached.
    for (const l of leaves) {
      const w = await verify(l, 1, warmup, 30);
      if (w.errors) {
        throw new Error(`chains warm-up, depth ${l.depth}: ${w.errors} of ${w.count} not allowed (${w.firstError})`);
      }
    }
    const c1: LoadResult[][] = leaves.map(() => []);
    const cN: LoadResult[][] = leaves.map(() => []);
    const cpu: number[] = leaves.map(() => 0);
    for (let round = 0; round < rounds; round++) {
      const order = leaves.map((_l, i) => (i + round) % leaves.length);
      for (const i of order) c1[i]!.push(await verify(leaves[i]!, 1, Math.floor(n1 / rounds), c1Seconds / rounds));
      for (const i of order) {
        const cpu0 = cpuSeconds(sc.child.pid);
        const r = await verify(leaves[i]!, concurrency, Math.floor(nN / rounds), seconds / rounds);
        cpu[i]! += cpuSeconds(sc.child.pid) - cpu0;
        cN[i]!.push(r);
      }
    }
    const out: ChainDepthResult[] = leaves.map((l, i) => {
      const x = pooled(cN[i]!);
      return { depth: l.depth, c1: pooled(c1[i]!), cN: x, cpuMsPerVerify: (cpu[i]! * 1000) / Math.max(1, x.count) };
    });
    br.chains = { concurrency, rounds, depths: out };
    const f = (x: number): string => x.toFixed(0);
    for (const r of out) {
      log(`${backend}: chain depth ${r.depth}: c=1 p50 ${f(r.c1.p50)} µs p99 ${f(r.c1.p99)} µs (${r.c1.count} req, `
        + `${r.c1.errors} err); c=${concurrency} ${f(r.cN.rps)}/s (${r.cN.count} req, ${r.cN.errors} err, `
        + `CPU ${r.cpuMsPerVerify.toFixed(3)} ms/verify)`);
    }
    const errors = out.reduce((a, r) => a + r.c1.errors + r.cN.errors, 0);
    const first = out.flatMap((r) => [r.c1, r.cN]).find((r) => r.firstError)?.firstError;
    if (errors) log(`warning: ${errors} failed requests in the chains step (${first})`);
  } finally {
    await p.close();
  }
}
