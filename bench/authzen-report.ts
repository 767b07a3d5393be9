/**
 * The AuthZEN rows of the benchmark table (measured by bench/authzen.ts):
 * grant-check evaluation latency at c=1 beside verify's, and the evaluations
 * endpoint's throughput in items per second for batches of 1, 10 and 100.
 * report.ts prints them per backend.
 */
import type { LoadResult } from './load.js';

/** One batch size of the evaluations endpoint: the load (req/s are batches/s) and its figures per item. */
export interface AuthzenBatch {
  size: number;
  load: LoadResult;
  /** Allowed items per second (batches/s × size). */
  itemsPerSec: number;
  /** Sidecar CPU (user + system) per item, ms. */
  cpuMsPerItem: number;
}

/** What the AuthZEN step measured on one backend (grant checks: no proof, nothing consumed). */
export interface AuthzenResults {
  /** POST /access/v1/evaluation at c=1 (rounds pooled). */
  evalC1: LoadResult;
  /** Verify at c=1 on the same sidecar, in rounds interleaved with {@link evalC1}'s (pooled); not in smoke runs. */
  verifyC1?: LoadResult | undefined;
  rounds: number;
  /** The concurrency of the batch runs. */
  concurrency: number;
  batches: AuthzenBatch[];
}

/** The part of a backend's results the rows read (verify's, for the throughput ratio). */
export interface AuthzenRowInput { authzen?: AuthzenResults; verify?: LoadResult[] }

const finite = (n: number | undefined): n is number => n !== undefined && Number.isFinite(n);
const int = (n: number | undefined): string => (finite(n) ? Math.round(n).toLocaleString('en-US') : '—');
const fix = (n: number | undefined, d = 2): string => (finite(n) ? n.toFixed(d) : '—');
const errs = (r: LoadResult): string => (r.errors ? ` (${int(r.errors)} err)` : '');
const bestVerify = (b: AuthzenRowInput): LoadResult | undefined =>
  b.verify?.length ? b.verify.reduce((a, r) => (r.rps > a.rps ? r : a)) : undefined;

function batchCell(b: AuthzenRowInput, size: number): string {
  const x = b.authzen?.batches.find((r) => r.size === size);
  if (!x) return '—';
  const load = `${int(x.load.rps)} req/s · p50 ${int(x.load.p50)} µs`;
  return `${int(x.itemsPerSec)} items/s (${load}; CPU ${fix(x.cpuMsPerItem, 3)} ms/item)${errs(x.load)}`;
}

/** The section title of the AuthZEN rows. */
export function authzenSection(concurrency: number | undefined): string {
  return 'AuthZEN grant checks (no proof) — c=1: req/s · p50 / p99 / p99.9; '
    + `batches (execute_all) at c=${concurrency ?? '—'}`;
}

/** The AuthZEN rows: label → the cell of one backend. */
export const AUTHZEN_ROWS: ReadonlyArray<readonly [string, (b: AuthzenRowInput) => string]> = [
  ['AuthZEN evaluation c=1', (b) => {
    const r = b.authzen?.evalC1;
    return r ? `${int(r.rps)}/s · ${int(r.p50)} / ${int(r.p99)} / ${int(r.p999)} µs${errs(r)}` : '—';
  }],
  ['Verify c=1 in rounds interleaved with it', (b) => {
    const r = b.authzen?.verifyC1;
    return r ? `${int(r.rps)}/s · ${int(r.p50)} / ${int(r.p99)} / ${int(r.p999)} µs${errs(r)}` : '—';
  }],
  ['AuthZEN evaluation c=1 p50 ÷ verify c=1 p50 (interleaved; else the verify step)', (b) => {
    const e = b.authzen?.evalC1;
    const v = b.authzen?.verifyC1 ?? b.verify?.find((r) => r.concurrency === 1);
    const note = b.authzen?.verifyC1 ? '' : ', verify step';
    return e && v ? `${fix(e.p50 / v.p50)} (${int(e.p50)} ÷ ${int(v.p50)} µs${note})` : '—';
  }],
  ...[1, 10, 100].map((n) => [`AuthZEN evaluations, batch of ${n}`, (b: AuthzenRowInput) => batchCell(b, n)] as const),
  ['AuthZEN batch of 100 items/s ÷ verify req/s (best level of the verify step)', (b) => {
    const x = b.authzen?.batches.find((r) => r.size === 100);
    const v = bestVerify(b);
    if (!x || !v) return '—';
    return `${fix(x.itemsPerSec / v.rps)} (${int(x.itemsPerSec)} ÷ ${int(v.rps)}/s at c=${v.concurrency})`;
  }],
];
