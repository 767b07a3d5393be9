/**
 * CPU time of a process from `/proc/<pid>/stat` (Linux), for the benchmarks (CPU per request of
 * a server) and the slow tests that report their steps' cost (test/package/helpers.ts). Shared
 * by test/ and bench/ (see test/architecture/test-bench.test.ts).
 */
import fs from 'node:fs';

/** Clock ticks per second (`getconf CLK_TCK`; 100 on Linux). */
export const CLOCK_TICKS = 100;

/**
 * CPU seconds (user + system) that process `pid` (`'self'`, this one, by default) has used;
 * with `children`, also those of its children that ended and were waited for. Throws when there
 * is no such process or no /proc.
 */
export function cpuSeconds(pid: number | 'self' = 'self', o: { children?: boolean } = {}): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // After "(comm)" the fields start at 3 (state): utime, stime, cutime, cstime are 14 to 17.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, o.children ? 15 : 13).map(Number);
  return f.reduce((a, b) => a + b, 0) / CLOCK_TICKS;
}
