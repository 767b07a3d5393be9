/**
 * The PostgreSQL step of the benchmark (`--only=postgres`), on one backend:
 * a throwaway PostgreSQL server with its durability defaults (bench/pg-server.ts),
 * then in the same run, with the same method (bundles made ahead, verify at
 * concurrency C for a bounded time):
 *
 * 1. verify on one SQLite sidecar;
 * 2. verify on one PostgreSQL sidecar;
 * 3. verify on two PostgreSQL sidecars sharing the database (C/2 on each, at once);
 * 4. revocation propagation: revoke on sidecar A, until a listener on the same
 *    database (a replica's change feed, sidecar/store/postgres/changes.ts) has
 *    the notification; p50 and p99 over N revocations.
 *
 * Skipped (with the reason in the log) when no PostgreSQL server can be started.
 */
import type { Pool } from 'undici';
import { launchPostgres } from './pg-server.js';
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
import { openPostgresStore } from '../sidecar/store/index.js';

/** What the step measured. */
export interface PostgresResults {
  backend: Backend;
  server: string;
  concurrency: number;
  verify: { sqlite: LoadResult; pg1: LoadResult; pg2: LoadResult };
  propagation: { count: number; p50Ms: number; p99Ms: number };
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

/** Revokes `n` fresh delegations on `sc`; returns each time from the request to the notification (ms). */
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
    const ms = Float64Array.from(await propagation(url, s, revocations)).sort();
    const prop = { count: ms.length, p50Ms: quantile(ms, 0.5), p99Ms: quantile(ms, 0.99) };
    log(`postgres: revocation propagation over ${prop.count}: p50 ${prop.p50Ms.toFixed(1)} ms p99 ${prop.p99Ms.toFixed(1)} ms`);
    return { backend, server: server.version, concurrency, verify: { sqlite: sqliteResult, pg1, pg2 }, propagation: prop };
  } finally {
    for (const sc of started) await stopSidecar(sc).catch(() => undefined);
    await server.destroy();
  }
}
