/**
 * Graceful shutdown of the real standalone gateway process (`node
 * <compiled>/gateway-plugin/standalone/main.js --config <yaml>`), in front of a real upstream
 * and a fake sidecar that allows everything. Under concurrent keep-alive load
 * (8 workers, at most 3 s, of a public route, a protected route with a proof
 * header, and `/readyz`), SIGTERM makes the process stop accepting and finish
 * what it received:
 *
 * - no request that got a connection sees a reset (ECONNRESET, socket hang
 *   up, other side closed); refused connections after the listener closed
 *   are fine;
 * - responses sent after the signal carry `Connection: close`;
 * - a keep-alive connection that was idle when the signal came is still
 *   answered during the drain, and `/readyz` on it is 503 `shutting_down`;
 * - every 200 a client saw was forwarded to the upstream exactly once;
 * - the process exits 0.
 *
 * The same sequence (runtime/shutdown.ts) serves the sidecar; see
 * test/sidecar/ops/shutdown.test.ts. Every wait is bounded; the child is
 * killed in teardown.
 */

import t from 'tap';
import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { TEST_API_KEY, TEST_API_KEY_ENV, allowAll, gatewayConfig, proofHeader, startFakeSidecar, startUpstream } from './helpers.js';
import { freePort } from '../helpers/net.js';
import { compiledFile } from '../helpers/compiled-sidecar.js';

/**
 * The standalone gateway compiled from the current sources (test/helpers/compiled-sidecar.ts): started with
 * plain node, each process costs about half the CPU of `node --import tsx gateway-plugin/standalone/main.ts`.
 */
const GATEWAY_MAIN = await compiledFile('gateway-plugin/standalone/main.js');

t.setTimeout(60_000);

const ROOT = resolve(import.meta.dirname, '../..');
const RESET = /ECONNRESET|UND_ERR_SOCKET|socket hang up|other side closed|EPIPE/i;

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** The error code of a failed request (its code, its cause's code, or the message). */
function failure(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string } };
  return e.code ?? e.cause?.code ?? e.message ?? String(err);
}

/** `promise`, or `'timeout'` when it has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), ms); })])
    .finally(() => clearTimeout(timer));
}

/** One request on a keep-alive agent; reports whether it reused an idle connection. */
function agentGet(agent: http.Agent, url: string): Promise<{ status: number; connection: string | undefined; body: string; reused: boolean }> {
  return new Promise((done, fail) => {
    const req = http.get(url, { agent, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => done({ status: res.statusCode ?? 0, connection: res.headers.connection, body, reused: req.reusedSocket }));
      res.on('error', fail);
    });
    req.on('timeout', () => req.destroy(new Error('probe timed out')));
    req.on('error', fail);
  });
}

t.test('SIGTERM under keep-alive load: no resets, Connection: close, drain, exit 0', async (t) => {
  const up = await startUpstream();
  const sidecar = await startFakeSidecar(allowAll);
  const dir = await mkdtemp(join(tmpdir(), 'gw-shutdown-'));
  const port = await freePort();
  const metricsPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const file = join(dir, 'gateway.yaml');
  await writeFile(file, stringify(gatewayConfig(up.url, sidecar.url, {
    listen: { host: '127.0.0.1', port },
    metrics: { host: '127.0.0.1', port: metricsPort },
    log_level: 'info',
  })));

  const child = spawn(process.execPath, [GATEWAY_MAIN, '--config', file], {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', [TEST_API_KEY_ENV]: TEST_API_KEY }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
  let exited = false;
  const exit = new Promise<Exit>((done) => child.once('exit', (code, signal) => { exited = true; done({ code, signal }); }));
  const pool = new Pool(url, { connections: 8, pipelining: 1, headersTimeout: 5000, bodyTimeout: 5000 });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(async () => {
    if (!exited) child.kill('SIGKILL');
    agent.destroy();
    await pool.destroy();
    await up.close();
    await sidecar.close();
    await rm(dir, { recursive: true, force: true });
  });

  // Wait (bounded) until the gateway is live and ready, and its metrics listener answers.
  const t0 = Date.now();
  for (const target of [`${url}/healthz`, `${url}/readyz`, `http://127.0.0.1:${metricsPort}/metrics`]) {
    for (let status = 0; status !== 200;) {
      if (exited) throw new Error(`gateway exited during startup: ${stderr}`);
      if (Date.now() - t0 > 20_000) throw new Error(`${target} not 200 within 20 s: ${stderr}`);
      try {
        const r = await fetch(target, { signal: AbortSignal.timeout(1000) });
        await r.arrayBuffer();
        status = r.status;
      } catch { /* not listening yet */ }
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
  }
  t.comment(`gateway ready in ${Date.now() - t0} ms`);

  // An idle keep-alive connection, opened before the signal.
  const first = await agentGet(agent, `${url}/healthz`);
  t.equal(first.status, 200, 'probe connection opened');

  // afterSignal: the request was sent after the signal; doneBeforeSignal: its answer arrived before the signal was sent.
  const outcomes: { op: string; result: string; afterSignal: boolean; close: boolean; doneBeforeSignal?: boolean }[] = [];
  let signalled = false;
  let sawClose = false;
  const proof = { 'x-service-proof': proofHeader() };
  const ops: Record<string, () => Promise<{ result: string; close: boolean }>> = {
    public: async () => {
      const r = await pool.request({ method: 'GET', path: '/public/status' });
      await r.body.text();
      return { result: String(r.statusCode), close: r.headers.connection === 'close' };
    },
    protected: async () => {
      const r = await pool.request({ method: 'GET', path: '/v1/items/1', headers: proof });
      await r.body.text();
      return { result: String(r.statusCode), close: r.headers.connection === 'close' };
    },
    readyz: async () => {
      const r = await pool.request({ method: 'GET', path: '/readyz' });
      const b = await r.body.json() as { error?: { cause?: string } };
      return { result: r.statusCode === 503 ? `503 ${b.error?.cause}` : String(r.statusCode), close: r.headers.connection === 'close' };
    },
  };
  const names = ['public', 'protected', 'readyz', 'public', 'protected', 'public', 'protected', 'public'];
  // The load runs until 2.2 s after the signal; the signal waits (bounded) for enough answered
  // requests before it, so a slow machine cannot leave the "before the signal" half empty.
  let stopAt = Date.now() + 30_000;
  const worker = async (op: string): Promise<void> => {
    while (Date.now() < stopAt) {
      const afterSignal = signalled;
      try {
        const { result, close } = await ops[op]!();
        if (close) sawClose = true;
        outcomes.push({ op, result, afterSignal, close, doneBeforeSignal: !signalled });
      } catch (err) {
        const result = failure(err);
        outcomes.push({ op, result, afterSignal, close: false });
        if (/ECONNREFUSED/.test(result) || RESET.test(result)) return; // the listener is gone
      }
    }
  };
  const load = Promise.all(names.map(worker));
  await new Promise((r) => setTimeout(r, 800));
  for (const deadline = Date.now() + 10_000; outcomes.length <= 30 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
  t.comment(`${outcomes.length} answers before the signal`);
  signalled = true;
  stopAt = Date.now() + 2200;
  child.kill('SIGTERM');

  // As soon as the shutdown shows (a Connection: close answer), use the idle connection:
  // it must still be answered (drain), and readiness must already be failing.
  for (const deadline = Date.now() + 2000; !sawClose && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 5));
  t.ok(sawClose, 'a response after the signal carried Connection: close');
  const probe = await agentGet(agent, `${url}/readyz`).then((r) => ({ ...r, body: JSON.parse(r.body) as unknown }), (err: unknown) => ({ error: failure(err) }));
  t.same(probe, { status: 503, connection: 'close', reused: true, body: { error: { code: 'verify_unavailable', message: 'The gateway is shutting down.', status: 503, cause: 'shutting_down' } } },
    'the idle keep-alive connection is answered during the drain: /readyz 503 shutting_down, Connection: close');

  await load;
  t.comment(`load done at ${Date.now() - t0} ms`);
  const result = await within(exit, 15_000);
  t.comment(`exited at ${Date.now() - t0} ms`);

  const summary = new Map<string, number>();
  for (const o of outcomes) {
    const key = `${o.op} ${o.result}${o.afterSignal ? ' (after signal)' : ''}`;
    summary.set(key, (summary.get(key) ?? 0) + 1);
  }
  t.comment(JSON.stringify(Object.fromEntries(summary)));
  t.ok(outcomes.filter((o) => !o.afterSignal).length > 20, 'load ran before the signal');
  t.same(outcomes.filter((o) => RESET.test(o.result)), [], 'no request that got a connection was reset');
  const allowed = new Set(['200', '503 shutting_down', 'ECONNREFUSED']);
  t.same(outcomes.filter((o) => !allowed.has(o.result)), [], 'every other outcome is a normal answer or a refused connection');
  // A probe sent just before the signal may be answered after it (503 is right then); one answered
  // before the signal was sent must not have failed.
  t.same(outcomes.filter((o) => o.result === '503 shutting_down' && o.doneBeforeSignal === true), [], 'readiness fails only after the signal');
  t.ok(outcomes.some((o) => o.afterSignal && o.result === 'ECONNREFUSED'), 'new connections are refused after the listener closed');
  const proxied = outcomes.filter((o) => o.op !== 'readyz' && o.result === '200').length;
  t.equal(up.received.length, proxied, 'every 200 the clients saw was forwarded once, and nothing else');
  t.ok(sidecar.verifyCalls.length >= outcomes.filter((o) => o.op === 'protected' && o.result === '200').length, 'protected answers were verified');
  t.same(result, { code: 0, signal: null }, `exits 0 (stderr: ${stderr.slice(0, 500)})`);
  t.match(stdout, /"service":"gateway".*"msg":"shutdown complete"/, 'logged: shutdown complete');
});
