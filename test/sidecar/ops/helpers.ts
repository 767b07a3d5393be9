/**
 * Helpers of the operations tests: a strict parser of the Prometheus text
 * exposition format (0.0.4), `promtool check metrics` when it is installed,
 * the metrics list of docs/operations.md, and a real sidecar child process
 * (compiled from the current sources: test/helpers/compiled-sidecar.ts) on a free port.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../helpers/net.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/** The repository root. */
export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

// ---------------------------------------------------------------------------
// Prometheus text format

/** One sample line. */
export interface Sample { name: string; labels: Record<string, string>; value: number }
/** One metric family (`# TYPE` block). */
export interface Family { name: string; type: string; help: string | undefined; samples: Sample[] }

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(raw: string, where: string): number {
  if (raw === 'NaN') return NaN;
  if (raw === '+Inf' || raw === 'Inf') return Infinity;
  if (raw === '-Inf') return -Infinity;
  if (!/^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(raw)) throw new Error(`${where}: bad value ${JSON.stringify(raw)}`);
  return Number(raw);
}

function unescapeHelp(s: string): string {
  return s.replace(/\\(\\|n)/g, (_m, c: string) => (c === 'n' ? '\n' : '\\'));
}

/** Parses `{a="x",b="y"}` starting at `text[i] === '{'`; returns labels and the index after `}`. */
function parseLabels(text: string, i: number, where: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  i += 1;
  for (;;) {
    if (text[i] === '}') return { labels, end: i + 1 };
    const m = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (!m) throw new Error(`${where}: bad label name at ${i}`);
    const name = m[0];
    i += name.length;
    if (text[i] !== '=' || text[i + 1] !== '"') throw new Error(`${where}: expected ="`);
    i += 2;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new Error(`${where}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const n = text[i + 1];
        if (n === '\\') value += '\\';
        else if (n === '"') value += '"';
        else if (n === 'n') value += '\n';
        else throw new Error(`${where}: bad escape \\${n}`);
        i += 2;
        continue;
      }
      if (c === '\n') throw new Error(`${where}: raw newline in label value`);
      value += c;
      i += 1;
    }
    i += 1;
    if (Object.hasOwn(labels, name)) throw new Error(`${where}: duplicate label ${name}`);
    if (!LABEL_NAME.test(name) || name.startsWith('__')) throw new Error(`${where}: reserved or bad label name ${name}`);
    labels[name] = value;
    if (text[i] === ',') { i += 1; continue; }
    if (text[i] === '}') return { labels, end: i + 1 };
    throw new Error(`${where}: expected , or } at ${i}`);
  }
}

/** The family a sample name belongs to, given the declared types. */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(name);
  if (direct && direct.type !== 'histogram' && direct.type !== 'summary') return direct;
  for (const suffix of ['_bucket', '_sum', '_count', '']) {
    if (!name.endsWith(suffix)) continue;
    const f = families.get(name.slice(0, name.length - suffix.length));
    if (!f) continue;
    if (f.type === 'histogram' && suffix !== '') return f;
    if (f.type === 'summary' && (suffix === '_sum' || suffix === '_count' || suffix === '')) return f;
  }
  return undefined;
}

/**
 * Strictly parses the Prometheus text format: every sample belongs to a
 * family declared by `# TYPE` before it, names and labels are well formed,
 * no series repeats, histogram buckets are cumulative with a `+Inf` bucket
 * equal to `_count`, counters are not negative, and the text ends with a
 * newline. Throws on the first violation.
 */
export function parsePrometheusText(text: string): Map<string, Family> {
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('exposition does not end with a newline');
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  const seen = new Set<string>();
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((line, n) => {
    const where = `line ${n + 1}`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name ${name}`);
      if (kind === 'HELP') {
        if (helps.has(name)) throw new Error(`${where}: second HELP for ${name}`);
        helps.set(name, unescapeHelp(rest));
        const f = families.get(name);
        if (f) f.help = helps.get(name);
      } else {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type ${rest}`);
        if (families.has(name)) throw new Error(`${where}: second TYPE for ${name}`);
        families.set(name, { name, type: rest, help: helps.get(name), samples: [] });
      }
      return;
    }
    const nm = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nm) throw new Error(`${where}: bad sample line ${JSON.stringify(line)}`);
    const name = nm[0];
    let i = name.length;
    let labels: Record<string, string> = {};
    if (line[i] === '{') ({ labels, end: i } = parseLabels(line, i, where));
    if (line[i] !== ' ') throw new Error(`${where}: expected a space before the value`);
    const parts = line.slice(i + 1).split(' ');
    if (parts.length < 1 || parts.length > 2) throw new Error(`${where}: expected value [timestamp]`);
    const value = parseValue(parts[0]!, where);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`${where}: bad timestamp`);
    const family = familyOf(name, families);
    if (!family) throw new Error(`${where}: sample ${name} has no preceding # TYPE`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) throw new Error(`${where}: duplicate series ${key}`);
    seen.add(key);
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`${where}: negative or NaN counter ${name}`);
    if (family.type === 'histogram' && name.endsWith('_bucket') && labels.le === undefined) throw new Error(`${where}: bucket without le`);
    family.samples.push({ name, labels, value });
  });
  for (const f of families.values()) {
    if (f.help === undefined) throw new Error(`${f.name}: no HELP`);
    if (f.type !== 'histogram') continue;
    const groups = new Map<string, Sample[]>();
    for (const s of f.samples) {
      const { le, ...rest } = s.labels;
      const k = JSON.stringify(Object.entries(rest).sort());
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k)!.push(le === undefined ? s : { ...s, labels: { ...s.labels } });
    }
    for (const [k, ss] of groups) {
      const buckets = ss.filter((s) => s.name === `${f.name}_bucket`).map((s) => ({ le: parseValue(s.labels.le!, f.name), v: s.value }));
      const count = ss.find((s) => s.name === `${f.name}_count`);
      if (!ss.find((s) => s.name === `${f.name}_sum`) || !count) throw new Error(`${f.name}${k}: missing _sum or _count`);
      const sorted = [...buckets].sort((a, b) => a.le - b.le);
      if (sorted.at(-1)?.le !== Infinity) throw new Error(`${f.name}${k}: no +Inf bucket`);
      for (let j = 1; j < sorted.length; j++) if (sorted[j]!.v < sorted[j - 1]!.v) throw new Error(`${f.name}${k}: buckets not cumulative`);
      if (sorted.at(-1)!.v !== count.value) throw new Error(`${f.name}${k}: +Inf bucket != _count`);
    }
  }
  return families;
}

/** Value of the sample `name{labels}` (labels matched as a subset), or undefined. */
export function sampleValue(families: Map<string, Family>, family: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const f = families.get(family);
  const s = f?.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return s?.value;
}

/**
 * `agent_authz_crypto_tasks_total` of the sidecar at `url`, by `op:thread` (`verify:worker`,
 * `sign:main`, …; 0 for a series not exported yet).
 */
export async function cryptoTasks(url: string): Promise<Record<string, number>> {
  const m = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
  const out: Record<string, number> = {};
  for (const op of ['verify', 'sign']) {
    for (const thread of ['main', 'worker']) out[`${op}:${thread}`] = sampleValue(m, 'agent_authz_crypto_tasks_total', 'agent_authz_crypto_tasks_total', { op, thread }) ?? 0;
  }
  return out;
}

/** True when `promtool` is on PATH. */
export function promtoolAvailable(): boolean {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return r.status === 0;
}

/** Runs `promtool check metrics` on `text`; returns its exit status and output. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

// ---------------------------------------------------------------------------
// The documented metrics list

/** One documented metric: the row of the markdown table between the markers. */
export interface DocMetric { name: string; type: string; help: string }

export const METRICS_BEGIN = '<!-- metrics:begin -->';
export const METRICS_END = '<!-- metrics:end -->';

/**
 * The metrics documented between the markers of a markdown file: table rows
 * `` | `name` | type | help | `` (the header and separator rows are skipped).
 * Returns undefined when the file or its markers are absent.
 */
export function readDocMetrics(file: string): DocMetric[] | undefined {
  if (!fs.existsSync(file)) return undefined;
  const text = fs.readFileSync(file, 'utf8');
  const a = text.indexOf(METRICS_BEGIN);
  const b = text.indexOf(METRICS_END);
  if (a < 0 || b < 0) return undefined;
  if (b < a) throw new Error(`${file}: metrics markers out of order`);
  const out: DocMetric[] = [];
  for (const line of text.slice(a + METRICS_BEGIN.length, b).split('\n')) {
    const m = /^\|\s*`([^`]+)`\s*\|\s*(\w+)\s*\|\s*(.*?)\s*\|\s*$/.exec(line.trim());
    if (m) out.push({ name: m[1]!, type: m[2]!, help: m[3]!.replace(/\\\|/g, '|') });
  }
  return out;
}

/** The markdown block for a set of served families (printed when the docs disagree). */
export function docMetricsBlock(families: Iterable<Family>): string {
  const rows = [...families].map((f) => `| \`${f.name}\` | ${f.type} | ${(f.help ?? '').replace(/\|/g, '\\|').replace(/\n/g, ' ')} |`);
  return [METRICS_BEGIN, '| metric | type | help |', '| --- | --- | --- |', ...rows, METRICS_END].join('\n');
}

// ---------------------------------------------------------------------------
// A sidecar child process

/** The environment without any inherited SIDECAR_* variable (unknown ones are refused at startup). */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SIDECAR_') && k !== 'NODE_ENV') env[k] = v;
  return { ...env, ...extra };
}

/** A sidecar running as a child process. */
export interface ChildSidecar {
  child: ChildProcess;
  url: string;
  port: number;
  dataDir: string;
  /** Every stdout line so far (JSON logs). */
  lines: string[];
  stderr: string[];
  /** Resolves with the exit code (and signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILLs the child if it is still running. */
  kill(): void;
}

/** How the child exited, or `null` when it is still running after `ms` (the timer does not outlive the wait). */
export async function exitWithin(sc: ChildSidecar, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([sc.exited, new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

/** A fresh base64 master key. */
export function newMasterKey(): string {
  return crypto.randomBytes(32).toString('base64');
}

/**
 * Spawns the sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts) with a fresh
 * (or the given) data directory on a free port, and waits (at most 20 s) until `/readyz` answers 200.
 */
export async function spawnSidecar(o: { dataDir?: string; env?: Record<string, string> } = {}): Promise<ChildSidecar> {
  const port = await freePort();
  const dataDir = o.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'authz-ops-'));
  const child = spawn(process.execPath, [await compiledSidecarMain()], {
    cwd: REPO,
    env: cleanEnv({ SIDECAR_PORT: String(port), SIDECAR_HOST: '127.0.0.1', SIDECAR_DATA_DIR: dataDir, SIDECAR_LOG_LEVEL: 'info', ...o.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const stderr: string[] = [];
  let buf = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) { lines.push(buf.slice(0, i)); buf = buf.slice(i + 1); }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => stderr.push(d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  let done = false;
  void exited.then(() => { done = true; });
  const url = `http://127.0.0.1:${port}`;
  const sc: ChildSidecar = { child, url, port, dataDir, lines, stderr, exited, kill: () => { if (!done) child.kill('SIGKILL'); } };
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (done) throw new Error(`sidecar exited during startup: ${stderr.join('')}`);
    try {
      const r = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      if (r.status === 200) return sc;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  sc.kill();
  throw new Error(`sidecar did not become ready: ${stderr.join('')}`);
}
