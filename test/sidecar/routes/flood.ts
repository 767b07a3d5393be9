/**
 * Helpers of the login-flood tests: a sidecar as a real process
 * (compiled from the current sources: test/helpers/compiled-sidecar.ts) on a data directory or database that
 * outlives it, so it can be restarted on the same data, with the development
 * mailer, whose log lines (`devLoginCode`) say which address got a code; and
 * a send-code flood over keep-alive, pipelined connections (undici), each
 * request for its own address from its own client IPv6 /64 (`X-Forwarded-For`
 * through a trusted loopback proxy).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { Test } from 'tap';
import { Pool } from 'undici';
import { freePort } from '../../helpers/net.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** A sidecar process. */
export interface SidecarProcess {
  readonly url: string;
  /** Every line it wrote (stdout and stderr), except the development mailer's. */
  lines(): string[];
  /** Login codes the development mailer wrote for `email`, in order. */
  codesFor(email: string): string[];
  /** Login codes the development mailer wrote, over all addresses. */
  codesSent(): number;
  /** SIGTERM (SIGKILL after 10 s); resolves to the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL at once (a crash); resolves to the exit code (null: killed by the signal). */
  kill9(): Promise<number | null>;
}

/**
 * Starts the sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts) with `env`
 * (over loopback defaults) and resolves once `/readyz`
 * answers 200 (at most 60 s); killed in `t`'s teardown if still running.
 */
export async function startSidecarProcess(t: Test, env: Record<string, string>): Promise<SidecarProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [await compiledSidecarMain()], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', SIDECAR_HOST: '127.0.0.1', SIDECAR_PORT: String(port), SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'warn', ...env },
  });
  const lines: string[] = [];
  const codes = new Map<string, string[]>();
  let sent = 0;
  let partial = '';
  const keep = (c: Buffer): void => {
    const parts = (partial + c.toString('utf8')).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      if (line === '') continue;
      if (!line.includes('"devLoginCode"')) { lines.push(line); continue; }
      const { to, devLoginCode } = JSON.parse(line) as { to: string; devLoginCode: string };
      sent++;
      // Only the few addresses a test looks at are kept (not the flood's 50,000).
      if (!to.startsWith('flood-')) codes.set(to, [...(codes.get(to) ?? []), devLoginCode]);
    }
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = false;
  const exit = new Promise<number | null>((done) => child.once('exit', (code) => { exited = true; done(code); }));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> => {
    if (!exited) child.kill(signal);
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const code = await exit;
    clearTimeout(killer);
    return code;
  };
  t.teardown(() => stop());
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`the sidecar exited during startup:\n${lines.join('\n')}`);
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.status === 200) return { url, lines: () => lines, codesFor: (e) => codes.get(e) ?? [], codesSent: () => sent, stop: () => stop(), kill9: () => stop('SIGKILL') };
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { await stop(); throw new Error(`the sidecar was not ready within 60 s:\n${lines.join('\n')}`); }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The client address of flood request `i`: a /64 of its own. */
export const floodIp = (i: number): string => `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`;

/** Outcome counts of a flood, by `<status> <error code>` (`200 code_sent` for a sent code). */
export type FloodResult = Map<string, number>;

/**
 * Sends `n` send-code requests, request `i` for `flood-<i>@<domain>` from {@link floodIp}(i),
 * spread round robin over `urls`, `concurrency` at a time on keep-alive connections (8 per
 * sidecar, pipelined). Stops early (the counts then fall short of `n`) after `budgetMs`.
 */
export async function flood(urls: string[], n: number, o: { concurrency: number; budgetMs: number; domain: string }): Promise<FloodResult> {
  const pools = urls.map((u) => new Pool(u, { connections: 8, pipelining: Math.ceil(o.concurrency / urls.length / 8) + 1 }));
  const out: FloodResult = new Map();
  const deadline = Date.now() + o.budgetMs;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n && Date.now() < deadline) {
      const i = next++;
      const r = await pools[i % pools.length]!.request({
        path: '/v1/auth/email/send-code', method: 'POST', headersTimeout: 30_000, bodyTimeout: 30_000,
        headers: { 'content-type': 'application/json', 'x-forwarded-for': floodIp(i) }, body: `{"email":"flood-${i}@${o.domain}"}`,
      });
      const text = await r.body.text();
      let k: string;
      try {
        const j = JSON.parse(text) as { status?: string; error?: { code?: string } };
        k = `${r.statusCode} ${j.error?.code ?? j.status ?? '?'}`;
      } catch {
        k = `${r.statusCode} unparsable`;
      }
      out.set(k, (out.get(k) ?? 0) + 1);
    }
  };
  try {
    await Promise.all(Array.from({ length: o.concurrency }, worker));
  } finally {
    await Promise.all(pools.map((p) => p.destroy()));
  }
  return out;
}
