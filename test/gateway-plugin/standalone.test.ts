/**
 * The standalone entry as a child process: a bad config exits 1 with one
 * clear path-named line; a good config serves (liveness, readiness following
 * the sidecar's /readyz, proxying) and SIGTERM closes it gracefully.
 * Every wait is bounded.
 */

import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { TEST_API_KEY, TEST_API_KEY_ENV, allowAll, gatewayConfig, proofHeader, send, startFakeSidecar, startUpstream } from './helpers.js';
import { compiledFile } from '../helpers/compiled-sidecar.js';

t.setTimeout(45_000);

const ROOT = resolve(import.meta.dirname, '../..');
const dir = await mkdtemp(join(tmpdir(), 'gw-standalone-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));

interface Child {
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout: () => string;
  stderr: () => string;
  kill: (signal?: NodeJS.Signals) => void;
}

function run(args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { err += c.toString(); });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.on('exit', (code, signal) => done({ code, signal })));
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000); // hang guard (files run in parallel)
  void exit.then(() => clearTimeout(timer));
  return { exit, stdout: () => out, stderr: () => err, kill: (s = 'SIGTERM') => child.kill(s) };
}

/**
 * The standalone gateway compiled from the current sources (test/helpers/compiled-sidecar.ts): started with
 * plain node, each process costs about half the CPU of `node --import tsx gateway-plugin/standalone/main.ts`.
 */
const GATEWAY_MAIN = await compiledFile('gateway-plugin/standalone/main.js');
const MAIN = [GATEWAY_MAIN];

async function writeConfig(name: string, config: unknown): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, stringify(config));
  return file;
}

await t.test('bad configs exit 1 with one clear path-named line', async (t) => {
  const bad = await writeConfig('bad.yaml', gatewayConfig('http://127.0.0.1:1', 'http://127.0.0.1:2', { routes: [{ method: 'GET', path: '/a', scope: 'data:raed' }] }));
  const noKey = await writeConfig('nokey.yaml', gatewayConfig('http://127.0.0.1:1', 'http://127.0.0.1:2'));
  const cases: Array<[string[], Record<string, string>, RegExp]> = [
    [[...MAIN, '--config', bad], { [TEST_API_KEY_ENV]: TEST_API_KEY }, /^agent-authz-gateway: config: routes\[0\]\.scope: "data:raed" is not in the scope vocabulary/],
    [[...MAIN, '--config', noKey], {}, new RegExp(`^agent-authz-gateway: config: api_key_env: environment variable ${TEST_API_KEY_ENV} is not set$`)],
    [[...MAIN], {}, /^agent-authz-gateway: missing --config; usage: /],
    [[...MAIN, '--config', join(dir, 'absent.yaml')], {}, /^agent-authz-gateway: config: cannot read .* \(ENOENT\)$/],
  ];
  await Promise.all(cases.map(async ([args, env, message]) => {
    const child = run(args, env);
    const { code } = await child.exit;
    t.equal(code, 1, `exit code for ${message}`);
    const lines = child.stderr().trim().split('\n');
    t.equal(lines.length, 1, 'exactly one line on stderr');
    t.match(lines[0], message);
  }));
});

await t.test('a good config serves through the bin launcher; SIGTERM closes it', async (t) => {
  const up = await startUpstream();
  const sidecar = await startFakeSidecar(allowAll);
  t.teardown(async () => {
    await up.close();
    await sidecar.close();
  });
  const file = await writeConfig('good.yaml', gatewayConfig(up.url, sidecar.url, { log_level: 'info', metrics: false }));
  const child = run(['bin/agent-authz-gateway.mjs', '--config', file], { [TEST_API_KEY_ENV]: TEST_API_KEY });
  t.teardown(() => child.kill('SIGKILL'));
  let url: string | undefined;
  for (const deadline = Date.now() + 20_000; url === undefined && Date.now() < deadline;) {
    url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(child.stdout())?.[1];
    if (url === undefined) await new Promise((r) => setTimeout(r, 50));
  }
  if (url === undefined) {
    t.fail(`gateway did not start: ${child.stderr()}`);
    return;
  }
  t.equal((await send(url, '/healthz')).status, 200, 'liveness');
  t.equal((await send(url, '/readyz')).status, 200, 'ready while the sidecar is ready');
  sidecar.ready = false;
  const notReady = await send(url, '/readyz');
  t.equal(notReady.status, 503, 'not ready while the sidecar is not');
  t.equal(notReady.json?.error?.code, 'verify_unavailable');
  t.equal((await send(url, '/v1/items/1', { headers: { 'x-service-proof': proofHeader() } })).status, 200, 'proxies');
  t.equal(up.received.length, 1);
  t.notMatch(child.stdout(), new RegExp(TEST_API_KEY), 'the API key is never logged');
  child.kill('SIGTERM');
  const { code } = await child.exit;
  t.equal(code, 0, 'graceful exit on SIGTERM');
});
