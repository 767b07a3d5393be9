/**
 * The price of `SIDECAR_SQLITE_SYNCHRONOUS=full` (issue 35; docs/storage.md,
 * "Durability"): verify throughput on a sidecar with `full` ÷ the same on one
 * with `normal`, at c=1 and c=64, each on a fresh SQLite data directory. A
 * measurement, not a target. Part of the verify section (`npm run bench`);
 * alone: `tsx bench/durability.ts [--seconds=3] [--bundles=600]`.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeBundles, pool, setUp, startMailSink } from './flow.js';
import { freshDir, startSidecar, stopSidecar } from './sidecar.js';
import { verifyRunner } from './verify.js';
import { log } from './common.js';
import type { Run } from './common.js';
import type { Backend } from './plan.js';
import { parsePlan } from './plan.js';

/** Verify throughput with `full` and `normal` at one concurrency, and their ratio. */
export interface SynchronousRatio { concurrency: number; fullPerSec: number; normalPerSec: number; ratio: number }

async function verifyRates(
  run: Run, backend: Backend, level: 'full' | 'normal', levels: readonly number[], seconds: number, bundles: number,
): Promise<number[]> {
  const dir = freshDir(run, `${backend}-sync-${level}`);
  const sc = await startSidecar(run, backend, dir, { name: `sidecar(${level})`, env: { SIDECAR_SQLITE_SYNCHRONOUS: level } });
  const p = pool(sc.url, 64);
  try {
    const s = await setUp(sc.url, run.mail, `bench-sync-${level}@bench.example`);
    const bodies = await makeBundles(p, s, bundles * levels.length + 32, 'verify', 300);
    const v = verifyRunner(p, s, bodies);
    await v.run(16, 32, 30);
    const rates: number[] = [];
    for (const c of levels) {
      const r = await v.run(c, bundles, seconds);
      rates.push(r.rps);
      const lat = `p50 ${r.p50.toFixed(0)} µs p99 ${r.p99.toFixed(0)} µs`;
      log(`${backend}: synchronous=${level} verify c=${c}: ${r.rps.toFixed(0)}/s ${lat} (${r.count} req, ${r.errors} err)`);
    }
    return rates;
  } finally {
    await p.close();
    await stopSidecar(sc);
  }
}

/** Measures verify throughput with `full` ÷ `normal` at each of `levels` (default c=1 and c=64). */
export async function synchronousRatio(
  run: Run, backend: Backend, levels: readonly number[] = [1, 64], seconds = 3, bundles = 600,
): Promise<SynchronousRatio[]> {
  const full = await verifyRates(run, backend, 'full', levels, seconds, bundles);
  const normal = await verifyRates(run, backend, 'normal', levels, seconds, bundles);
  const out = levels.map((c, i) => ({ concurrency: c, fullPerSec: full[i]!, normalPerSec: normal[i]!, ratio: full[i]! / Math.max(1e-9, normal[i]!) }));
  for (const r of out) {
    log(`${backend}: verify c=${r.concurrency}: FULL ÷ NORMAL = ${r.ratio.toFixed(2)} (${r.fullPerSec.toFixed(0)}/s ÷ ${r.normalPerSec.toFixed(0)}/s)`);
  }
  return out;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const arg = (name: string, def: number): number => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? def);
  const mail = await startMailSink();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-authz-bench-sync-'));
  const run: Run = {
    plan: parsePlan([]), mail, tmp, nodeFlags: [], masterKey: crypto.randomBytes(32).toString('base64'), sqlite24: undefined,
    results: { meta: {} as Run['results']['meta'], backends: {} },
  };
  try {
    process.stdout.write(`${JSON.stringify(await synchronousRatio(run, 'noble', [1, 64], arg('seconds', 3), arg('bundles', 600)))}\n`);
  } finally {
    await mail.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
