/** examples/webhook-receiver.ts runs: it accepts a signed delivery once, refuses a bad one, prints without secrets. */
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { sign, tempDir } from './helpers.js';

const EXAMPLE = fileURLToPath(new URL('../../examples/webhook-receiver.ts', import.meta.url));

t.test('the example receiver', async (t) => {
  const secret = 'whsec_example_test';
  const child = spawn(process.execPath, ['--import=tsx', EXAMPLE], {
    env: { ...process.env, WEBHOOK_SECRET: secret, PORT: '0', HOST: '127.0.0.1', DEDUP_FILE: join(tempDir(t), 'd.db') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL'); });

  let port: number | undefined;
  // A start-up wait (a tsx child, slow while other test files run): up to 60 s.
  for (let i = 0; i < 1200 && port === undefined && child.exitCode === null; i++) {
    port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1]) || undefined;
    if (port === undefined) await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(port, `started (${out.trim().slice(0, 200)})`);
  if (!port) return;

  const id = randomUUID();
  const body = Buffer.from(JSON.stringify({
    event: 'connection.created', delivery_id: id, occurred_at: new Date().toISOString(), connection_id: 'c1', platform_id: 'p1',
    org_id: 'o1', org_name: 'Org', allowed_scopes: ['data:read'], callback_url: null, api_key: 'sk_live_TOPSECRET', webhook_signing_secret: 'whsec_TOPSECRET',
  }));
  const ts = String(Math.floor(Date.now() / 1000));
  const headers = { 'content-type': 'application/json', 'x-service-timestamp': ts, 'x-service-delivery-id': id, 'x-service-signature': sign(secret, ts, body) };
  const post = async (h: Record<string, string>) => {
    const res = await request(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers: h, body });
    await res.body.dump();
    return res.statusCode;
  };
  t.equal(await post(headers), 204);
  t.equal(await post(headers), 204, 'duplicate acknowledged');
  t.equal(await post({ ...headers, 'x-service-signature': sign('wrong', ts, body) }), 401);
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exits cleanly on SIGTERM');
  t.equal(out.split(`connection.created delivery=${id}`).length - 1, 1, 'printed once');
  t.notMatch(out, /TOPSECRET/, 'secrets are redacted');
});
