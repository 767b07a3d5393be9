/**
 * How much of the machine other processes use: the input of the crypto pool's
 * "inline when shared" policy (`SIDECAR_CRYPTO_INLINE_WHEN_SHARED`).
 *
 * Every `intervalMs` (0.5 s) the monitor reads the machine's busy CPU time
 * (`os.cpus()`, all CPUs) and this process's (`process.cpuUsage()`, all its
 * threads) and works out how many cores the *other* processes kept busy in
 * the interval. When they leave this sidecar fewer than
 * {@link SHARE_THRESHOLDS}.enterFree cores in {@link SHARE_DWELL_SAMPLES}
 * samples in a row, the machine counts as shared and the pool checks proof
 * signatures on the main thread if a check is cheap there (`sharedInlineMaxMs`
 * in proof-crypto.ts): a hand-off to a worker then buys no core that is not
 * already taken, and costs two thread wake-ups that wait behind the
 * other processes' threads (measured: docs/benchmarks.md, "Inline when the
 * machine is shared"). It counts as not shared again when more than
 * `leaveFree` cores are free in as many samples in a row (the gap and the
 * dwell keep the mode from flapping). The sidecar's own threads are
 * subtracted, so the measure does not follow the mode. The sidecar runs the
 * monitor only where it can judge the machine ({@link canJudgeMachine}).
 */
import os from 'node:os';

/** One reading of the machine's and this process's CPU time. */
export interface CpuSample {
  /** Monotonic wall clock (ms). */
  readonly atMs: number;
  /** Busy time summed over all CPUs (user, nice, sys, irq; ms). */
  readonly machineBusyMs: number;
  /** Number of CPUs the machine times cover. */
  readonly cpus: number;
  /** This process's CPU time, all threads (user + system; ms). */
  readonly ownMs: number;
}

/** Reads the machine's and this process's CPU time now. */
export function readCpu(): CpuSample {
  let busy = 0;
  const cpus = os.cpus();
  for (const c of cpus) busy += c.times.user + c.times.nice + c.times.sys + c.times.irq;
  const own = process.cpuUsage();
  return { atMs: performance.now(), machineBusyMs: busy, cpus: cpus.length, ownMs: (own.user + own.system) / 1000 };
}

/** Free cores (machine cores minus those the other processes use) at which the machine counts as shared, and at which it no longer does. */
export const SHARE_THRESHOLDS = { enterFree: 1.6, leaveFree: 1.8 } as const;

/**
 * Cores the other processes kept busy between two samples: the machine's busy time over the wall
 * time (clamped to the CPU count; the wall clock, not the CPU times' own total, which leaves out
 * iowait, softirq and steal) minus this process's, never below 0. `undefined` when the samples
 * cannot be compared (no time passed, or the CPU count changed).
 */
export function othersCores(a: CpuSample, b: CpuSample): number | undefined {
  const wall = b.atMs - a.atMs;
  if (!(wall > 0) || a.cpus !== b.cpus || b.cpus < 1) return undefined;
  const machine = Math.min(b.cpus, Math.max(0, (b.machineBusyMs - a.machineBusyMs) / wall));
  const own = (b.ownMs - a.ownMs) / wall;
  return Math.max(0, machine - own);
}

/** What the crypto pool reads: whether the machine is shared right now. */
export interface CpuShare {
  /** True while other processes leave this sidecar too few free cores (see the file header). */
  readonly shared: boolean;
}

/** Options of {@link CpuShareMonitor}. */
export interface CpuShareOptions {
  /** Sampling interval (ms); default 500. */
  intervalMs?: number;
  /** The reading (default {@link readCpu}); a reading that throws keeps the current mode. */
  read?: () => CpuSample;
  /** Called when the mode changes (logging, metrics). */
  onChange?: (shared: boolean, others: number, cpus: number) => void;
}

/** Consecutive samples on the other side of a threshold before the mode changes (a dwell: one busy half-second does not flip it). */
export const SHARE_DWELL_SAMPLES = 2;

/**
 * Whether the monitor can judge this machine: at least 2 CPUs, and this process allowed on all of
 * them (in a cpuset-limited container `os.cpus()` still covers the host's CPUs, so the others'
 * load measured there is not what competes with the sidecar).
 */
export function canJudgeMachine(): boolean {
  const cpus = os.cpus().length;
  return cpus >= 2 && os.availableParallelism() >= cpus;
}

/** Samples the CPU on an unref'd timer and keeps {@link CpuShare.shared} up to date. */
export class CpuShareMonitor implements CpuShare {
  shared = false;
  /** Cores the other processes used in the last interval (`undefined` before the first one). */
  others: number | undefined;
  private last: CpuSample | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly intervalMs: number;
  private readonly onChange: CpuShareOptions['onChange'];
  private readonly read: () => CpuSample;
  /** Consecutive samples that pointed to the other mode. */
  private against = 0;

  constructor(opts: CpuShareOptions = {}) {
    const ms = opts.intervalMs ?? 500;
    if (!Number.isFinite(ms) || ms < 10) throw new TypeError('cpu share monitor: intervalMs must be a number ≥ 10');
    this.intervalMs = ms;
    this.onChange = opts.onChange;
    this.read = opts.read ?? readCpu;
  }

  /** Starts sampling (idempotent). A failed reading keeps the current mode. */
  start(): void {
    if (this.timer) return;
    this.last = this.safeRead();
    this.timer = setInterval(() => {
      const s = this.safeRead();
      if (s) this.update(s);
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Whether the timer runs. */
  get running(): boolean {
    return this.timer !== undefined;
  }

  /** Stops sampling; the mode goes back to not shared and nothing is measured. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.last = undefined;
    this.shared = false;
    this.others = undefined;
    this.against = 0;
  }

  /** Takes one sample (the timer's step; tests call it with their own samples). */
  update(sample: CpuSample): void {
    const prev = this.last;
    this.last = sample;
    if (!prev) return;
    const others = othersCores(prev, sample);
    if (others === undefined) return;
    this.others = others;
    const free = sample.cpus - others;
    const other = this.shared ? free > SHARE_THRESHOLDS.leaveFree : free < SHARE_THRESHOLDS.enterFree;
    this.against = other ? this.against + 1 : 0;
    if (this.against < SHARE_DWELL_SAMPLES) return;
    this.against = 0;
    this.shared = !this.shared;
    try {
      this.onChange?.(this.shared, others, sample.cpus);
    } catch {
      // A failing observer (logging) must not stop the sampling or crash the process.
    }
  }

  private safeRead(): CpuSample | undefined {
    try {
      return this.read();
    } catch {
      return undefined;
    }
  }
}
