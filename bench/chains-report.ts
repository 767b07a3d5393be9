/**
 * The sub-delegation chain rows of the benchmark table (measured by bench/chains.ts): verify of
 * a leaf at depth 1, 3 and 8 against the root certificate's (depth 0) in the same rounds —
 * c=1 p50 / p99, throughput and sidecar CPU per verify at the step's concurrency, each also as a
 * ratio to depth 0. report.ts prints them per backend.
 */
import type { LoadResult } from './load.js';

/** One depth's figures (depth = links below the root certificate; 0 = the root itself). */
export interface ChainDepthResult {
  depth: number;
  /** Verify at c=1 (rounds pooled). */
  c1: LoadResult;
  /** Verify at {@link ChainResults.concurrency} (rounds pooled). */
  cN: LoadResult;
  /** Sidecar CPU (user + system, all threads) per verify at that concurrency, ms. */
  cpuMsPerVerify: number;
}

/** What the chain step measured on one backend. */
export interface ChainResults { concurrency: number; rounds: number; depths: ChainDepthResult[] }

const finite = (n: number | undefined): n is number => n !== undefined && Number.isFinite(n);
const int = (n: number | undefined): string => (finite(n) ? Math.round(n).toLocaleString('en-US') : '—');
const fix = (n: number | undefined, d = 2): string => (finite(n) ? n.toFixed(d) : '—');
const times = (a: number, b: number | undefined): string => (finite(b) && b > 0 ? ` (×${fix(a / b)})` : '');

/** The section title of the chain rows. */
export function chainsSection(concurrency: number | undefined): string {
  return `Sub-delegation chains — verify of a leaf at depth d: c=1 p50 / p99 · c=${concurrency ?? '—'} req/s · `
    + 'CPU per verify (× depth 0, interleaved rounds)';
}

/** The cell of depth `d` on one backend. */
export function chainCell(r: ChainResults | undefined, d: number): string {
  const x = r?.depths.find((y) => y.depth === d);
  if (!x) return '—';
  const base = d === 0 ? undefined : r!.depths.find((y) => y.depth === 0);
  const errors = x.c1.errors + x.cN.errors;
  return `${int(x.c1.p50)}${times(x.c1.p50, base?.c1.p50)} / ${int(x.c1.p99)}${times(x.c1.p99, base?.c1.p99)} µs · `
    + `${int(x.cN.rps)}/s${times(x.cN.rps, base?.cN.rps)} · ${fix(x.cpuMsPerVerify, 3)} ms`
    + `${times(x.cpuMsPerVerify, base?.cpuMsPerVerify)}${errors ? ` (${int(errors)} err)` : ''}`;
}

/** The chain rows: label → the cell of one backend. */
export const CHAIN_ROWS: ReadonlyArray<readonly [string, (r: ChainResults | undefined) => string]> = [
  ['Chain depth 0 (the root certificate: the baseline)', (r) => chainCell(r, 0)],
  ...[1, 3, 8].map((d) => [`Chain depth ${d} (${d} link${d > 1 ? 's' : ''} below the root)`,
    (r: ChainResults | undefined) => chainCell(r, d)] as const),
];
