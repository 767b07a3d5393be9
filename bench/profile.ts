/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time by
 * function, total (inclusive) time of the project's own functions, and self
 * time by area (project folder, npm package, node internals, GC, idle),
 * optionally restricted to a time window of the profile.
 *
 *   node --import tsx bench/profile.ts FILE.cpuprofile [--top=15]
 */
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../test/shared/node24.js';

/** A function in a V8 CPU profile. */
export interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
/** A V8 `.cpuprofile` (the parts read here). */
export interface CpuProfile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

/** Reads a `.cpuprofile` file. */
export function readProfile(file: string): CpuProfile {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
}

/**
 * Calls `cb` for every sample inside `fromEndUs` (µs before the profile's end: [from, to]) with
 * its stack (the sampled frame first, the outermost caller last) and its weight in µs: the
 * interval to the next sample (or its own delta for the last one).
 */
export function forEachSample(p: CpuProfile, fromEndUs: [number, number] | undefined, cb: (stack: CallFrame[], us: number) => void): void {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) byId.set(n.id, n);
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stacks = new Map<number, CallFrame[]>();
  const stackOf = (id: number): CallFrame[] => {
    let s = stacks.get(id);
    if (!s) {
      s = [];
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) s.push(byId.get(at)!.callFrame);
      stacks.set(id, s);
    }
    return s;
  };
  let t = p.startTime;
  const lo = fromEndUs ? p.endTime - fromEndUs[0] : -Infinity;
  const hi = fromEndUs ? p.endTime - fromEndUs[1] : Infinity;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    t += dt;
    if (t < lo || t > hi || !byId.has(p.samples[i]!)) continue;
    cb(stackOf(p.samples[i]!), Math.max(0, p.timeDeltas[i + 1] ?? dt));
  }
}

/** One row of a summary. */
export interface FrameTime { frame: string; ms: number; pct: number }

/** A profile summary. */
export interface ProfileSummary {
  file: string;
  /** Profiled wall time inside the window (ms) and the share that was not idle. */
  windowMs: number;
  busyPct: number;
  topSelf: FrameTime[];
  topTotal: FrameTime[];
  byArea: FrameTime[];
}

function shortUrl(url: string): string {
  if (!url) return '';
  let u = url.replace(/^file:\/\//, '');
  if (u.startsWith(ROOT + '/')) u = u.slice(ROOT.length + 1);
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) u = u.slice(nm + 'node_modules/'.length);
  return u;
}

function area(cf: CallFrame): string {
  if (!cf.url) {
    if (cf.functionName === '(garbage collector)') return '(garbage collector)';
    if (cf.functionName === '(idle)') return '(idle)';
    if (cf.functionName === '(program)') return '(program: VM / native)';
    return '(native)';
  }
  const u = cf.url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = u.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (u.startsWith('node:')) return u.split('/').slice(0, 2).join('/');
  if (u.startsWith(ROOT + '/')) {
    const parts = u.slice(ROOT.length + 1).split('/');
    return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  return u;
}

/**
 * How summaries and flame graphs name a frame: `function file[:line]`. Project .ts files run
 * transpiled by tsx: their profile line numbers do not match the source, so only the file is shown.
 */
export const frameKey = (cf: CallFrame): string => {
  if (!cf.url) return cf.functionName || '(anonymous)';
  const file = shortUrl(cf.url);
  return `${cf.functionName || '(anonymous)'} ${file}${/\.ts$/.test(file) ? '' : `:${cf.lineNumber + 1}`}`;
};

/** Whether a frame is this project's own code. */
export const isOwnFrame = (cf: CallFrame): boolean => /\/(sidecar|src|gateway-plugin)\//.test(cf.url) && !cf.url.includes('node_modules');

/**
 * Summarises a profile. `fromEndUs` (µs before the profile's end: [from, to]) restricts the
 * samples counted; `profile` is the file's parsed content when the caller has it already.
 */
export function summarizeProfile(file: string, opts: { top?: number; fromEndUs?: [number, number]; profile?: CpuProfile } = {}): ProfileSummary {
  const top = opts.top ?? 15;
  const p = opts.profile ?? readProfile(file);
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  const areas = new Map<string, number>();
  let windowUs = 0;
  let idleUs = 0;
  forEachSample(p, opts.fromEndUs, (stack, w) => {
    windowUs += w;
    const cf = stack[0]!;
    if (cf.functionName === '(idle)') { idleUs += w; }
    const key = frameKey(cf);
    self.set(key, (self.get(key) ?? 0) + w);
    const a = area(cf);
    areas.set(a, (areas.get(a) ?? 0) + w);
    const seen = new Set<string>();
    for (const f of stack) {
      if (!isOwnFrame(f)) continue;
      const k = frameKey(f);
      if (seen.has(k)) continue;
      seen.add(k);
      total.set(k, (total.get(k) ?? 0) + w);
    }
  });
  const busyUs = Math.max(1, windowUs - idleUs);
  const rows = (m: Map<string, number>, n: number, skipIdle: boolean): FrameTime[] => [...m]
    .filter(([k]) => !skipIdle || !k.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([frame, us]) => ({ frame, ms: us / 1000, pct: (100 * us) / busyUs }));
  return {
    file: path.relative(ROOT, file), windowMs: windowUs / 1000, busyPct: (100 * (windowUs - idleUs)) / Math.max(1, windowUs),
    topSelf: rows(self, top, true), topTotal: rows(total, top, true), byArea: rows(areas, 12, true),
  };
}

/** Text rendering of a summary (percentages are of non-idle time). */
export function formatProfile(s: ProfileSummary, title: string): string {
  const fmt = (r: FrameTime): string => `  ${r.pct.toFixed(1).padStart(5)}%  ${r.ms.toFixed(0).padStart(6)} ms  ${r.frame}`;
  return [
    `${title} — ${s.file} (window ${s.windowMs.toFixed(0)} ms, busy ${s.busyPct.toFixed(0)}%)`,
    ' self time by area:', ...s.byArea.map(fmt),
    ' top functions by self time:', ...s.topSelf.map(fmt),
    ' project functions by total (inclusive) time:', ...s.topTotal.map(fmt),
  ].join('\n');
}

if (process.argv[1] && import.meta.filename === path.resolve(process.argv[1])) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: profile.ts FILE.cpuprofile [--top=15]\n');
    process.exit(2);
  }
  const top = Number(process.argv.find((a) => a.startsWith('--top='))?.slice(6) ?? 15);
  process.stdout.write(formatProfile(summarizeProfile(file, { top }), 'profile') + '\n');
}
