/**
 * The load generator: `concurrency` closed-loop workers over one undici
 * keep-alive pool, each taking the next request index until `count` requests
 * are done or `maxSeconds` have passed. Latency is measured per request from
 * just before sending to the end of the response body, in microseconds.
 */
import type { Dispatcher } from 'undici';

/** One request to send. */
export interface Req { method: 'GET' | 'POST'; path: string; headers?: Record<string, string>; body?: string }

/** Options of {@link runLoad}. */
export interface LoadOptions {
  pool: Dispatcher;
  concurrency: number;
  /** Upper bound on requests. */
  count: number;
  /** Upper bound on wall time (seconds). */
  maxSeconds: number;
  request: (i: number) => Req;
  /** Judges a response (default: status 200). Runs outside the timed span. */
  onResponse?: (i: number, status: number, text: string) => boolean;
}

/** Figures of one load run. */
export interface LoadResult {
  concurrency: number;
  /** Completed requests (ok + errors). */
  count: number;
  errors: number;
  firstError: string | undefined;
  elapsedS: number;
  /** Successful requests per second. */
  rps: number;
  /** Latency percentiles in microseconds (successful requests). */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  mean: number;
  max: number;
  /** Latencies (µs) of successful requests, for pooling across rounds. */
  samples: Float64Array;
}

/** The q-quantile (0..1) of sorted values (nearest rank). */
export function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Summary figures of latency samples (µs) completed over `elapsedS`. */
export function summarize(samples: Float64Array, elapsedS: number, concurrency: number, errors: number, firstError?: string): LoadResult {
  const s = Float64Array.from(samples).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    concurrency, count: s.length + errors, errors, firstError, elapsedS, rps: s.length / elapsedS,
    p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99), p999: quantile(s, 0.999),
    mean: s.length ? sum / s.length : NaN, max: s.length ? s[s.length - 1]! : NaN, samples: s,
  };
}

/** Pools several runs (e.g. interleaved rounds) into one result. */
export function pooled(runs: readonly LoadResult[]): LoadResult {
  const n = runs.reduce((a, r) => a + r.samples.length, 0);
  const all = new Float64Array(n);
  let o = 0;
  for (const r of runs) { all.set(r.samples, o); o += r.samples.length; }
  return summarize(all, runs.reduce((a, r) => a + r.elapsedS, 0), runs[0]?.concurrency ?? 0,
    runs.reduce((a, r) => a + r.errors, 0), runs.find((r) => r.firstError)?.firstError);
}

/** Runs a closed-loop load. */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const lat = new Float64Array(Math.max(0, o.count));
  let ok = 0;
  let errors = 0;
  let firstError: string | undefined;
  let next = 0;
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(Math.round(o.maxSeconds * 1e9));
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= o.count || process.hrtime.bigint() >= deadline) return;
      const r = o.request(i);
      const start = process.hrtime.bigint();
      let status = 0;
      let text = '';
      try {
        const res = await o.pool.request({ method: r.method, path: r.path, headers: r.headers ?? {}, body: r.body ?? null });
        status = res.statusCode;
        text = await res.body.text();
      } catch (err) {
        errors++;
        firstError ??= (err as Error).message;
        continue;
      }
      const us = Number(process.hrtime.bigint() - start) / 1000;
      const good = o.onResponse ? o.onResponse(i, status, text) : status === 200;
      if (good) lat[ok++] = us;
      else {
        errors++;
        firstError ??= `status ${status}: ${text.slice(0, 200)}`;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, o.concurrency) }, worker));
  const elapsedS = Number(process.hrtime.bigint() - t0) / 1e9;
  return summarize(lat.subarray(0, ok), elapsedS, o.concurrency, errors, firstError);
}
