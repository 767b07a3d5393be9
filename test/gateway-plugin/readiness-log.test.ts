/**
 * The standalone gateway says why it is not ready (issue 19: with the example config's wrong
 * sidecar port it stayed unready and logged nothing). The real entry point runs as a child
 * process against a small sidecar stand-in on loopback whose /readyz and challenge answers the
 * test sets:
 *
 * - sidecar unreachable: a warn line naming the URL and ECONNREFUSED, once however often
 *   /readyz is probed; when a sidecar appears on that port, the 5 s re-check logs "ready";
 * - sidecar not ready: the sidecar's status and error code;
 * - API key refused: an error line with the sidecar's code, never the key;
 * - all well: "sidecar ready; API key accepted"; a later readiness change is logged once.
 *
 * The `--help` text of the gateway is checked too (exit 0, nothing started).
 */
import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '../helpers/net.js';
import { TEST_API_KEY, TEST_API_KEY_ENV, gatewayConfig } from './helpers.js';
import { compiledFile } from '../helpers/compiled-sidecar.js';

/**
 * The standalone gateway compiled from the current sources (test/helpers/compiled-sidecar.ts): started with
 * plain node, each process costs about half the CPU of `node --import tsx gateway-plugin/standalone/main.ts`.
 */
const GATEWAY_MAIN = await compiledFile('gateway-plugin/standalone/main.js');

t.setTimeout(90_000);
const ROOT = resolve(import.meta.dirname, '../..');
const dir = await mkdtemp(join(tmpdir(), 'gw-readiness-log-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));

/** A sidecar stand-in on `port`: /readyz answers `state.ready`; the challenge checks the key. */
async function standIn(port: number) {
  const state = { ready: true, challenges: 0 };
  const server = http.createServer((req, res) => {
    req.resume();
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.url === '/readyz') {
      return state.ready ? json(200, { status: 'ready' }) : json(503, { error: { code: 'service_unavailable', message: 'x', status: 503 } });
    }
    if (req.url === '/v1/service/challenge' && req.method === 'POST') {
      state.challenges++;
      if (req.headers['x-service-api-key'] !== TEST_API_KEY) return json(401, { error: { code: 'invalid_api_key', message: 'x', status: 401 } });
      return json(200, { challenge: 'c'.repeat(43), expires_at: new Date().toISOString() });
    }
    return json(404, { error: { code: 'not_found', message: 'x', status: 404 } });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return Object.assign(state, { close: () => new Promise<void>((r) => server.close(() => r())) });
}

interface Gateway { url: string; lines(): Record<string, unknown>[]; output(): string; stop(): Promise<number | null> }

/** Starts the gateway (compiled from the sources) against `sidecarPort`; resolves once it listens. */
async function startGateway(t: Test, sidecarPort: number, apiKey = TEST_API_KEY): Promise<Gateway> {
  const file = join(dir, `gw-${sidecarPort}-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, stringify(gatewayConfig('http://127.0.0.1:9', `http://127.0.0.1:${sidecarPort}`, { log_level: 'info', metrics: false, listen: { host: '127.0.0.1', port: 0 } })));
  const child = spawn(process.execPath, [GATEWAY_MAIN, '--config', file], {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', [TEST_API_KEY_ENV]: apiKey }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const code = await exit;
    clearTimeout(killer);
    return code;
  };
  t.teardown(stop);
  let url: string | undefined;
  for (const deadline = Date.now() + 30_000; url === undefined && Date.now() < deadline && child.exitCode === null;) {
    url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
    if (url === undefined) await new Promise((r) => setTimeout(r, 50));
  }
  if (url === undefined) throw new Error(`the gateway did not start:\n${out}`);
  const lines = () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { url, lines, output: () => out, stop };
}

/** Waits (at most `ms`) for a log line whose msg matches `re`; returns it. */
async function logLine(gw: Gateway, re: RegExp, ms = 10_000): Promise<Record<string, unknown> | undefined> {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    const line = gw.lines().find((l) => re.test(String(l.msg)));
    if (line !== undefined) return line;
    await new Promise((r) => setTimeout(r, 50));
  }
  return undefined;
}

const readyz = async (gw: Gateway) => (await fetch(`${gw.url}/readyz`)).status;

t.test('sidecar unreachable: one warn line with the URL and the error; ready once it appears', async (t) => {
  const port = await freePort();
  const gw = await startGateway(t, port);
  const line = await logLine(gw, /^gateway not ready: /);
  t.ok(line, 'a "not ready" line');
  t.equal(line?.level, 40, 'at warn level');
  t.equal(line?.cause, 'sidecar_unreachable');
  t.match(String(line?.msg), new RegExp(`unreachable at http://127\\.0\\.0\\.1:${port}/readyz \\(ECONNREFUSED\\): is it running, and is sidecar_url right\\?`));
  t.equal(await readyz(gw), 503);
  t.equal(await readyz(gw), 503);
  t.equal(gw.lines().filter((l) => /^gateway not ready/.test(String(l.msg))).length, 1, 'logged once, not on every probe');
  const sidecar = await standIn(port);
  t.teardown(() => sidecar.close());
  t.ok(await logLine(gw, /^gateway ready: the sidecar answers \/readyz with 200$/, 12_000), 'the re-check logs that the gateway is ready');
  t.equal(await readyz(gw), 200);
  t.equal(await gw.stop(), 0);
});

t.test('sidecar not ready: its status and error code', async (t) => {
  const port = await freePort();
  const sidecar = await standIn(port);
  t.teardown(() => sidecar.close());
  sidecar.ready = false;
  const gw = await startGateway(t, port);
  const line = await logLine(gw, /^gateway not ready: /);
  t.equal(line?.cause, 'sidecar_not_ready');
  t.match(String(line?.msg), new RegExp(`the sidecar answered http://127\\.0\\.0\\.1:${port}/readyz with 503 \\(service_unavailable\\)`));
  t.equal(await gw.stop(), 0);
});

t.test('API key refused: an error line with the code, never the key', async (t) => {
  const port = await freePort();
  const sidecar = await standIn(port);
  t.teardown(() => sidecar.close());
  const wrongKey = 'gw-wrong-key-9876543210';
  const gw = await startGateway(t, port, wrongKey);
  const line = await logLine(gw, /refused the gateway's API key/);
  t.equal(line?.level, 50, 'at error level');
  t.match(String(line?.msg), /\(invalid_api_key\): every request to a protected route is refused with 503 verify_unavailable/);
  t.notMatch(gw.output(), new RegExp(wrongKey), 'the key is not logged');
  t.equal(await gw.stop(), 0);
});

t.test('all well: "API key accepted"; a later change of readiness is logged once each way', async (t) => {
  const port = await freePort();
  const sidecar = await standIn(port);
  t.teardown(() => sidecar.close());
  const gw = await startGateway(t, port);
  t.ok(await logLine(gw, /^sidecar ready; API key accepted$/), 'the startup check passed');
  t.equal(sidecar.challenges, 1, 'one challenge for the startup check');
  t.equal(await readyz(gw), 200);
  sidecar.ready = false;
  t.equal(await readyz(gw), 503);
  t.equal(await readyz(gw), 503);
  sidecar.ready = true;
  t.equal(await readyz(gw), 200);
  await logLine(gw, /^gateway ready/);
  const msgs = gw.lines().map((l) => String(l.msg)).filter((m) => /^gateway (not )?ready/.test(m));
  t.equal(msgs.length, 2, 'one "not ready", one "ready" line');
  t.match(msgs[0], /with 503 \(service_unavailable\)/);
  t.match(msgs[1], /^gateway ready/);
  t.equal(await gw.stop(), 0);
});

t.test('--help prints the usage and exits 0 without starting', async (t) => {
  const child = spawn(process.execPath, [GATEWAY_MAIN, '--help'],
    { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  t.equal(code, 0);
  t.match(out, /^usage: agent-authz-gateway --config <file\.yaml\|file\.json>\n/);
  t.match(out, /-c, --config <file>/);
  t.notMatch(out, /Server listening/);
});
