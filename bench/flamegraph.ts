/**
 * Flame graphs of V8 CPU profiles (`node --cpu-prof`) as self-contained SVG:
 * one box per call path, its width the time spent in it and everything it
 * called, callers below callees (Brendan Gregg's layout, children sorted by
 * name). Idle time is left out, so the full width is the busy time of the
 * window. Boxes are coloured by where the code lives: this project (blue),
 * npm packages (yellow), Node's own JavaScript (orange), other files such as
 * the benchmark's own or a loader's (green), native code, the VM and the
 * garbage collector (grey). Each box has a tooltip with its
 * time and share.
 *
 *   node --import tsx bench/flamegraph.ts FILE.cpuprofile [OUT.svg]
 *
 * The benchmark writes one next to each profile it takes (bench/out/prof-*).
 */
import fs from 'node:fs';
import path from 'node:path';
import { forEachSample, frameKey, isOwnFrame, readProfile } from './profile.js';
import type { CallFrame, CpuProfile } from './profile.js';
import { escapeXml } from './svg.js';

/** One call path of a flame graph. */
export interface FlameNode {
  /** The frame, as the text summaries name it (`function file[:line]`). */
  name: string;
  /** Where its code lives (the box colour): this project, an npm package, Node's JavaScript, another file, or native code / VM / GC. */
  kind: 'own' | 'npm' | 'node' | 'other' | 'native';
  /** Time spent in this frame itself (µs). */
  self: number;
  /** Time spent in it and its callees (µs). */
  total: number;
  /** The call paths it called (in order of first appearance). */
  children: FlameNode[];
}

function kindOf(cf: CallFrame): FlameNode['kind'] {
  if (!cf.url) return 'native';
  if (cf.url.includes('node_modules/')) return 'npm';
  if (cf.url.startsWith('node:')) return 'node';
  return isOwnFrame(cf) ? 'own' : 'other';
}

/**
 * The call tree of a profile's non-idle samples inside `fromEndUs` (µs before the profile's end,
 * as in `summarizeProfile`), with call paths of the same frames merged.
 */
export function flameTree(p: CpuProfile, opts: { fromEndUs?: [number, number] } = {}): FlameNode {
  const root: FlameNode = { name: 'all', kind: 'native', self: 0, total: 0, children: [] };
  const index = new Map<FlameNode, Map<string, FlameNode>>();
  const child = (parent: FlameNode, cf: CallFrame): FlameNode => {
    let byName = index.get(parent);
    if (!byName) index.set(parent, (byName = new Map()));
    const name = frameKey(cf);
    let n = byName.get(name);
    if (!n) {
      n = { name, kind: kindOf(cf), self: 0, total: 0, children: [] };
      byName.set(name, n);
      parent.children.push(n);
    }
    return n;
  };
  forEachSample(p, opts.fromEndUs, (stack, us) => {
    if (stack[0]!.functionName === '(idle)') return;
    let at = root;
    at.total += us;
    // stack[0] is the sampled frame; the outermost caller (the V8 "(root)") is last and is left out.
    for (let i = stack.length - 1; i >= 0; i--) {
      if (i === stack.length - 1 && stack[i]!.functionName === '(root)') continue;
      at = child(at, stack[i]!);
      at.total += us;
    }
    at.self += us;
  });
  return root;
}

const ROW = 16;
const FONT = 11;
const CHAR_WIDTH = 6.4;
const MIN_WIDTH = 0.5;

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0) / 2 ** 32;
}

function colour(n: FlameNode): string {
  const v = hash(n.name);
  switch (n.kind) {
    case 'own': return `hsl(205, 70%, ${Math.round(62 + v * 16)}%)`;
    case 'npm': return `hsl(${Math.round(44 + v * 12)}, 85%, ${Math.round(58 + v * 12)}%)`;
    case 'node': return `hsl(${Math.round(18 + v * 14)}, 85%, ${Math.round(60 + v * 10)}%)`;
    case 'other': return `hsl(${Math.round(105 + v * 20)}, 45%, ${Math.round(62 + v * 12)}%)`;
    default: return `hsl(0, 0%, ${Math.round(68 + v * 14)}%)`;
  }
}

/** Renders a flame tree as an SVG document `width` pixels wide. */
export function renderFlameGraph(root: FlameNode, opts: { title: string; subtitle?: string; width?: number }): string {
  const width = opts.width ?? 1200;
  const pad = 10;
  const scale = root.total > 0 ? (width - 2 * pad) / root.total : 0;
  const boxes: { node: FlameNode; x: number; w: number; level: number }[] = [];
  let depth = 0;
  const place = (n: FlameNode, x: number, level: number): void => {
    const w = n.total * scale;
    if (w < MIN_WIDTH) return;
    depth = Math.max(depth, level + 1);
    boxes.push({ node: n, x, w, level });
    let cx = x;
    for (const c of [...n.children].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      place(c, cx, level + 1);
      cx += c.total * scale;
    }
  };
  place(root, pad, 0);
  const top = opts.subtitle ? 52 : 36;
  const height = top + depth * ROW + pad;
  const busyMs = root.total / 1000;
  const rects = boxes.map(({ node: n, x, w, level }) => {
    const y = height - pad - (level + 1) * ROW;
    const pct = root.total > 0 ? (100 * n.total) / root.total : 0;
    const tip = `${n.name} — ${(n.total / 1000).toFixed(1)} ms (${pct.toFixed(1)} %), self ${(n.self / 1000).toFixed(1)} ms`;
    const chars = Math.floor((w - 4) / CHAR_WIDTH);
    const label = chars < 3 ? '' : n.name.length <= chars ? n.name : `${n.name.slice(0, chars - 1)}…`;
    return `<g><title>${escapeXml(tip)}</title><rect x="${x.toFixed(2)}" y="${y}" width="${w.toFixed(2)}" height="${ROW - 1}" rx="2" fill="${colour(n)}"/>`
      + (label ? `<text x="${(x + 3).toFixed(2)}" y="${y + ROW - 4.5}">${escapeXml(label)}</text>` : '') + '</g>';
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="monospace" font-size="${FONT}">`,
    `<rect width="100%" height="100%" fill="#fdfdf8"/>`,
    `<text x="${pad}" y="20" font-size="14" font-weight="bold">${escapeXml(opts.title)}</text>`,
    opts.subtitle ? `<text x="${pad}" y="38" fill="#555">${escapeXml(opts.subtitle)}</text>` : '',
    `<text x="${width - pad}" y="20" text-anchor="end" fill="#555">busy ${busyMs.toFixed(0)} ms · blue: agent-authz · yellow: npm · orange: node · green: other · grey: native/VM/GC</text>`,
    ...rects,
    '</svg>',
  ].filter(Boolean).join('\n') + '\n';
}

/**
 * Writes the flame graph of a `.cpuprofile` (busy time inside `fromEndUs`) to `out`; returns `out`.
 * `profile` is the file's parsed content when the caller has it already.
 */
export function writeFlameGraph(file: string, out: string, opts: { title: string; subtitle?: string; fromEndUs?: [number, number]; profile?: CpuProfile }): string {
  const tree = flameTree(opts.profile ?? readProfile(file), { fromEndUs: opts.fromEndUs });
  fs.writeFileSync(out, renderFlameGraph(tree, { title: opts.title, subtitle: opts.subtitle ?? path.basename(file) }));
  return out;
}

if (process.argv[1] && import.meta.filename === path.resolve(process.argv[1])) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: flamegraph.ts FILE.cpuprofile [OUT.svg]\n');
    process.exit(2);
  }
  const out = process.argv[3] ?? file.replace(/\.cpuprofile$/, '') + '.svg';
  writeFlameGraph(file, out, { title: path.basename(file) });
  process.stdout.write(`${out}\n`);
}
