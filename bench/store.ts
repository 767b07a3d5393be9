/**
 * The store steps, run on one backend: the scaling step (verify p50 and
 * audit reads on sidecars whose databases were seeded with many audit rows,
 * certificates and agents) and, from here, the webhooks step; each starts
 * from a copy of a database taken right after the set-up flow.
 */
import fs from 'node:fs';
import path from 'node:path';
import { BenchSeedDb } from './seed-db.js';
import { DB_FILE_NAME } from '../sidecar/store/index.js';
import type { Backend } from './plan.js';
import { login, makeBundles, pool, setUp } from './flow.js';
import type { Setup } from './flow.js';
import { pooled, runLoad } from './load.js';
import type { LoadResult } from './load.js';
import { freshDir, startSidecar, stopSidecar } from './sidecar.js';
import type { Sidecar } from './sidecar.js';
import { verifyRunner } from './verify.js';
import { webhooksStep } from './webhooks.js';
import { log } from './common.js';
import type { Run } from './common.js';

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
export interface StoreBase { backend: Backend; file: string; setup: Setup }

/** Copies the database of a running sidecar (after the set-up flow `s`) to a file under the run's temp dir. */
export function snapshotBase(run: Run, sc: Sidecar, s: Setup): StoreBase {
  const file = path.join(run.tmp, `${sc.backend}-store-base.sqlite`);
  const db = new BenchSeedDb(sc.dbFile, { live: true });
  try { db.snapshot(file); } finally { db.close(); }
  return { backend: sc.backend, file, setup: s };
}

/** Runs the scaling and webhooks steps the plan asks for on `backend`, from `base` (made here when not given). */
export async function storeSections(run: Run, backend: Backend, base?: StoreBase): Promise<void> {
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
