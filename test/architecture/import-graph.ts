/**
 * The import graph of the product's sources, for the architecture test
 * (imports.test.ts): which file imports which, by relative specifier,
 * type-only imports included (the compiler erases them, so a bundler's graph
 * would miss them; a circle through types is still a circle).
 *
 * The scanner blanks comments and string contents first (a specifier is
 * read back from the literal it was in), so `import` in a comment, a TSDoc
 * example or a string counts for nothing. It reads static imports and
 * re-exports (`import … from`, `import type … from`, `export … from`,
 * `import '…'`), `import('…')` (dynamic, and type queries such as
 * `import('./x.js').T`) and `require('…')`. Relative specifiers that name no
 * file are reported, so a scanner mistake shows as a failure, not as a
 * missing edge.
 */
import fs from 'node:fs';
import path from 'node:path';

/** A directed graph: file (repository-relative, `/`-separated) → the files it imports. */
export type ImportGraph = Map<string, Set<string>>;

const SOURCE_EXT = /\.(ts|mts|mjs)$/;
const KEYWORDS_BEFORE_REGEX = new Set(['return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw', 'yield', 'await', 'instanceof']);

/**
 * `src` with comments blanked and every string or template literal replaced by
 * `'#n'`, where `literals[n]` is its text (templates with `${}` are blanked).
 */
export function blank(src: string): { code: string; literals: string[] } {
  const out: string[] = [];
  const literals: string[] = [];
  let i = 0;
  /** The last significant character and word emitted (regex-or-division heuristic). */
  let lastChar = '';
  let lastWord = '';
  const templateDepth: number[] = [];
  let braces = 0;
  const emit = (s: string): void => {
    out.push(s);
    const t = s.trimEnd();
    if (t) lastChar = t[t.length - 1]!;
  };
  while (i < src.length) {
    const c = src[i]!;
    const n = src[i + 1];
    if (c === '/' && n === '/') {
      const end = src.indexOf('\n', i);
      i = end < 0 ? src.length : end;
      continue;
    }
    if (c === '/' && n === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end < 0 ? src.length : end + 2;
      emit(src.slice(i, stop).replace(/[^\n]/g, ' '));
      i = stop;
      continue;
    }
    if (c === '\'' || c === '"') {
      let j = i + 1;
      let text = '';
      while (j < src.length && src[j] !== c && src[j] !== '\n') {
        if (src[j] === '\\') { text += src.slice(j, j + 2); j += 2; continue; }
        text += src[j]; j++;
      }
      literals.push(text);
      emit(`'#${literals.length - 1}'`);
      lastWord = '';
      i = j + 1;
      continue;
    }
    if (c === '`' || (c === '}' && templateDepth.length > 0 && templateDepth[templateDepth.length - 1] === braces)) {
      // A template literal, or the rest of one after a `${…}` substitution.
      if (c === '}') templateDepth.pop();
      let j = i + 1;
      while (j < src.length && src[j] !== '`' && !(src[j] === '$' && src[j + 1] === '{')) j += src[j] === '\\' ? 2 : 1;
      if (src[j] === '$') { templateDepth.push(braces); j += 2; emit(' ( '); } else { j += 1; emit(c === '`' ? '``' : ' ) '); }
      lastWord = '';
      i = j;
      continue;
    }
    if (c === '/' && (lastChar === '' || '(,=:[!&|?{};+-*%<>~^'.includes(lastChar) || KEYWORDS_BEFORE_REGEX.has(lastWord))) {
      // A regular expression literal: skip it (a quote inside it starts no string).
      let j = i + 1;
      let inClass = false;
      while (j < src.length && src[j] !== '\n') {
        const d = src[j]!;
        if (d === '\\') { j += 2; continue; }
        if (d === '[') inClass = true;
        else if (d === ']') inClass = false;
        else if (d === '/' && !inClass) break;
        j++;
      }
      j++;
      while (j < src.length && /[a-z]/i.test(src[j]!)) j++;
      emit('/re/');
      lastWord = '';
      i = j;
      continue;
    }
    if (c === '{') braces++;
    if (c === '}') braces--;
    if (/[A-Za-z_$]/.test(c)) {
      let j = i;
      while (j < src.length && /[\w$]/.test(src[j]!)) j++;
      lastWord = src.slice(i, j);
      emit(lastWord);
      i = j;
      continue;
    }
    if (!/\s/.test(c)) lastWord = '';
    emit(c);
    i++;
  }
  return { code: out.join(''), literals };
}

/** Every module specifier `src` imports or re-exports, type-only ones included, in source order. */
export function specifiers(src: string): string[] {
  const { code, literals } = blank(src);
  const found: { at: number; spec: string }[] = [];
  const lit = (m: RegExpMatchArray, group: number): string => literals[Number(m[group])]!;
  const patterns = [
    // import x from, import type { X } from, import * as x from, export { x } from, export * from:
    // a word `from` right before a string literal is valid TypeScript only there.
    /(?<![\w$.])from\s*'#(\d+)'/g,
    // import './side-effect.js'
    /(?<![\w$.])import\s*'#(\d+)'/g,
    // import('./x.js') and type queries import('./x.js').T; require('./x.js')
    /(?<![\w$.])(?:import|require)\s*\(\s*'#(\d+)'/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) found.push({ at: m.index, spec: lit(m, 1) });
  return found.sort((a, b) => a.at - b.at).map((f) => f.spec);
}

/** The file a relative specifier names (`.js` → `.ts` as NodeNext resolves it), or undefined. */
export function resolveSpecifier(fromFile: string, spec: string, exists: (file: string) => boolean): string | undefined {
  const base = path.posix.join(path.posix.dirname(fromFile), spec);
  const candidates = spec.endsWith('.js') ? [base.slice(0, -3) + '.ts', base]
    : spec.endsWith('.mjs') ? [base.slice(0, -4) + '.mts', base]
      : [base];
  return candidates.find(exists);
}

/** Lists the source files under `roots` (repository-relative folders; missing ones are skipped). */
export function sourceFiles(repo: string, roots: readonly string[]): string[] {
  const files: string[] = [];
  const walk = (rel: string, depth: number): void => {
    if (depth > 20) throw new Error(`import graph: ${rel} is nested too deep`);
    for (const e of fs.readdirSync(path.join(repo, rel), { withFileTypes: true })) {
      const child = `${rel}/${e.name}`;
      if (e.isDirectory()) { if (e.name !== 'node_modules') walk(child, depth + 1); }
      else if (e.isFile() && SOURCE_EXT.test(e.name) && !e.name.endsWith('.d.ts')) files.push(child);
    }
  };
  for (const r of roots) if (fs.existsSync(path.join(repo, r))) walk(r, 0);
  return files.sort();
}

/** The import graph of `files` (relative specifiers only) and the specifiers that name no file. */
export function buildGraph(repo: string, files: readonly string[]): { graph: ImportGraph; unresolved: string[] } {
  const graph: ImportGraph = new Map();
  const unresolved: string[] = [];
  const exists = (f: string): boolean => fs.existsSync(path.join(repo, f)) && fs.statSync(path.join(repo, f)).isFile();
  for (const file of files) {
    const edges = new Set<string>();
    for (const spec of specifiers(fs.readFileSync(path.join(repo, file), 'utf8'))) {
      if (!spec.startsWith('./') && !spec.startsWith('../')) continue;
      const target = resolveSpecifier(file, spec, exists);
      if (target) edges.add(target);
      else unresolved.push(`${file}: '${spec}'`);
    }
    graph.set(file, edges);
  }
  return { graph, unresolved };
}

/** A forbidden import: files under `from` must not import files under any of `to`. */
export interface ImportRule {
  readonly from: string;
  readonly to: readonly string[];
  readonly why: string;
}

/** The imports that break a rule, as `a.ts → b.ts (why)`. */
export function ruleViolations(graph: ImportGraph, rules: readonly ImportRule[]): string[] {
  const under = (file: string, folder: string): boolean => file.startsWith(`${folder}/`);
  const out: string[] = [];
  for (const [file, edges] of graph) {
    for (const rule of rules) {
      if (!under(file, rule.from)) continue;
      for (const target of edges) if (rule.to.some((t) => under(target, t))) out.push(`${file} → ${target} (${rule.why})`);
    }
  }
  return out.sort();
}

/**
 * The import circles: one path per strongly connected component of more than
 * one file (or a file that imports itself), as `a → b → … → a`. Tarjan's
 * algorithm, iterative so a deep graph cannot overflow the stack.
 */
export function findCycles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  const succ = (v: string): string[] => [...(graph.get(v) ?? [])].sort();
  for (const root of [...graph.keys()].sort()) {
    if (index.has(root)) continue;
    const work: { v: string; edges: string[]; i: number }[] = [];
    const open = (v: string): void => {
      index.set(v, next); low.set(v, next); next++;
      stack.push(v); onStack.add(v);
      work.push({ v, edges: succ(v), i: 0 });
    };
    open(root);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      if (top.i < top.edges.length) {
        const w = top.edges[top.i++]!;
        if (!index.has(w)) open(w);
        else if (onStack.has(w)) low.set(top.v, Math.min(low.get(top.v)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.v;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.v)!));
      }
      if (low.get(top.v) !== index.get(top.v)) continue;
      const comp: string[] = [];
      let w: string;
      do { w = stack.pop()!; onStack.delete(w); comp.push(w); } while (w !== top.v);
      if (comp.length > 1 || graph.get(top.v)?.has(top.v)) components.push(comp);
    }
  }
  return components.map((comp) => cyclePath(graph, new Set(comp)));
}

/** One circle through a strongly connected component, from its first file (breadth-first, so the shortest back to it). */
function cyclePath(graph: ImportGraph, comp: Set<string>): string[] {
  const start = [...comp].sort()[0]!;
  const prev = new Map<string, string>();
  const queue = [start];
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q]!;
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!comp.has(w)) continue;
      if (w === start) {
        const p = [start];
        for (let x: string | undefined = v; x !== undefined && x !== start; x = prev.get(x)) p.unshift(x);
        p.unshift(start);
        return p;
      }
      if (!prev.has(w)) { prev.set(w, v); queue.push(w); }
    }
  }
  return [start, start];
}
