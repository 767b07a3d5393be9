/**
 * Line lengths of the product (src, runtime, sidecar, gateway-plugin, client, receiver, bin,
 * scripts, console/src; not tests, bench or docs):
 *
 * - no line over {@link HARD_LIMIT} characters;
 * - no line *added* over {@link SOFT_LIMIT}: a ratchet. `line-length-baseline.json` lists, per
 *   file, how many lines over 120 it has; a file fails when its count rises above that (a new
 *   file's allowance is 0) and when it falls below (lower the baseline in the same commit, so the
 *   room cannot be spent again). `LINE_BASELINE=write npx tap test/architecture/line-length.test.ts`
 *   rewrites the file from the tree.
 *
 * The baseline's `pendingOver160` lists the lines over 160 still waiting for a reflow in files
 * other engineers were editing (issue 30); the hard limit holds everywhere else, and those
 * counts may only fall. Characters are counted as code points.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { compareBaseline, longLines, productFiles } from './line-length.js';
import type { Baseline } from './line-length.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BASELINE_FILE = path.join(REPO, 'test/architecture/line-length-baseline.json');
/** No product line is longer. */
export const HARD_LIMIT = 160;
/** No line longer than this is added. */
export const SOFT_LIMIT = 120;

const files = productFiles(REPO);
const soft = longLines(REPO, files, SOFT_LIMIT);
const hard = longLines(REPO, files, HARD_LIMIT);

if (process.env.LINE_BASELINE === 'write') {
  const old = JSON.parse(fs.readFileSync(BASELINE_FILE, 'utf8')) as Baseline;
  const pending: Record<string, number> = {};
  for (const [file, n] of hard.counts) if (old.pendingOver160[file] !== undefined) pending[file] = n;
  const next: Baseline = { over120: Object.fromEntries(soft.counts), pendingOver160: pending };
  fs.writeFileSync(BASELINE_FILE, `${JSON.stringify(next, null, 2)}\n`);
}

const baseline = JSON.parse(fs.readFileSync(BASELINE_FILE, 'utf8')) as Baseline;

t.test('the product files are found', async (t) => {
  t.ok(files.length >= 200, `${files.length} files scanned`);
  for (const dir of ['src/', 'sidecar/', 'gateway-plugin/', 'client/', 'console/src/', 'bin/', 'scripts/']) {
    t.ok(files.some((f) => f.startsWith(dir)), `${dir} is scanned`);
  }
  t.notOk(files.some((f) => f.startsWith('test/') || f.startsWith('bench/') || f.startsWith('docs/')), 'tests, bench and docs are not');
});

t.test(`no product line over ${HARD_LIMIT} characters`, async (t) => {
  const outside = hard.lines.filter((l) => baseline.pendingOver160[l.file] === undefined);
  t.same(outside.map((l) => `${l.file}:${l.line} (${l.length})`), [], 'break them: argument lists, strings, comments');
  const pending = compareBaseline(hard.counts, baseline.pendingOver160);
  t.same(pending.rose, [], 'the files waiting for a reflow gain no long line');
  t.same(pending.fell, [], 'a reflowed file leaves pendingOver160 (or its count falls there)');
});

t.test(`no line over ${SOFT_LIMIT} characters added (the ratchet)`, async (t) => {
  const d = compareBaseline(soft.counts, baseline.over120);
  const where = (file: string): string[] => soft.lines.filter((l) => l.file === file).map((l) => `${l.line} (${l.length})`);
  for (const r of d.rose) t.fail(`${r}: break the new long lines (now at ${where(r.split(':')[0]!).join(', ')})`);
  for (const f of d.fell) t.fail(`${f}: fewer long lines than the baseline; lower it (LINE_BASELINE=write)`);
  t.ok(d.rose.length === 0 && d.fell.length === 0, 'every file is at its baseline');
});

t.test('the comparison names a rise, a fall and a new file', async (t) => {
  const now = new Map([['a.ts', 3], ['b.ts', 1], ['new.ts', 2]]);
  t.same(compareBaseline(now, { 'a.ts': 2, 'b.ts': 2, 'gone.ts': 1 }), {
    rose: ['a.ts: 3 lines, baseline 2', 'new.ts: 2 lines, baseline 0'],
    fell: ['b.ts: 1 lines, baseline 2', 'gone.ts: 0 lines, baseline 1'],
  });
  t.same(compareBaseline(new Map(), {}), { rose: [], fell: [] });
});
