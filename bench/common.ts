/**
 * What the benchmark's modules share: the output directory, the run's clock
 * and progress log (stderr), `sleep`, the {@link Run} every step gets, the
 * two helpers that size how many bundles a step makes, and the `BENCH_*`
 * variables that tune the processes under test.
 */
import path from 'node:path';
import type { MailSink } from './flow.js';
import { ROOT } from '../test/shared/node24.js';
import type { Plan } from './plan.js';
import { bestRps } from './report.js';
import type { BackendResults, Results } from './report.js';

/** Where results, charts and profiles go (bench/out). */
export const OUT = path.join(ROOT, 'bench/out');
/** When the benchmark started (`performance.now()`); the progress log counts from here. */
export const T0 = performance.now();
/** Writes one progress line to stderr, stamped with the seconds since {@link T0}. */
export const log = (s: string): void => { process.stderr.write(`[bench ${((performance.now() - T0) / 1000).toFixed(1).padStart(5)} s] ${s}\n`); };
/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Shared state of one run. */
export interface Run {
  plan: Plan;
  mail: MailSink;
  masterKey: string;
  tmp: string;
  sqlite24: string | undefined;
  /** Node flags for the sidecar and gateway processes (`BENCH_NODE_FLAGS`, parsed once by {@link productNodeFlags}). */
  nodeFlags: string[];
  results: Results;
}

/** How many bundles `seconds` at `rate` per second need (15 % + 8 spare), at least 8 and at most `max`. */
export function need(seconds: number, rate: number, max: number): number {
  return Math.max(8, Math.min(max, Math.ceil(seconds * rate * 1.15) + 8));
}

/** Bundles per second the sidecar can make (challenge + present): measured, else from the sign ceiling. */
export function presentRate(br: BackendResults): number {
  return bestRps(br.present) ?? br.ceiling!.signPerSec * 0.6;
}

/** The `BENCH_*` variables that change how the sidecar and the gateway run (shown in the table's title when set). */
export const TUNING_VARS = ['BENCH_CRYPTO_WORKERS', 'BENCH_NODE_FLAGS'] as const;

/** `NAME=value` for each {@link TUNING_VARS} entry set (not blank) in `env`. */
export function tuningOf(env: NodeJS.ProcessEnv = process.env): string[] {
  return TUNING_VARS.filter((k) => env[k]?.trim()).map((k) => `${k}=${env[k]!.trim()}`);
}

/**
 * The sidecar's own settings for the `BENCH_CRYPTO_*` entries of {@link TUNING_VARS} set (not empty) in `env`:
 * `BENCH_CRYPTO_WORKERS=0` becomes `SIDECAR_CRYPTO_WORKERS=0`.
 */
export function sidecarTuningEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of TUNING_VARS) if (k.startsWith('BENCH_CRYPTO_') && env[k]) out[k.replace(/^BENCH_/, 'SIDECAR_')] = env[k];
  return out;
}

/** Node options that would run other code than the benchmark's entry point, or open a debugger port. */
const ENTRY_FLAGS = /^--(eval|print|require|import|loader|experimental-loader|inspect|inspect-brk|inspect-wait|inspect-port|debug-port|check|test|watch|watch-path|env-file|run)(=|$)/;

/**
 * The Node flags of `BENCH_NODE_FLAGS` (whitespace-separated, each `--name` or `--name=value`),
 * given to the sidecar and gateway processes only: what an operator would put on their command
 * line (e.g. `--single-threaded-gc`). This checks the form and refuses options that replace the
 * entry point or open a debugger; whether Node knows a flag is checked by `probeNodeFlags`
 * (procs.ts) before the run starts. Throws a TypeError naming the variable.
 */
export function productNodeFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  const raw = env.BENCH_NODE_FLAGS?.trim();
  if (!raw) return [];
  const flags = raw.split(/\s+/);
  const bad = flags.find((f) => !/^--[a-z0-9][a-z0-9_-]*(=[^\s]+)?$/.test(f));
  if (bad !== undefined) throw new TypeError(`BENCH_NODE_FLAGS: not a Node flag (--name or --name=value): ${JSON.stringify(bad)}`);
  const entry = flags.find((f) => ENTRY_FLAGS.test(f));
  if (entry !== undefined) throw new TypeError(`BENCH_NODE_FLAGS: ${JSON.stringify(entry)} would run other code or open a debugger; only runtime tuning flags are taken`);
  return flags;
}
