/**
 * `npm start` as a user runs it, in a copy of the project as a fresh clone is after `npm ci`: with dist/ built from
 * its sources (the build `npm test` made first, copied in: helpers.ts seedBuild; without one, the copy's `prestart`
 * builds it, never in the dist/ other tests read), with a temp data dir, a free port and a real SMTP sink:
 *
 * - `npm start -- --help` prints the usage and exits 0 without creating a data dir or a master
 *   key; an unknown command exits 2.
 * - config/gateway.example.yaml works against it: the example points at the sidecar's default
 *   port (8700, SIDECAR_PORT's default) and at examples/upstream.ts's (8081). So that parallel
 *   tests never collide on fixed ports, the test runs the example with only its ports moved
 *   (sidecar_url to this `npm start`'s port, upstream, listen and metrics to free ones); the
 *   gateway then logs "API key accepted", answers /readyz 200, forwards the public route and
 *   answers a protected one without a proof with 401 proof_required and a challenge.
 * - SIGTERM to the `npm` process stops the server: npm exits 0, no process it started is left,
 *   and the port is free again.
 */
import t from 'tap';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { cleanEnv, copyProject, reportSteps, ROOT, run, seedBuild, startProc, waitFor } from './helpers.js';
import { freePort } from '../helpers/net.js';
import { onboard, remoteSidecar, startMailSink } from '../helpers/sidecar.js';
import { DEFAULTS } from '../../sidecar/config/index.js';

t.setTimeout(120_000);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-start-'));
t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
const copy = path.join(work, 'project');
copyProject(copy);
const seeded = await seedBuild(copy);
reportSteps(t);

/** The pids of every descendant of `pid` (from /proc), children first. */
function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* the process ended meanwhile */ }
  }
  const out: number[] = [];
  for (let frontier = [pid]; frontier.length > 0;) {
    frontier = [...parentOf].filter(([, ppid]) => frontier.includes(ppid)).map(([child]) => child);
    out.push(...frontier);
  }
  return out;
}
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** True when nothing accepts connections on 127.0.0.1:`port`. */
const portFree = (port: number): Promise<boolean> => new Promise((resolve) => {
  const socket = net.connect(port, '127.0.0.1');
  socket.once('connect', () => { socket.destroy(); resolve(false); });
  socket.once('error', () => resolve(true));
});

t.test('npm start -- --help: usage, exit 0, no data dir, no master key; an unknown command exits 2', async (t) => {
  const help = await run('npm', ['start', '--silent', '--', '--help'], { cwd: copy, env: cleanEnv(), timeoutMs: 60_000 });
  t.equal(help.code, 0, `exit 0${help.code === 0 ? '' : `:\n${help.stderr}`}`);
  t.match(help.stderr, seeded ? /prepare: dist\/ is up to date with the sources/ : /prepare: built dist\/ in/,
    seeded ? 'prestart: the copied build is of these sources, nothing to build' : 'prestart built dist/');
  t.match(help.stdout, /^usage:\n {2}agent-authz-sidecar serve /m, 'the usage');
  t.match(help.stdout, /agent-authz-sidecar backup <file>/);
  t.notOk(fs.existsSync(path.join(copy, 'data')), 'no ./data directory');
  t.same(fs.readdirSync(copy).filter((f) => /master\.key|\.sqlite/.test(f)), [], 'no master key, no database');
  const bad = await run(process.execPath, ['bin/agent-authz-sidecar.mjs', 'serv'], { cwd: copy, env: cleanEnv() });
  t.equal(bad.code, 2, 'an unknown command: exit 2');
  t.match(bad.stderr, /unknown command or argument: serv\nusage:/);
  t.notOk(fs.existsSync(path.join(copy, 'data')), 'still no ./data directory');
});

t.test('npm start, the example gateway config against it, then SIGTERM to npm', async (t) => {
  const mail = await startMailSink();
  t.teardown(() => mail.close());
  const port = await freePort();
  const sidecarUrl = `http://127.0.0.1:${port}`;
  const npm = startProc('npm', ['start'], {
    cwd: copy,
    env: cleanEnv({
      SIDECAR_PORT: String(port), SIDECAR_DATA_DIR: path.join(work, 'data'), SIDECAR_SMTP_URL: mail.url,
      SIDECAR_INSECURE_COOKIES: '1', SIDECAR_LOG_LEVEL: 'info', SIDECAR_CRYPTO_WORKERS: '1',
    }),
  });
  t.teardown(() => npm.stop('SIGKILL'));
  await waitFor(`${sidecarUrl}/healthz`, npm, { timeoutMs: 60_000 });
  await waitFor(`${sidecarUrl}/readyz`, npm);

  // The example config, its ports moved (see the file header).
  const example = parseYaml(fs.readFileSync(path.join(ROOT, 'config/gateway.example.yaml'), 'utf8')) as Record<string, unknown> & {
    sidecar_url: string; upstream_url: string; listen: { port: number }; metrics: { port: number };
  };
  t.equal(new URL(example.sidecar_url).port, String(DEFAULTS.port), `sidecar_url uses the sidecar's default port ${DEFAULTS.port}`);
  t.equal(new URL(example.upstream_url).port, '8081', 'upstream_url is examples/upstream.ts\'s default port');
  t.not(example.listen.port, DEFAULTS.port, 'the gateway does not listen on the sidecar\'s port');
  t.not(example.listen.port, 8081, 'nor on the upstream\'s');
  const upstream = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`upstream ${req.url}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => upstream.close(r)));
  const gwPort = await freePort();
  const config = {
    ...example,
    sidecar_url: `${sidecarUrl}/`,
    upstream_url: `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}`,
    listen: { ...example.listen, port: gwPort },
    metrics: { ...example.metrics, port: await freePort() },
  };
  const configFile = path.join(work, 'gateway.yaml');
  fs.writeFileSync(configFile, stringify(config));

  const user = await onboard(remoteSidecar(sidecarUrl, mail), 'example-config@example.com');
  const reg = await user.post('/v1/service/platforms/personal', { name: 'Example', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'data:write'] });
  t.equal(reg.status, 200, 'a platform registered on the npm start sidecar');
  const gw = startProc(process.execPath, ['bin/agent-authz-gateway.mjs', '--config', configFile], {
    cwd: copy, env: cleanEnv({ GATEWAY_API_KEY: (reg.body as { api_key: string }).api_key }),
  });
  t.teardown(() => gw.stop());
  const gwUrl = `http://127.0.0.1:${gwPort}`;
  await waitFor(`${gwUrl}/readyz`, gw);
  t.pass('the gateway is ready: it reaches the sidecar');
  for (let i = 0; i < 100 && !gw.output().includes('API key accepted'); i++) await new Promise((r) => setTimeout(r, 50));
  t.match(gw.output(), /"msg":"sidecar ready; API key accepted"/, 'and logs that the sidecar accepts its key');
  const pub = await fetch(`${gwUrl}/v1/status`);
  t.same([pub.status, await pub.text()], [200, 'upstream /v1/status'], 'the public route reaches the upstream');
  const prot = await fetch(`${gwUrl}/v1/items`, { headers: { host: 'acme.api.example.com' } });
  const body = await prot.json() as { error?: { code?: string; challenge?: string } };
  t.equal(prot.status, 401, 'a protected route without a proof: 401');
  t.equal(body.error?.code, 'proof_required');
  t.match(body.error?.challenge, /^[A-Za-z0-9_-]{20,}$/, 'with a challenge from the sidecar');
  t.equal(await gw.stop(), 0, 'the gateway stops on SIGTERM');

  // SIGTERM to the npm process.
  const children = descendants(npm.pid);
  t.ok(children.length >= 1, `npm started ${children.length} process(es): ${children.join(', ')}`);
  t.notOk(await portFree(port), 'the sidecar holds its port');
  const code = await npm.stop('SIGTERM');
  t.equal(code, 0, 'npm exits 0 (the server shut down gracefully)');
  for (let i = 0; i < 50 && children.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
  t.same(children.filter(alive), [], 'no process npm started is left');
  t.ok(await portFree(port), 'the port is released');
  t.match(npm.output(), /"signal":"SIGTERM"[^\n]*"msg":"shutting down/, 'the sidecar got the SIGTERM');
  t.match(npm.output(), /"forced":false[^\n]*"msg":"shutdown complete"/, 'and shut down gracefully');
});
