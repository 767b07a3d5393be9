/**
 * The audit step: verify throughput at c=64 with the audit hash chain and the
 * NDJSON push export on (to a collector in this process), against a sidecar
 * with both off (SIDECAR_AUDIT_CHAIN=off, no export), in the same run. Both
 * sidecars are prepared together (set up, bundles made), then measured in
 * alternating rounds (never at once), each on its own fresh data dir; the best
 * round of each is compared (issue 25: on ÷ off ≥ 0.90).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Backend } from './plan.js';
import { makeBundles, pool, setUp } from './flow.js';
import type { LoadResult } from './load.js';
import type { BackendResults } from './report.js';
import { freshDir, startSidecar, stopSidecar } from './sidecar.js';
import type { Sidecar } from './sidecar.js';
import { verifyRunner } from './verify.js';
import { log, need } from './common.js';
import type { Run } from './common.js';

/** The export secret of the measured sidecar (the collector does not check it: it measures). */
const SECRET = 'bench-audit-export-secret-0123456789abcdef';

/** A collector that answers 200 to every batch and counts the NDJSON lines. */
async function startCollector(): Promise<{ url: string; lines: () => number; close: () => Promise<void> }> {
  let lines = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (d: Buffer) => { for (const b of d) if (b === 10) lines++; });
    req.on('end', () => res.writeHead(200).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/audit`,
    lines: () => lines,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/** The two sidecars of the step, set up, with their bundles made. */
export interface AuditPrepared {
  backend: Backend;
  variants: { name: 'off' | 'on'; sc: Sidecar; runner: ReturnType<typeof verifyRunner>; close: () => Promise<void> }[];
  collector: Awaited<ReturnType<typeof startCollector>>;
  perRound: number;
}

/**
 * Starts both sidecars, sets each up and makes its bundles, concurrently (nothing is measured
 * yet). `rate` sizes the rounds (verifies per second expected at c=64).
 */
export async function prepareAudit(run: Run, backend: Backend, rate: number): Promise<AuditPrepared> {
  const { plan } = run;
  const collector = await startCollector();
  const env = {
    off: { SIDECAR_AUDIT_CHAIN: 'off' },
    on: { SIDECAR_AUDIT_CHAIN: 'on', SIDECAR_AUDIT_EXPORT_URL: collector.url, SIDECAR_AUDIT_EXPORT_SECRET: SECRET },
  } as const;
  const perRound = need(plan.audit.seconds, rate, plan.maxBundles);
  const one = async (name: 'off' | 'on'): Promise<AuditPrepared['variants'][number]> => {
    const sc = await startSidecar(run, backend, freshDir(run, `${backend}-audit-${name}`), { env: env[name], name: `sidecar(${backend}, audit ${name})` });
    try {
      const s = await setUp(sc.url, run.mail, `bench-audit-${name}-${backend}@bench.example`);
      const p = pool(sc.url, 64);
      const bodies = await makeBundles(p, s, plan.warmupVerifies + perRound * plan.audit.rounds, 'verify', Math.max(5, plan.genSeconds));
      return { name, sc, runner: verifyRunner(p, s, bodies), close: async () => { await p.close(); await stopSidecar(sc); } };
    } catch (err) {
      await stopSidecar(sc);
      throw err;
    }
  };
  const settled = await Promise.allSettled([one('off'), one('on')]);
  const variants = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) {
    for (const v of variants) await v.close();
    await collector.close();
    throw (failed as PromiseRejectedResult).reason;
  }
  return { backend, variants, collector, perRound };
}

/** Warms both up, then runs alternating rounds (off, on, off, on, …) at c=64; fills `br.audit`, stops both. */
export async function measureAudit(run: Run, prep: AuditPrepared, br: BackendResults): Promise<void> {
  const best: Partial<Record<'off' | 'on', LoadResult>> = {};
  try {
    for (const v of prep.variants) await v.runner.run(16, run.plan.warmupVerifies, 30);
    for (let i = 0; i < run.plan.audit.rounds; i++) {
      for (const v of prep.variants) {
        const r = await v.runner.run(64, prep.perRound, run.plan.audit.seconds);
        if (!best[v.name] || r.rps > best[v.name]!.rps) best[v.name] = r;
        log(`${prep.backend}: verify c=64, audit ${v.name}, round ${i + 1}: ${r.rps.toFixed(0)}/s p50 ${r.p50.toFixed(0)} µs (${r.count} req, ${r.errors} err)`);
      }
    }
  } finally {
    await Promise.all(prep.variants.map((v) => v.close()));
    await prep.collector.close();
  }
  const { off, on } = best;
  if (off && on) {
    br.audit = { off, on, ratio: on.rps / off.rps, exported: prep.collector.lines() };
    log(`${prep.backend}: audit chain + export on ÷ off = ${(on.rps / off.rps).toFixed(3)} (${prep.collector.lines()} events exported)`);
  }
}
