/**
 * Child processes of the benchmark: the sidecar and the gateway started the
 * way users start them, and the helper servers of bench/servers.ts. Every
 * child is tracked and killed when the benchmark exits, fails or is
 * interrupted; every wait is bounded.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { request } from 'undici';
import { ROOT } from '../test/shared/node24.js';

const live = new Set<ChildProcess>();
let hooked = false;

/** Kills every tracked child (SIGKILL); safe to call more than once. */
export function killAll(): void {
  for (const c of live) {
    try { c.kill('SIGKILL'); } catch { /* gone */ }
  }
  live.clear();
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

export { freePort } from '../test/shared/ports.js';

/** A tracked child process with the tail of its output. */
export class Child {
  readonly proc: ChildProcess;
  private tail = '';
  readonly exited: Promise<number | null>;
  private stdoutListeners: ((line: string) => void)[] = [];
  private buf = '';
  /** The last stdout lines (bounded), so a wait can match a line printed before it started. */
  private readonly lines: string[] = [];

  readonly name: string;

  constructor(name: string, cmd: string, args: string[], env: NodeJS.ProcessEnv) {
    this.name = name;
    hookExit();
    this.proc = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(this.proc);
    const keep = (chunk: Buffer): void => {
      this.tail = (this.tail + chunk.toString('utf8')).slice(-8192);
    };
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      keep(chunk);
      this.buf += chunk.toString('utf8');
      let i: number;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.lines.push(line);
        if (this.lines.length > 200) this.lines.shift();
        for (const l of this.stdoutListeners) l(line);
      }
      if (this.buf.length > 65536) this.buf = this.buf.slice(-65536);
    });
    this.proc.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => this.proc.once('exit', (code) => { live.delete(this.proc); resolve(code); }));
  }

  get pid(): number { return this.proc.pid!; }
  get running(): boolean { return this.proc.exitCode === null && this.proc.signalCode === null; }
  /** The last 8 KiB of stdout + stderr. */
  output(): string { return this.tail; }

  /** Resolves with the first stdout line matching `re` (bounded by `timeoutMs`). */
  waitForLine(re: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
    for (const line of this.lines) {
      const m = re.exec(line);
      if (m) return Promise.resolve(m);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no line matching ${re} within ${timeoutMs} ms\n${this.tail}`)), timeoutMs);
      const on = (line: string): void => {
        const m = re.exec(line);
        if (m) { clearTimeout(timer); resolve(m); }
      };
      this.stdoutListeners.push(on);
      void this.exited.then((code) => { clearTimeout(timer); reject(new Error(`${this.name} exited (${code}) before it was ready\n${this.tail}`)); });
    });
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Resolves when the process is gone. */
  async stop(graceMs = 10_000): Promise<number | null> {
    if (!this.running) return this.proc.exitCode;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => { try { this.proc.kill('SIGKILL'); } catch { /* gone */ } }, graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

/** Polls `url` until it answers `status` (bounded). Fails early when `child` exits. */
export async function waitForHttp(url: string, child: Child, timeoutMs: number, status = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (!child.running) throw new Error(`${child.name} exited (${child.proc.exitCode ?? child.proc.signalCode}) before it was ready\n${child.output()}`);
    try {
      const r = await request(url, { headersTimeout: 2000, bodyTimeout: 2000 });
      await r.body.dump();
      if (r.statusCode === status) return;
      last = `status ${r.statusCode}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${child.name}: ${url} not ready within ${timeoutMs} ms (${last})\n${child.output()}`);
}

/** The environment of a child: the parent's, without any SIDECAR_* variable, plus `extra`. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SIDECAR_')) env[k] = v;
  return { ...env, ...extra };
}

export { CLOCK_TICKS, cpuSeconds } from '../test/shared/proc-stat.js';

/** Resident set size of a process in bytes. */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Node flags for a child written in TypeScript (loaded through tsx). */
export function tsArgs(script: string, nodeFlags: string[] = []): string[] {
  return [...nodeFlags, '--import', 'tsx', path.join(ROOT, script)];
}

/**
 * Starts each of `bins` once with `flags` and `-e 0` (bounded: 20 s each); throws a TypeError
 * with Node's own complaint when one refuses them, so an unknown flag stops the run before it
 * starts anything.
 */
export function probeNodeFlags(flags: string[], bins: string[]): void {
  if (!flags.length) return;
  for (const bin of bins) {
    const r = spawnSync(bin, [...flags, '-e', '0'], { encoding: 'utf8', timeout: 20_000 });
    if (r.status !== 0) {
      const why = (r.stderr || r.error?.message || `exit ${r.status ?? r.signal}`).trim().split('\n')[0];
      throw new TypeError(`BENCH_NODE_FLAGS: ${bin} refused ${flags.join(' ')}: ${why}`);
    }
  }
}
