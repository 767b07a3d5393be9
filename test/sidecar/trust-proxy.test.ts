/**
 * SIDECAR_TRUST_PROXY is validated with the other settings: a bad entry (a prefix length too
 * long for its family, /0, a host name, an empty prefix) is a one-line ConfigError naming the
 * variable, and the real entry point exits 2 with that line before it creates a data
 * directory. Every entry that passes is one Fastify's trustProxy accepts and honours.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import { ConfigError, loadConfig } from '../../sidecar/config/index.js';
import { compiledSidecarMain } from '../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

const ROOT = path.resolve(import.meta.dirname, '../..');

t.test('bad entries: a ConfigError naming SIDECAR_TRUST_PROXY and the entry', async (t) => {
  for (const bad of ['10.0.0.0/33', '::1/129', 'proxy.example.com', '10.0.0.0/', '10.0.0.0/8/8', '10.0.0.0/-1', '10.0.0.0/ 8', '256.0.0.1', '10.0.0.0/08x', '0.0.0.0/0', '::/0']) {
    try {
      loadConfig({ SIDECAR_TRUST_PROXY: `127.0.0.1, ${bad}` });
      t.fail(`accepted ${bad}`);
    } catch (err) {
      t.ok(err instanceof ConfigError, `${bad}: a ConfigError`);
      const m = (err as Error).message;
      t.ok(m.startsWith('SIDECAR_TRUST_PROXY: '), `names the variable: ${m}`);
      t.ok(m.includes(JSON.stringify(bad.trim())), 'quotes the bad entry');
      t.notMatch(m, /\n/, 'one line');
    }
  }
});

t.test('good entries pass, and Fastify accepts and honours every one', async (t) => {
  const value = '10.0.0.0/8, 127.0.0.1, ::1, fd00::/8, 192.168.1.0/24, 0.0.0.0/1, ::/1, 172.16.0.0/32, ::ffff:10.0.0.0/104';
  const { trustProxy } = loadConfig({ SIDECAR_TRUST_PROXY: value });
  t.same(trustProxy, value.split(',').map((s) => s.trim()));
  const app = Fastify({ trustProxy });
  app.get('/ip', async (request) => ({ ip: request.ip }));
  t.teardown(() => app.close());
  const res = await app.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-forwarded-for': '203.0.113.9' } });
  t.same(res.json(), { ip: '203.0.113.9' }, 'X-Forwarded-For from a trusted proxy gives the client IP');
});

t.test('the entry point exits 2 naming the variable, before creating its data directory', async (t) => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'trust-proxy-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const dataDir = path.join(scratch, 'data');
  const child = spawn(process.execPath, [SIDECAR_MAIN], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', SIDECAR_TRUST_PROXY: '10.0.0.0/33', SIDECAR_DATA_DIR: dataDir, SIDECAR_PORT: '0' },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { err += c.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000); // hang guard (files run in parallel)
  const code = await new Promise<number | null>((done) => child.on('close', (c) => done(c)));
  clearTimeout(timer);
  t.equal(code, 2, 'exit code 2 (bad configuration)');
  const lines = err.split('\n').filter((l) => l.trim() !== '');
  t.equal(lines.length, 1, `one line on stderr: ${err}`);
  t.match(lines[0] ?? '', /SIDECAR_TRUST_PROXY: "10\.0\.0\.0\/33" has an invalid prefix length \(1 to 32 for IPv4\)/);
  t.equal(out, '', 'nothing on stdout');
  t.notOk(existsSync(dataDir), 'no data directory was created');
});
