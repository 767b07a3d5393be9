/**
 * The AuthZEN step (issue 34): the sidecar's OpenID AuthZEN 1.0 endpoints
 * (docs/authzen.md) on the running benchmark sidecar, with the platform API
 * key, as grant checks — requests without a proof, which consume nothing and
 * answer the same decision each time, so one body is sent over and over.
 * Measures POST /access/v1/evaluation at c=1 in rounds interleaved with verify
 * at c=1 on the same sidecar (bundles made here, so the ratio of the two
 * latencies sees the same machine load: the machine is shared), and
 * POST /access/v1/evaluations (execute_all) with batches of 1, 10 and 100
 * items at a small concurrency (items per second, sidecar CPU per item).
 * Every response is checked: an evaluation counts only if it is `true`, a
 * batch only if it has `size` answers and all are `true`.
 */
import type { Backend } from './plan.js';
import { cpuSeconds } from './procs.js';
import { makeBundles, pool } from './flow.js';
import type { Setup } from './flow.js';
import { pooled, runLoad } from './load.js';
import type { LoadResult } from './load.js';
import { verifyRunner } from './verify.js';
import type { AuthzenBatch } from './authzen-report.js';
import type { BackendResults } from './report.js';
import type { Sidecar } from './sidecar.js';
import { log, presentRate } from './common.js';
import type { Run } from './common.js';

/** Upper bound on requests of one timed run (the time bound ends it first). */
const MAX_REQUESTS = 200_000;

/** The grant-check evaluation of the set-up agent's delegated scope on an HTTP resource. */
export function evaluationBody(s: Setup): Record<string, unknown> {
  return {
    subject: { type: 'agent', id: s.agentId }, action: { name: s.scope },
    resource: { type: 'http', id: 'GET /v1/orders' },
  };
}

/** An evaluations (batch) body of `size` items, each on its own resource, with execute_all. */
export function batchBody(s: Setup, size: number): Record<string, unknown> {
  const { subject, action } = evaluationBody(s);
  return {
    subject, action, options: { evaluations_semantic: 'execute_all' },
    evaluations: Array.from({ length: size }, (_, i) => ({ resource: { type: 'http', id: `GET /v1/orders/${i}` } })),
  };
}

/** Whether an evaluations answer has `size` items and every one is `true`. */
function allAllowed(text: string, size: number): boolean {
  try {
    const r = JSON.parse(text) as { evaluations?: { decision?: unknown }[] };
    const items = r.evaluations;
    return Array.isArray(items) && items.length === size && items.every((e) => e.decision === true);
  } catch {
    return false;
  }
}

/** Runs the AuthZEN step on the sidecar `sc` set up as `s`; fills `br.authzen`. */
export async function authzenStep(
  run: Run, backend: Backend, sc: Sidecar, s: Setup, br: BackendResults,
): Promise<void> {
  const { warmup, seconds, rounds, verifies, concurrency, batchSizes } = run.plan.authzen;
  const headers = { 'x-service-api-key': s.apiKey, 'content-type': 'application/json' };
  const single = JSON.stringify(evaluationBody(s));
  const allowed = (status: number, text: string): boolean => status === 200 && text.includes('"decision":true');
  const p = pool(sc.url, Math.max(4, concurrency));
  try {
    const w = await runLoad({
      pool: p, concurrency, count: warmup, maxSeconds: 30,
      request: () => ({ method: 'POST', path: '/access/v1/evaluation', headers, body: single }),
      onResponse: (_i, status, text) => allowed(status, text),
    });
    if (w.errors) {
      throw new Error(`authzen warm-up: ${w.errors} of ${w.count} evaluations not allowed (${w.firstError})`);
    }
    // Verify c=1 beside it (unless the plan has no verifies for it): bundles within the generation
    // budget, 8 more to warm up.
    const n = verifies && Math.max(8 * rounds, Math.min(verifies, Math.floor(run.plan.genSeconds * presentRate(br))));
    const v = n ? verifyRunner(p, s, await makeBundles(p, s, n + 8, 'verify', 300)) : undefined;
    await v?.run(1, 8, 30);
    const evals: LoadResult[] = [];
    const verifyRounds: LoadResult[] = [];
    for (let round = 0; round < rounds; round++) {
      if (v) verifyRounds.push(await v.run(1, Math.floor(n / rounds), seconds / rounds));
      evals.push(await runLoad({
        pool: p, concurrency: 1, count: MAX_REQUESTS, maxSeconds: seconds / rounds,
        request: () => ({ method: 'POST', path: '/access/v1/evaluation', headers, body: single }),
        onResponse: (_i, status, text) => allowed(status, text),
      }));
    }
    const evalC1 = pooled(evals);
    const verifyC1 = verifyRounds.length ? pooled(verifyRounds) : undefined;
    const f = (x: number): string => x.toFixed(0);
    log(`${backend}: authzen evaluation c=1: ${f(evalC1.rps)}/s p50 ${f(evalC1.p50)} µs p99 ${f(evalC1.p99)} µs `
      + `(${evalC1.count} req, ${evalC1.errors} err)`
      + (verifyC1 ? `; verify c=1 interleaved: p50 ${f(verifyC1.p50)} µs (${verifyC1.count} req, ${verifyC1.errors} err)`
        : ''));
    const batches: AuthzenBatch[] = [];
    for (const size of batchSizes) {
      const body = JSON.stringify(batchBody(s, size));
      const cpu0 = cpuSeconds(sc.child.pid);
      const load = await runLoad({
        pool: p, concurrency, count: MAX_REQUESTS, maxSeconds: seconds * Math.max(1, Math.log10(size)),
        request: () => ({ method: 'POST', path: '/access/v1/evaluations', headers, body }),
        onResponse: (_i, status, text) => status === 200 && allAllowed(text, size),
      });
      const cpu1 = cpuSeconds(sc.child.pid);
      const items = (load.count - load.errors) * size;
      const cpuMsPerItem = items ? ((cpu1 - cpu0) * 1000) / items : NaN;
      const b: AuthzenBatch = { size, load, itemsPerSec: load.rps * size, cpuMsPerItem };
      batches.push(b);
      log(`${backend}: authzen batch of ${size} c=${concurrency}: ${f(b.itemsPerSec)} items/s `
        + `(${f(load.rps)} req/s, p50 ${f(load.p50)} µs; ${load.count} req, ${load.errors} err; `
        + `CPU ${cpuMsPerItem.toFixed(3)} ms/item)`);
    }
    br.authzen = { evalC1, verifyC1, rounds, concurrency, batches };
    const errors = evalC1.errors + (verifyC1?.errors ?? 0) + batches.reduce((a, b) => a + b.load.errors, 0);
    const first = [evalC1, verifyC1, ...batches.map((b) => b.load)].find((r) => r?.firstError)?.firstError;
    if (errors) log(`warning: ${errors} failed requests in the authzen step (${first})`);
  } finally {
    await p.close();
  }
}
