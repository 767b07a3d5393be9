/**
 * How much of the machine other processes use: the input of the crypto pool's
 * "inline when shared" policy (`SIDECAR_CRYPTO_INLINE_WHEN_SHARED`).
 *
 * Every `intervalMs` the monitor reads the machine's CPU time (`os.cpus()`,
 * all CPUs) and this process's (`process.cpuUsage()`, all its threads) and
 * works out how many cores the *other* processes kept busy in the interval.
 * When they leave this sidecar fewer than {@link SHARE_THRESHOLDS}.enterFree
 * cores, the machine counts as shared and the pool checks proof signatures on
 * the main thread: a hand-off to a worker then buys no core that is not
 * already taken, and costs two thread wake-ups that wait behind the other
 * processes' threads (measured: docs/benchmarks.md, "Inline when the machine
 * is shared").
 * It counts as not shared again above `leaveFree` (hysteresis, so that the
 * mode does not flap at the boundary). The others' share does not depend on
 * which mode the sidecar is in, which keeps the decision stable: the sidecar's
 * own threads are subtracted.
 */
import os from 'node:os';

/** One reading of the machine's and this process's CPU time. */
export interface CpuSample {
  /** Monotonic wall clock (ms). */
  readonly atMs: number;
  /** Busy time summed over all CPUs (user, nice, sys, irq; ms). */
  readonly machineBusyMs: number;
  /** Busy plus idle time summed over all CPUs (ms). */
  readonly machineTotalMs: number;
  /** Number of CPUs the machine times cover. */
  readonly cpus: number;
  /** This process's CPU time, all threads (user + system; ms). */
  readonly ownMs: number;
}

/** Reads the machine's and this process's CPU time now. */
export function readCpu(): CpuSample {
  let busy = 0;
  let total = 0;
  const cpus = os.cpus();
  for (const c of cpus) {
    const t = c.times;
    const b = t.user + t.nice + t.sys + t.irq;
    busy += b;
    total += b + t.idle;
  }
  const own = process.cpuUsage();
  return { atMs: performance.now(), machineBusyMs: busy, machineTotalMs: total, cpus: cpus.length, ownMs: (own.user + own.system) / 1000 };
}

/** Free cores (machine cores minus those the other processes use) at which the machine counts as shared, and at which it no longer does. */
export const SHARE_THRESHOLDS = { enterFree: 1.6, leaveFree: 1.8 } as const;

/**
 * Cores the other processes kept busy between two samples: the machine's busy cores minus this
 * process's, never below 0. `undefined` when the samples cannot be compared (no time passed, or
 * the CPU count changed).
 */
export function othersCores(a: CpuSample, b: CpuSample): number | undefined {
  const wall = b.atMs - a.atMs;
  const total = b.machineTotalMs - a.machineTotalMs;
  if (!(wall > 0) || !(total > 0) || a.cpus !== b.cpus || b.cpus < 1) return undefined;
  const machine = ((b.machineBusyMs - a.machineBusyMs) / total) * b.cpus;
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
  /** Called when the mode changes (logging, metrics). */
  onChange?: (shared: boolean, others: number, cpus: number) => void;
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

  constructor(opts: CpuShareOptions = {}) {
    const ms = opts.intervalMs ?? 500;
    if (!Number.isFinite(ms) || ms < 10) throw new TypeError('cpu share monitor: intervalMs must be a number ≥ 10');
    this.intervalMs = ms;
    this.onChange = opts.onChange;
  }

  /** Starts sampling (idempotent). A failed reading keeps the current mode. */
  start(): void {
    if (this.timer) return;
    this.last = safeRead();
    this.timer = setInterval(() => {
      const s = safeRead();
      if (s) this.update(s);
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops sampling; the mode goes back to not shared. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.last = undefined;
    this.shared = false;
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
    const next = this.shared ? free < SHARE_THRESHOLDS.leaveFree : free < SHARE_THRESHOLDS.enterFree;
    if (next !== this.shared) {
      this.shared = next;
      this.onChange?.(next, others, sample.cpus);
    }
  }
}

function safeRead(): CpuSample | undefined {
  try {
    return readCpu();
  } catch {
    return undefined;
  }
}
