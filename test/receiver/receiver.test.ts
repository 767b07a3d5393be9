/** The receiver core: signature, freshness, id checks, dedup, failure ordering. */
import t from 'tap';
import { join } from 'node:path';
import { createWebhookReceiver, MemoryDedupStore } from '../../receiver/index.js';
import { SqliteDedupStore } from '../../receiver/sqlite.js';
import type { WebhookEvent, WebhookReceiverOptions } from '../../receiver/index.js';
import { SECRET, sign, signed, tempDir } from './helpers.js';

function make(t: { teardown(fn: () => unknown): void }, opts: Partial<WebhookReceiverOptions> = {}) {
  const seen: WebhookEvent[] = [];
  const receiver = createWebhookReceiver({
    secret: SECRET,
    dedup: new SqliteDedupStore({ file: join(tempDir(t), 'dedup.db') }),
    onEvent: (e) => { seen.push(e); },
    ...opts,
  });
  t.teardown(() => receiver.close());
  return { receiver, seen };
}

t.test('a valid delivery: 204 after the handler ran; the duplicate: 204 without running it again', async (t) => {
  const { receiver, seen } = make(t);
  const d = signed();
  t.same(await receiver.handleWebhook(d), { status: 204 });
  t.equal(seen.length, 1);
  t.equal(seen[0]!.event, 'delegation.revoked');
  t.equal(seen[0]!.delivery_id, d.id);
  // The retry: same id and body, fresh timestamp and signature.
  const retry = signed({ id: d.id, nowMs: Date.now() + 5_000, event: JSON.parse(d.rawBody.toString()) });
  t.same(await receiver.handleWebhook(retry), { status: 204 });
  t.equal(seen.length, 1, 'not processed twice');
});

t.test('401: tampered body, wrong secret, missing or malformed signature', async (t) => {
  const { receiver, seen } = make(t);
  const d = signed();
  const tampered = Buffer.from(d.rawBody.toString().replace('"reason":"test"', '"reason":"evil"'));
  t.match(await receiver.handleWebhook({ rawBody: tampered, headers: d.headers }), { status: 401, body: { error: { code: 'invalid_signature', status: 401 } } });
  t.match(await receiver.handleWebhook(signed({ secret: 'not-the-secret' })), { status: 401, body: { error: { code: 'invalid_signature' } } });
  const { 'x-service-signature': _s, ...noSig } = d.headers;
  t.match(await receiver.handleWebhook({ rawBody: d.rawBody, headers: noSig }), { status: 401 });
  const { 'x-service-timestamp': _ts, ...noTs } = d.headers;
  t.match(await receiver.handleWebhook({ rawBody: d.rawBody, headers: noTs }), { status: 401 });
  t.match(await receiver.handleWebhook({ rawBody: d.rawBody, headers: { ...d.headers, 'x-service-signature': 'nothex' } }), { status: 401 });
  t.match(await receiver.handleWebhook({ rawBody: d.rawBody, headers: { ...d.headers, 'x-service-signature': [d.headers['x-service-signature']!, d.headers['x-service-signature']!] as unknown as string } }),
    { status: 401 }, 'a repeated signature header is refused');
  t.equal(seen.length, 0);
});

t.test('401: stale and future timestamps (5 minutes or more either way); just inside is accepted', async (t) => {
  const now = Date.UTC(2030, 5, 1);
  const { receiver, seen } = make(t, { clock: () => now });
  t.match(await receiver.handleWebhook(signed({ nowMs: now - 300_000 })), { status: 401, body: { error: { code: 'stale_timestamp' } } });
  t.match(await receiver.handleWebhook(signed({ nowMs: now + 300_000 })), { status: 401, body: { error: { code: 'stale_timestamp' } } });
  t.match(await receiver.handleWebhook(signed({ nowMs: now - 86_400_000 })), { status: 401 });
  t.equal(seen.length, 0);
  t.same(await receiver.handleWebhook(signed({ nowMs: now - 299_000 })), { status: 204 });
  t.same(await receiver.handleWebhook(signed({ nowMs: now + 299_000 })), { status: 204 });
  t.equal(seen.length, 2);
});

t.test('400: header and body delivery ids must match; body must be an event', async (t) => {
  const { receiver, seen } = make(t);
  t.match(await receiver.handleWebhook(signed({ headerId: 'another-id' })), { status: 400, body: { error: { code: 'delivery_id_mismatch' } } });
  const d = signed();
  const { 'x-service-delivery-id': _id, ...noId } = d.headers;
  t.match(await receiver.handleWebhook({ rawBody: d.rawBody, headers: noId }), { status: 400, body: { error: { code: 'delivery_id_mismatch' } } });
  for (const raw of ['not json', '[]', 'null', '"s"', '{"event":"delegation.revoked"}', '{"delivery_id":"x"}', '{"event":1,"delivery_id":"x"}']) {
    const body = Buffer.from(raw);
    const ts = String(Math.floor(Date.now() / 1000));
    const r = await receiver.handleWebhook({ rawBody: body, headers: { 'x-service-signature': sign(SECRET, ts, body), 'x-service-timestamp': ts, 'x-service-delivery-id': 'x' } });
    t.match(r, { status: 400, body: { error: { code: 'invalid_payload' } } }, `invalid payload: ${raw}`);
  }
  t.equal(seen.length, 0);
});

t.test('dedup store failure → 503 and the handler is not run; handler failure → 500, then the retry is processed', async (t) => {
  const dir = tempDir(t);
  const broken = new SqliteDedupStore({ file: join(dir, 'broken.db') });
  broken.close(); // every query now throws: a real store failure
  const errors: string[] = [];
  const a = make(t, { dedup: broken, onError: (_e, c) => errors.push(c.stage) });
  t.match(await a.receiver.handleWebhook(signed()), { status: 503, body: { error: { code: 'dedup_unavailable' } } });
  t.equal(a.seen.length, 0);
  t.same(errors, ['dedup']);

  let calls = 0;
  const processed: string[] = [];
  const b = make(t, {
    onEvent: (e) => {
      calls++;
      if (calls === 1) throw new Error('disk full');
      processed.push(e.delivery_id);
    },
  });
  const d = signed();
  t.match(await b.receiver.handleWebhook(d), { status: 500, body: { error: { code: 'handler_failed', status: 500 } } });
  const retry = signed({ id: d.id, event: JSON.parse(d.rawBody.toString()) });
  t.same(await b.receiver.handleWebhook(retry), { status: 204 }, 'the retry is processed (the id was not recorded)');
  t.same(processed, [d.id]);
  t.same(await b.receiver.handleWebhook(retry), { status: 204 });
  t.equal(calls, 2, 'then a duplicate');
});

t.test('a concurrent retry of a delivery in progress gets 503', async (t) => {
  let release!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  const { receiver } = make(t, { dedup: new MemoryDedupStore(), onEvent: () => gate });
  const d = signed();
  const first = receiver.handleWebhook(d);
  await new Promise((r) => setImmediate(r));
  t.match(await receiver.handleWebhook(d), { status: 503, headers: { 'Retry-After': '5' }, body: { error: { code: 'delivery_in_progress' } } });
  release();
  t.same(await first, { status: 204 });
  t.same(await receiver.handleWebhook(d), { status: 204 });
});

t.test('the SQLite dedup store persists across restarts', async (t) => {
  const file = join(tempDir(t), 'persist.db');
  const seen: string[] = [];
  const d = signed();
  const r1 = createWebhookReceiver({ secret: SECRET, dedup: new SqliteDedupStore({ file }), onEvent: (e) => { seen.push(e.delivery_id); } });
  t.same(await r1.handleWebhook(d), { status: 204 });
  await r1.close();
  const r2 = createWebhookReceiver({ secret: SECRET, dedup: new SqliteDedupStore({ file }), onEvent: (e) => { seen.push(e.delivery_id); } });
  t.teardown(() => r2.close());
  t.same(await r2.handleWebhook(signed({ id: d.id, event: JSON.parse(d.rawBody.toString()) })), { status: 204 });
  t.same(seen, [d.id]);

  const store = new SqliteDedupStore({ file: join(tempDir(t), 'purge.db'), retentionDays: 1 });
  t.teardown(() => store.close());
  store.add('old', 1_000);
  store.add('new', 3 * 86_400_000);
  store.add('new', 4 * 86_400_000);
  t.equal(store.purge(2 * 86_400_000), 1);
  t.notOk(store.has('old'));
  t.ok(store.has('new'));
});

t.test('secret rotation, Fetch Headers, string bodies, unknown events', async (t) => {
  const unknown: string[] = [];
  const { receiver, seen } = make(t, { secret: ['whsec_new', SECRET], onUnknownEvent: (b) => { unknown.push(String(b['event'])); } });
  const d = signed();
  t.same(await receiver.handleWebhook({ rawBody: d.rawBody.toString(), headers: new Headers(d.headers) }), { status: 204 });
  t.same(await receiver.handleWebhook(signed({ secret: 'whsec_new' })), { status: 204 });
  const id = 'f0e1d2c3-0000-4000-8000-000000000000';
  t.same(await receiver.handleWebhook(signed({ id, event: { event: 'connection.paused', delivery_id: id, occurred_at: '2030-01-01T00:00:00Z' } })), { status: 204 });
  t.equal(seen.length, 2);
  t.same(unknown, ['connection.paused']);
  t.throws(() => createWebhookReceiver({ secret: '', onEvent: () => undefined, dedup: new MemoryDedupStore() }), TypeError);
});

t.test('MemoryDedupStore is bounded', async (t) => {
  const m = new MemoryDedupStore(2);
  m.add('a', 1);
  m.add('b', 2);
  m.add('c', 3);
  t.notOk(m.has('a'));
  t.ok(m.has('b') && m.has('c'));
});
