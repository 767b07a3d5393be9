/**
 * The PostgreSQL step of the benchmark (`--only=postgres`), on one backend:
 * a throwaway PostgreSQL server with its durability defaults (test/shared/pg-server.ts),
 * then in the same run, with the same method (bundles made ahead, verify at
 * concurrency C for a bounded time):
 *
 * 1. verify on one SQLite sidecar;
 * 2. verify on one PostgreSQL sidecar;
 * 3. verify on two PostgreSQL sidecars sharing the database (C/2 on each, at once);
 *    before 2, verify on one PostgreSQL sidecar with the audit hash chain off
 *    (`SIDECAR_AUDIT_CHAIN=off`, its own database): what the chain costs where
 *    every verify of the account appends to one chain;
 * 4. revocation propagation: revoke on sidecar A, until a listener on the same
 *    database (a replica's change feed, sidecar/store/postgres/changes.ts) has
 *    the notification; p50 and p99 over N revocations. Sidecar B's own account
 *    of the same revocations comes from its `/metrics`: its notification-lag
 *    histogram (change committed on A → B's feed has it and its caches are
 *    marked), as the bucket bounds that hold its p50 and p99.
 *
 * Skipped (with the reason in the log) when no PostgreSQL server can be started.
 */
import type { Pool } from 'undici';
import { launchPostgres } from '../test/shared/pg-server.js';
import { makeBundles, pool, setUp } from './flow.js';
import type { Setup } from './flow.js';
import { quantile, summarize } from './load.js';
import type { LoadResult } from './load.js';
import { freshDir, startSidecar, stopSidecar } from './sidecar.js';
import type { Sidecar } from './sidecar.js';
import { verifyRunner } from './verify.js';
import type { Backend } from './plan.js';
import { log } from './common.js';
import type { Run } from './common.js';
import { openPostgresStore } from '../sidecar/store/postgres/store.js';

/** What the step measured. */
export interface PostgresResults {
  backend: Backend;
  server: string;
  concurrency: number;
  verify: { sqlite: LoadResult; pg1: LoadResult; pg2: LoadResult; pgNoChain?: LoadResult };
  propagation: { count: number; p50Ms: number; p99Ms: number; replica?: ReplicaLag };
}

/** Sidecar B's notification lag over the revocations: how many it saw, and the buckets (ms) holding p50 and p99. */
export interface ReplicaLag { count: number; p50LeMs: number; p99LeMs: number }

/** The cumulative buckets (`le` in seconds → count) of B's notification-lag histogram. */
async function lagBuckets(url: string): Promise<Map<number, number>> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const out = new Map<number, number>();
  for (const m of text.matchAll(/^agent_authz_store_notification_lag_seconds_bucket\{le="([^"]+)"\} (\d+)/gm)) {
    out.set(m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2]));
  }
  return out;
}

/** B's lag over the revocations between the two scrapes: the smallest bucket bound reaching each quantile. */
function replicaLag(before: Map<number, number>, after: Map<number, number>): ReplicaLag {
  const les = [...after.keys()].sort((a, b) => a - b);
  const delta = les.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const count = delta.at(-1) ?? 0;
  const at = (q: number): number => 1000 * (les[delta.findIndex((n) => n >= Math.ceil(q * count))] ?? Infinity);
  return { count, p50LeMs: at(0.5), p99LeMs: at(0.99) };
}

/** Makes `n` bundles on `sc` and verifies them at `concurrency` for at most `seconds`. */
async function verifyOn(run: Run, scs: Sidecar[], s: Setup, concurrency: number): Promise<LoadResult> {
  const { bundles, seconds } = run.plan.postgres;
  const pools: Pool[] = scs.map((sc) => pool(sc.url, Math.max(1, Math.ceil(concurrency / scs.length))));
  try {
    const bodies = await makeBundles(pools[0]!, s, bundles, 'verify', run.plan.genSeconds * 2);
    const per = Math.floor(bodies.length / scs.length);
    // Warm-up: a few verifies on each sidecar (caches, pooled connections).
    const runners = pools.map((p, i) => verifyRunner(p, s, bodies.slice(i * per, (i + 1) * per)));
    await Promise.all(runners.map((r) => r.run(4, Math.min(16, Math.floor(per / 8)), 10)));
    const rs = await Promise.all(runners.map((r) => r.run(Math.max(1, Math.ceil(concurrency / scs.length)), r.left(), seconds)));
    const samples = new Float64Array(rs.reduce((a, r) => a + r.samples.length, 0));
    let at = 0;
    for (const r of rs) { samples.set(r.samples, at); at += r.samples.length; }
    const errors = rs.reduce((a, r) => a + r.errors, 0);
    return summarize(samples, Math.max(...rs.map((r) => r.elapsedS)), concurrency, errors, rs.find((r) => r.firstError)?.firstError);
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
}

/** Revokes `n` fresh delegations through `s` (sidecar A); returns each time from the request to the notification (ms). */
async function propagation(url: string, s: Setup, n: number): Promise<number[]> {
  const listener = await openPostgresStore({ url, poolMax: 1, statementTimeoutMs: 5_000, connectTimeoutMs: 5_000 });
  const seen = new Map<string, number>();
  listener.changes!.subscribe((c) => { if (c.type === 'certificate_revoked') seen.set(c.certId, performance.now()); });
  const ms: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const sr = await s.user.req('POST', '/v1/service/delegations/self-request', { connection_id: s.connectionId });
      const ap = await s.user.req('POST', `/v1/service/delegations/requests/${sr.body.request_id}/approve`, { approved_scope: ['data:read'] });
      const certId = ap.body.cert_id as string;
      const t0 = performance.now();
      const rv = await s.user.req('POST', `/v1/service/delegations/${certId}/revoke`, { reason: 'bench' });
      if (rv.status !== 200) throw new Error(`revoke: ${rv.status}`);
      const deadline = Date.now() + 5_000;
      while (!seen.has(certId) && Date.now() < deadline) await new Promise((r) => setImmediate(r));
      if (!seen.has(certId)) throw new Error('a revocation was not notified within 5 s');
      ms.push(seen.get(certId)! - t0);
    }
  } finally {
    await listener.close();
  }
  return ms;
}

/** Runs the step on `backend`; undefined when no PostgreSQL server can be started here. */
export async function postgresSection(run: Run, backend: Backend): Promise<PostgresResults | undefined> {
  const { concurrency, revocations } = run.plan.postgres;
  let server;
  try {
    server = await launchPostgres({ fast: false });
  } catch (err) {
    log(`postgres: skipped (no PostgreSQL server: ${(err as Error).message})`);
    return undefined;
  }
  const started: Sidecar[] = [];
  try {
    const sqlite = await startSidecar(run, backend, freshDir(run, `${backend}-pg-sqlite`), { name: `sidecar(${backend}, sqlite)` });
    started.push(sqlite);
    const sqliteResult = await verifyOn(run, [sqlite], await setUp(sqlite.url, run.mail, `pg-sqlite-${backend}@bench.example`), concurrency);
    await stopSidecar(started.pop()!);
    log(`postgres: SQLite, one sidecar: verify c=${concurrency} ${sqliteResult.rps.toFixed(0)}/s p50 ${sqliteResult.p50.toFixed(0)} µs p99 ${sqliteResult.p99.toFixed(0)} µs`);

    const offEnv = { SIDECAR_DATABASE_URL: await server.createDatabase(), SIDECAR_AUDIT_CHAIN: 'off' };
    const off = await startSidecar(run, backend, freshDir(run, `${backend}-pg-nochain`), { name: `sidecar(${backend}, pg, chain off)`, env: offEnv });
    started.push(off);
    const pgNoChain = await verifyOn(run, [off], await setUp(off.url, run.mail, `pg-nochain-${backend}@bench.example`), concurrency);
    await stopSidecar(started.pop()!);
    log(`postgres: PostgreSQL, one sidecar, audit chain off: verify c=${concurrency} ${pgNoChain.rps.toFixed(0)}/s p50 ${pgNoChain.p50.toFixed(0)} µs p99 ${pgNoChain.p99.toFixed(0)} µs`);

    const url = await server.createDatabase();
    const env = { SIDECAR_DATABASE_URL: url };
    const a = await startSidecar(run, backend, freshDir(run, `${backend}-pg-a`), { name: `sidecar(${backend}, pg A)`, env });
    started.push(a);
    const s = await setUp(a.url, run.mail, `pg-${backend}@bench.example`);
    const pg1 = await verifyOn(run, [a], s, concurrency);
    log(`postgres: PostgreSQL, one sidecar: verify c=${concurrency} ${pg1.rps.toFixed(0)}/s p50 ${pg1.p50.toFixed(0)} µs p99 ${pg1.p99.toFixed(0)} µs`);
    const b = await startSidecar(run, backend, freshDir(run, `${backend}-pg-b`), { name: `sidecar(${backend}, pg B)`, env });
    started.push(b);
    const pg2 = await verifyOn(run, [a, b], s, concurrency);
    log(`postgres: PostgreSQL, two sidecars: verify c=${concurrency} ${pg2.rps.toFixed(0)}/s p50 ${pg2.p50.toFixed(0)} µs p99 ${pg2.p99.toFixed(0)} µs`);
    const lagBefore = await lagBuckets(b.url);
    const ms = Float64Array.from(await propagation(url, s, revocations)).sort();
    // B's feed may still be taking the last notifications (bounded: 5 s).
    let lagAfter = await lagBuckets(b.url);
    for (const until = Date.now() + 5_000; replicaLag(lagBefore, lagAfter).count < revocations && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 50));
      lagAfter = await lagBuckets(b.url);
    }
    const replica = replicaLag(lagBefore, lagAfter);
    const prop = { count: ms.length, p50Ms: quantile(ms, 0.5), p99Ms: quantile(ms, 0.99), replica };
    log(`postgres: revocation propagation over ${prop.count}: p50 ${prop.p50Ms.toFixed(1)} ms p99 ${prop.p99Ms.toFixed(1)} ms; `
      + `sidecar B saw ${replica.count}: p50 ≤ ${replica.p50LeMs} ms, p99 ≤ ${replica.p99LeMs} ms`);
    return { backend, server: server.version, concurrency, verify: { sqlite: sqliteResult, pg1, pg2, pgNoChain }, propagation: prop };
  } finally {
    for (const sc of started) await stopSidecar(sc).catch(() => undefined);
    await server.destroy();
  }
}
