/**
 * The line-length scan of the product for line-length.test.ts: which files are product, which
 * of their lines are longer than a limit, and how per-file counts compare with a baseline.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The product's folders (tests, bench and docs are not product). */
export const PRODUCT_ROOTS = ['src', 'runtime', 'sidecar', 'gateway-plugin', 'client', 'receiver', 'bin', 'scripts', 'console/src'] as const;
const TEXT_EXT = /\.(ts|tsx|mts|cts|js|mjs|cjs|css|html|sql)$/;

/** The committed baseline: per file, its lines over 120 and (temporarily) over 160. */
export interface Baseline {
  over120: Record<string, number>;
  pendingOver160: Record<string, number>;
}

/** One line over a limit. */
export interface LongLine {
  readonly file: string;
  readonly line: number;
  readonly length: number;
}

/** The product's text files, repository-relative and sorted. */
export function productFiles(repo: string): string[] {
  const out: string[] = [];
  const walk = (rel: string, depth: number): void => {
    if (depth > 20) throw new Error(`line lengths: ${rel} is nested too deep`);
    for (const e of fs.readdirSync(path.join(repo, rel), { withFileTypes: true })) {
      const child = `${rel}/${e.name}`;
      if (e.isDirectory()) { if (e.name !== 'node_modules' && e.name !== 'dist') walk(child, depth + 1); }
      else if (e.isFile() && TEXT_EXT.test(e.name) && !e.name.endsWith('.d.ts')) out.push(child);
    }
  };
  for (const r of PRODUCT_ROOTS) if (fs.existsSync(path.join(repo, r))) walk(r, 0);
  return out.sort();
}

/** The lines of `files` longer than `limit` code points, and their count per file. */
export function longLines(repo: string, files: readonly string[], limit: number): { lines: LongLine[]; counts: Map<string, number> } {
  const lines: LongLine[] = [];
  const counts = new Map<string, number>();
  for (const file of files) {
    fs.readFileSync(path.join(repo, file), 'utf8').split(/\r?\n/).forEach((text, i) => {
      const length = [...text].length;
      if (length <= limit) return;
      lines.push({ file, line: i + 1, length });
      counts.set(file, (counts.get(file) ?? 0) + 1);
    });
  }
  return { lines, counts };
}

/** Files whose count rose above the baseline (a missing entry is 0) and files whose count fell below it. */
export function compareBaseline(
  now: ReadonlyMap<string, number>,
  baseline: Readonly<Record<string, number>>,
): { rose: string[]; fell: string[] } {
  const rose: string[] = [];
  const fell: string[] = [];
  for (const file of new Set([...now.keys(), ...Object.keys(baseline)])) {
    const n = now.get(file) ?? 0;
    const b = baseline[file] ?? 0;
    if (n > b) rose.push(`${file}: ${n} lines, baseline ${b}`);
    else if (n < b) fell.push(`${file}: ${n} lines, baseline ${b}`);
  }
  return { rose: rose.sort(), fell: fell.sort() };
}
