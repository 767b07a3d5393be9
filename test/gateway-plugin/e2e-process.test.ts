/**
 * End-to-end acceptance with REAL processes: the sidecar (`sidecar/main.js`)
 * and the standalone gateway (`gateway-plugin/standalone/main.js --config <yaml>`), compiled
 * from the current sources (test/helpers/compiled-sidecar.ts), run with plain node
 * as child processes; the test drives the spec flow over HTTP (a real SMTP
 * receiver in the test catches the login code) and owns a recording upstream.
 *
 * Checked: both become live and ready; an allowed request reaches the
 * upstream with the decision headers; a non-delegated scope is 403
 * not_delegated; a missing proof is 401 with a challenge the agent's platform
 * can present (the upstream is untouched until the retry); after a revoke a
 * pre-revoke bundle is 403 delegation_revoked; the gateway's metrics listener
 * shows the outcomes and fail_open_total = 0; SIGTERM stops both cleanly.
 * Every wait is bounded; children are killed in teardown.
 */

import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { present, presentChallenge, remoteSidecar, specFlow, startMailSink } from '../helpers/sidecar.js';
import { gatewayConfig, metricSum, proofHeader, send, startUpstream } from './helpers.js';
import { freePort } from '../helpers/net.js';
import { compiledFile, compiledSidecarMain } from '../helpers/compiled-sidecar.js';

t.setTimeout(40_000);

const ROOT = resolve(import.meta.dirname, '../..');
const KEY_ENV = 'E2E_GATEWAY_API_KEY';

interface Child {
  readonly name: string;
  exited: boolean;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `node <args>` in the repo root with exactly `env` (plus PATH). */
function spawnNode(name: string, args: string[], env: Record<string, string>): Child {
  const child = spawn(process.execPath, args,
    { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })));
  const handle: Child = {
    name,
    exited: false,
    exit,
    output: () => out,
    async stop() {
      if (!handle.exited) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 8_000);
      const result = await exit;
      clearTimeout(killer);
      return result;
    },
  };
  void exit.then(() => { handle.exited = true; });
  return handle;
}

/** Polls `paths` on `base` until each answers 200 (at most `ms`); throws with the child's output otherwise. */
async function waitReady(child: Child, base: string, paths: string[], ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (const path of paths) {
    for (;;) {
      if (child.exited) throw new Error(`${child.name} exited during startup:\n${child.output()}`);
      try {
        const r = await fetch(base + path, { signal: AbortSignal.timeout(1000) });
        await r.arrayBuffer();
        if (r.status === 200) break;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`${child.name}: ${path} not 200 within ${ms} ms:\n${child.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function expectStatus(t: Test, res: { status: number; text: string }, want: number, what: string): void {
  t.equal(res.status, want, `${what}: ${want}`, res.status === want ? {} : { body: res.text.slice(0, 600) });
}

// ---- sidecar process ----
const dir = await mkdtemp(join(tmpdir(), 'gw-e2e-process-'));
const mail = await startMailSink();
const up = await startUpstream();
const sidecarPort = await freePort();
const sidecarUrl = `http://127.0.0.1:${sidecarPort}`;
const sidecar = spawnNode('sidecar', [await compiledSidecarMain()], {
  SIDECAR_HOST: '127.0.0.1',
  SIDECAR_PORT: String(sidecarPort),
  SIDECAR_DATA_DIR: join(dir, 'data'),
  SIDECAR_SMTP_URL: mail.url,
  SIDECAR_INSECURE_COOKIES: '1',
  SIDECAR_LOG_LEVEL: 'warn',
  SIDECAR_SEND_CODE_PER_MINUTE: '100',
});
let gateway: Child | undefined;
t.teardown(async () => {
  if (gateway !== undefined) await gateway.stop();
  await sidecar.stop();
  await up.close();
  await mail.close();
  await rm(dir, { recursive: true, force: true });
});
await waitReady(sidecar, sidecarUrl, ['/healthz', '/readyz']);

// ---- the spec flow over HTTP against the child ----
const flow = await specFlow(remoteSidecar(sidecarUrl, mail), 'process@example.com', { scopes: ['data:read', 'data:write'], approve: ['data:read'] });
const apiKey = flow.reg.api_key as string;

// ---- gateway process ----
const gatewayPort = await freePort();
const metricsPort = await freePort();
const configFile = join(dir, 'gateway.yaml');
await writeFile(configFile, stringify(gatewayConfig(up.url, sidecarUrl, {
  api_key_env: KEY_ENV,
  verify_timeout_ms: 10_000,
  challenge_timeout_ms: 5_000,
  listen: { host: '127.0.0.1', port: gatewayPort },
  metrics: { host: '127.0.0.1', port: metricsPort, path: '/metrics' },
  log_level: 'warn',
  routes: [
    { method: 'GET', path: '/v1/items/*', scope: 'data:read' },
    { method: 'POST', path: '/v1/items', scope: 'data:write' },
    { method: 'GET', path: '/public/status', public: true },
  ],
})));
const gatewayMain = await compiledFile('gateway-plugin/standalone/main.js');
gateway = spawnNode('gateway', [gatewayMain, '--config', configFile], { [KEY_ENV]: apiKey });
const gw = `http://127.0.0.1:${gatewayPort}`;
const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
await waitReady(gateway, gw, ['/healthz', '/readyz']);

const proof = async (): Promise<Record<string, string>> => ({ 'x-service-proof': proofHeader(await present(flow)) });

await t.test('an allowed request reaches the upstream with the decision headers', async (t) => {
  const res = await send(gw, '/v1/items/42?full=1', { headers: await proof() });
  expectStatus(t, res, 200, 'allowed');
  t.equal(up.received.length, 1);
  const r = up.received[0];
  t.equal(r?.url, '/v1/items/42?full=1');
  t.equal(r?.headers['x-service-decision'], 'allow');
  t.equal(r?.headers['x-service-scope'], 'data:read');
  t.equal(r?.headers['x-service-agent-id'], flow.agentId);
  t.equal(r?.headers['x-service-cert-id'], flow.certId);
  t.notOk(r !== undefined && 'x-service-proof' in r.headers, 'no proof forwarded');
  expectStatus(t, await send(gw, '/public/status'), 200, 'public route');
  t.equal(up.received.length, 2);
});

await t.test('a scope that was not delegated is 403 not_delegated', async (t) => {
  const before = up.received.length;
  const res = await send(gw, '/v1/items', { method: 'POST', headers: { ...(await proof()), 'content-type': 'application/json' }, body: '{"name":"n"}' });
  expectStatus(t, res, 403, 'not delegated');
  t.equal(res.json?.error?.code, 'not_delegated');
  t.equal(up.received.length, before, 'upstream untouched');
});

await t.test('a missing proof is 401 with a challenge; the upstream is untouched until the proven retry', async (t) => {
  const before = up.received.length;
  const res = await send(gw, '/v1/items/7');
  expectStatus(t, res, 401, 'missing proof');
  t.equal(res.json?.error?.code, 'proof_required');
  const challenge = res.json?.error?.challenge as string;
  t.match(res.headers['www-authenticate'], `challenge="${challenge}"`);
  t.equal(up.received.length, before, 'upstream untouched');
  const pr = await presentChallenge(flow, challenge);
  expectStatus(t, pr, 200, 'present the gateway challenge');
  const retry = await send(gw, '/v1/items/7', { headers: { 'x-service-proof': pr.body.proof_header as string } });
  expectStatus(t, retry, 200, 'retry with the proof');
  t.equal(up.received.length, before + 1);
});

await t.test('after revoke, a bundle built before the revoke is 403 delegation_revoked', async (t) => {
  const early = await proof();
  const rv = await flow.user.post(`/v1/service/delegations/${flow.certId}/revoke`, { reason: 'e2e process' });
  expectStatus(t, rv, 200, 'revoke');
  const before = up.received.length;
  const res = await send(gw, '/v1/items/1', { headers: early });
  expectStatus(t, res, 403, 'revoked');
  t.equal(res.json?.error?.code, 'delegation_revoked');
  t.equal(up.received.length, before, 'upstream untouched');
});

await t.test('gateway metrics over its listener; fail_open_total = 0', async (t) => {
  const g = (labels: Record<string, string>) => metricSum(metricsUrl, 'agent_authz_gateway_requests_total', labels);
  t.equal(await g({ outcome: 'allowed', reason: 'authorized' }), 2);
  t.equal(await g({ outcome: 'public', reason: 'public' }), 1);
  t.equal(await g({ outcome: '401', reason: 'proof_required' }), 1);
  t.equal(await g({ outcome: '403', reason: 'not_delegated' }), 1);
  t.equal(await g({ outcome: '403', reason: 'delegation_revoked' }), 1);
  t.equal(await metricSum(metricsUrl, 'agent_authz_gateway_fail_open_total'), 0);
  const s = `${sidecarUrl}/metrics`;
  t.equal(await metricSum(s, 'agent_authz_verify_decisions_total', { decision: 'allow' }), 2, 'sidecar allows');
  t.equal(await metricSum(s, 'agent_authz_verify_decisions_total', { decision: 'deny' }), 2, 'sidecar denies');
});

await t.test('SIGTERM stops both processes cleanly; no secret in their output', async (t) => {
  const g = await gateway!.stop();
  t.same(g, { code: 0, signal: null }, 'gateway exit 0');
  const s = await sidecar.stop();
  t.same(s, { code: 0, signal: null }, 'sidecar exit 0');
  t.notMatch(gateway!.output() + sidecar.output(), apiKey, 'the API key is never printed');
});
