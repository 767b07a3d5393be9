/**
 * The receiver adapters over real HTTP on 127.0.0.1, and the whole path:
 * the sidecar's delivery worker → the Node adapter → the app's handler.
 */
import t from 'tap';
import http from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import Fastify from 'fastify';
import { createNodeWebhookHandler, createWebhookReceiver, webhookFastifyPlugin } from '../../receiver/index.js';
import { SqliteDedupStore } from '../../receiver/sqlite.js';
import type { WebhookEvent } from '../../receiver/index.js';
import { WebhookWorker } from '../../sidecar/webhooks/worker.js';
import { addPlatform, enqueue, memoryLogger, openFixture, row } from '../sidecar/webhooks/helpers.js';
import { SECRET, sign, signed, tempDir } from './helpers.js';

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test('node:http adapter', async (t) => {
  const seen: WebhookEvent[] = [];
  const receiver = createWebhookReceiver({ secret: SECRET, dedup: new SqliteDedupStore({ file: join(tempDir(t), 'd.db') }), onEvent: (e) => { seen.push(e); } });
  const server = http.createServer(createNodeWebhookHandler(receiver, { maxBodyBytes: 4096 }));
  const base = await listen(server);
  t.teardown(async () => { await new Promise((r) => server.close(r)); await receiver.close(); });

  const d = signed();
  let res = await request(`${base}/hook`, { method: 'POST', headers: d.headers, body: d.rawBody });
  t.equal(res.statusCode, 204);
  await res.body.dump();
  t.equal(seen.length, 1);

  res = await request(`${base}/hook`, { method: 'POST', headers: { ...d.headers, 'x-service-signature': '0'.repeat(64) }, body: d.rawBody });
  t.equal(res.statusCode, 401);
  t.match(await res.body.json(), { error: { code: 'invalid_signature', status: 401 } });

  res = await request(`${base}/hook`, { method: 'GET' });
  t.equal(res.statusCode, 405);
  t.equal(res.headers['allow'], 'POST');
  await res.body.dump();

  res = await request(`${base}/hook`, { method: 'POST', headers: d.headers, body: Buffer.alloc(5000, 32) });
  t.equal(res.statusCode, 413);
  await res.body.dump();
  t.equal(seen.length, 1);
});

t.test('Fastify plugin: raw bytes inside, other routes keep JSON parsing', async (t) => {
  const seen: WebhookEvent[] = [];
  const receiver = createWebhookReceiver({ secret: SECRET, dedup: new SqliteDedupStore({ file: join(tempDir(t), 'd.db') }), onEvent: (e) => { seen.push(e); } });
  const app = Fastify();
  await app.register(webhookFastifyPlugin(receiver, { path: '/webhooks' }));
  app.post('/echo', async (req) => req.body);
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  t.teardown(async () => { await app.close(); await receiver.close(); });

  // Whitespace a JSON parser would normalise away: the signature covers the exact bytes.
  const d = signed();
  const spaced = Buffer.from(d.rawBody.toString().replace('{', '{ \n'));
  const headers = { ...d.headers, 'x-service-signature': sign(SECRET, d.headers['x-service-timestamp']!, spaced) };
  let res = await request(`${base}/webhooks`, { method: 'POST', headers, body: spaced });
  t.equal(res.statusCode, 204);
  await res.body.dump();
  t.equal(seen.length, 1);
  res = await request(`${base}/webhooks`, { method: 'POST', headers: { ...headers, 'x-service-timestamp': '1' }, body: spaced });
  t.equal(res.statusCode, 401);
  await res.body.dump();
  res = await request(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
  t.same(await res.body.json(), { x: 1 });
});

t.test('end to end: the worker delivers to the receiver helper, which verifies, stores once and answers 204', async (t) => {
  const f = openFixture();
  const seen: WebhookEvent[] = [];
  let failNext = true;
  const receiver = createWebhookReceiver({
    secret: SECRET,
    dedup: new SqliteDedupStore({ file: join(f.dir, 'receiver.db') }),
    onEvent: (e) => {
      if (failNext) { failNext = false; throw new Error('local store down'); }
      seen.push(e);
    },
  });
  const server = http.createServer(createNodeWebhookHandler(receiver));
  const base = await listen(server);
  const now = { t: Date.now() };
  const worker = new WebhookWorker({ store: f.outbox, platforms: undefined, box: f.box, clock: () => now.t, allowInsecure: true, logger: memoryLogger(), random: () => 0.5 });
  t.teardown(async () => { await worker.stop(); await new Promise((r) => server.close(r)); await receiver.close(); f.close(); });

  const pid = addPlatform(f, `${base}/hook`, SECRET);
  const ev = enqueue(f, pid, now.t, { reason: 'end-to-end' });
  t.same((await worker.tick()).map((o) => [o.result, o.status]), [['failed', 500]], 'the handler failure makes the service retry');
  now.t = row(f, ev.id).next_attempt_at;
  t.same((await worker.tick()).map((o) => [o.result, o.status]), [['delivered', 204]]);
  t.equal(seen.length, 1);
  t.match(seen[0], { event: 'delegation.revoked', delivery_id: ev.id, reason: 'end-to-end' });
  // A manual redelivery of the same id is acknowledged but not processed again.
  await f.outbox.redeliver(ev.id, now.t);
  t.same((await worker.tick()).map((o) => [o.result, o.status]), [['delivered', 204]]);
  t.equal(seen.length, 1);
});
