/**
 * Command line and run plan of the benchmark: which parts, which backends,
 * and how long each measured step may run (every step is bounded in count
 * and time; the full run is sized for ≤ 11 minutes on 2 shared cores, `--smoke` for ≤ 15 s).
 */

/** Parts that `--only=` selects. */
export const SECTIONS = [
  'crypto', 'present', 'verify', 'audit', 'gateway', 'authzen', 'chains', 'scaling', 'webhooks', 'postgres',
] as const;
/** One part of the benchmark. */
export type Section = typeof SECTIONS[number];
/** The ML-DSA-65 backend a sidecar runs: node:crypto on Node 24, or @noble/post-quantum on Node 20. */
export type Backend = 'native' | 'noble';

/** How long / how much each step runs. */
export interface Plan {
  smoke: boolean;
  /** --scale: factor applied to every measured step's duration and count (1 = the full run). */
  scale: number;
  /** True when every section runs on the default backends (not smoke, no --only/--backends): writes docs/benchmarks-chart.svg. */
  full: boolean;
  sections: Set<Section>;
  backends: Backend[];
  /** 'auto': profile the sidecar/gateway of the primary backend when one of their targets is missed. */
  profile: 'auto' | 'always' | 'never';
  ceilingSeconds: number;
  levels: number[];
  presentSeconds: Record<number, number>;
  verifySeconds: Record<number, number>;
  warmupVerifies: number;
  healthzRequests: number;
  gateway: { rounds: number; concurrency: number; tpSeconds: number; latSeconds: number; warmupSeconds: number };
  scaling: { small: number; big: number; certs: number; rounds: number; verifiesPerRound: number; auditReads: number };
  webhooks: { events: number; maxSeconds: number };
  /** The audit step: alternating rounds of verify c=64 with the chain and export on and off. */
  audit: { rounds: number; seconds: number };
  /** The PostgreSQL step (postgres.ts): bundles per configuration, verify concurrency and time, revocations timed. */
  postgres: { bundles: number; concurrency: number; seconds: number; revocations: number };
  /**
   * The AuthZEN step (authzen.ts): unmeasured warm-up evaluations; evaluation at c=1 in `rounds` rounds
   * interleaved with verify at c=1 (up to `verifies` bundles in all; 0: none), `seconds` each in all; then the
   * evaluations endpoint with batches of 1, 10 and 100 items at `concurrency`, each for up to `seconds`
   * (twice that for 100 items, so that a window holds more than one batch per worker).
   */
  authzen: {
    warmup: number; seconds: number; rounds: number; verifies: number; concurrency: number; batchSizes: number[];
  };
  /**
   * The chain step (chains.ts): leaves at `depths` (links below the root) and the root itself, `warmup`
   * verifies each, then `rounds` interleaved rounds of verify at c=1 (`c1Seconds` in all per depth) and at
   * `concurrency` (`seconds` in all per depth).
   */
  chains: { depths: number[]; warmup: number; rounds: number; c1Seconds: number; seconds: number; concurrency: number };
  profileSeconds: number;
  /** Budget for making bundles ahead of one step (s): bounds the counts where signing is slow (noble). */
  genSeconds: number;
  /** Watchdog for the whole run (seconds). */
  maxSeconds: number;
  /** Upper bound on pre-generated bundles of one step. */
  maxBundles: number;
}

const USAGE = `usage: npm run bench -- [--smoke] [--only=${SECTIONS.join(',')}] [--backends=native,noble] [--profile | --no-profile] [--scale=0.05..1]`;

/** Parses the command line into a plan. Throws a TypeError with the usage on bad arguments. */
export function parsePlan(argv: readonly string[]): Plan {
  let smoke = false;
  let only: Section[] | undefined;
  let backends: Backend[] | undefined;
  let profile: Plan['profile'] = 'auto';
  let scale = 1;
  for (const a of argv) {
    if (a === '--smoke') smoke = true;
    else if (a.startsWith('--scale=')) {
      scale = Number(a.slice(8));
      if (!(scale >= 0.05 && scale <= 1)) throw new TypeError(`--scale must be a number from 0.05 to 1; ${USAGE}`);
    }
    else if (a.startsWith('--only=')) {
      only = a.slice(7).split(',').filter(Boolean) as Section[];
      for (const s of only) if (!(SECTIONS as readonly string[]).includes(s)) throw new TypeError(`unknown part ${JSON.stringify(s)}; ${USAGE}`);
    } else if (a.startsWith('--backends=')) {
      backends = a.slice(11).split(',').filter(Boolean) as Backend[];
      for (const b of backends) if (b !== 'native' && b !== 'noble') throw new TypeError(`unknown backend ${JSON.stringify(b)}; ${USAGE}`);
    } else if (a === '--profile') profile = 'always';
    else if (a === '--no-profile') profile = 'never';
    else if (a === '--help' || a === '-h') throw new TypeError(USAGE);
    else throw new TypeError(`unknown argument ${JSON.stringify(a)}; ${USAGE}`);
  }
  // A smoke run leaves the PostgreSQL step out unless asked for (--smoke --only=postgres): its
  // three extra sidecars and a database server do not belong in a smoke run on two busy cores.
  const sections = new Set<Section>(only ?? (smoke ? SECTIONS.filter((x) => x !== 'postgres') : SECTIONS));
  if (smoke) {
    return {
      smoke, scale: 1, full: false, sections, backends: backends ?? ['noble'], profile: profile === 'always' ? 'always' : 'never',
      ceilingSeconds: 0.2,
      levels: [1, 16, 64],
      presentSeconds: { 1: 0.15, 16: 0.15, 64: 0.15 },
      verifySeconds: { 1: 0.2, 16: 0.2, 64: 0.2 },
      warmupVerifies: 8,
      healthzRequests: 50,
      gateway: { rounds: 1, concurrency: 50, tpSeconds: 0.2, latSeconds: 0.1, warmupSeconds: 0.05 },
      scaling: { small: 1_000, big: 10_000, certs: 1_000, rounds: 1, verifiesPerRound: 8, auditReads: 10 },
      webhooks: { events: 30, maxSeconds: 8 },
      audit: { rounds: 1, seconds: 0.2 },
      postgres: { bundles: 24, concurrency: 8, seconds: 0.5, revocations: 5 },
      // No interleaved verify (its bundles cost a second on a busy machine), batches at c=2: about 1 s.
      authzen: { warmup: 5, seconds: 0.1, rounds: 1, verifies: 0, concurrency: 2, batchSizes: [1, 10, 100] },
      // Only the deepest chain beside the root: its bundles cost seconds on a busy machine.
      chains: { depths: [8], warmup: 1, rounds: 1, c1Seconds: 0.1, seconds: 0.1, concurrency: 4 },
      profileSeconds: 1,
      genSeconds: 2,
      // The smoke run checks that everything runs, not how fast: ~15 s quiet, minutes on a box that
      // a CI run and other work share; the watchdog only stops a hung run.
      maxSeconds: 150,
      maxBundles: 24,
    };
  }
  // --scale shortens every measured step (durations, request counts, rounds), never the table sizes.
  const t = (seconds: number): number => Math.max(0.2, seconds * scale);
  const k = (count: number): number => Math.max(10, Math.round(count * scale));
  return {
    smoke, scale, full: only === undefined && backends === undefined, sections, backends: backends ?? ['native', 'noble'], profile,
    ceilingSeconds: t(1.5),
    levels: [1, 16, 64],
    presentSeconds: { 1: t(1.5), 16: t(2), 64: t(2) },
    verifySeconds: { 1: t(2), 16: t(2), 64: t(3) },
    warmupVerifies: k(300),
    healthzRequests: k(1_000),
    gateway: { rounds: Math.max(2, Math.round(3 * scale)), concurrency: 50, tpSeconds: t(2), latSeconds: t(1), warmupSeconds: t(2) },
    scaling: { small: 1_000, big: 1_000_000, certs: 100_000, rounds: Math.max(2, Math.round(3 * scale)), verifiesPerRound: k(300), auditReads: k(300) },
    webhooks: { events: k(2_000), maxSeconds: 60 },
    audit: { rounds: Math.max(2, Math.round(3 * scale)), seconds: t(2) },
    postgres: { bundles: k(4_000), concurrency: 64, seconds: t(4), revocations: k(200) },
    authzen: {
      warmup: k(300), seconds: t(2), rounds: Math.max(2, Math.round(3 * scale)), verifies: k(1_200),
      concurrency: 4, batchSizes: [1, 10, 100],
    },
    chains: {
      depths: [1, 3, 8], warmup: 8, rounds: Math.max(2, Math.round(3 * scale)), c1Seconds: t(2), seconds: t(2), concurrency: 16,
    },
    profileSeconds: t(3),
    genSeconds: t(25),
    maxSeconds: 14 * 60,
    maxBundles: 40_000,
  };
}
