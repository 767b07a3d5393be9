/**
 * One attempt of the delivery worker over HTTP (`sidecar/webhooks/deliver.ts`),
 * against a real receiver on 127.0.0.1 and a real SQLite outbox in a temp dir:
 * the signed request (headers, exact body, signature by the spec formula),
 * and how each answer is classified — retries with fresh timestamps, a
 * timeout, a redirect that is not followed, 410 disabling the callback, and
 * `Retry-After`. Time is an injected clock; `tick()` is driven by hand.
 */
import t from 'tap';
import { RETRY_SCHEDULE_MS } from '../../../sidecar/webhooks/schedule.js';
import { addPlatform, enqueue, row, startReceiver } from './helpers.js';
import { expectedSignature } from './fixtures/hooks.js';
import { SECRET, T0, setup } from './fixtures/worker.js';

t.test('one delivery: headers, exact body, signature by the spec formula', async (t) => {
  const { f, rx, worker, logger } = await setup(t);
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);
  const out = await worker.tick();
  t.same(out.map((o) => o.result), ['delivered']);
  t.equal(rx.requests.length, 1);
  const req = rx.requests[0]!;
  t.equal(req.method, 'POST');
  t.equal(req.url, '/hook');
  t.equal(req.headers['content-type'], 'application/json');
  t.equal(req.headers['user-agent'], 'agent-authz-webhooks/1');
  t.equal(req.headers['x-service-delivery-id'], ev.id);
  t.equal(req.headers['x-service-timestamp'], String(Math.floor(T0 / 1000)));
  t.ok(req.body.equals(ev.body), 'the plaintext body bytes are sent exactly');
  const sig = req.headers['x-service-signature'];
  t.match(sig, /^[0-9a-f]{64}$/, 'lowercase hex');
  t.equal(sig, expectedSignature(SECRET, String(Math.floor(T0 / 1000)), ev.body));
  t.equal(JSON.parse(req.body.toString()).delivery_id, req.headers['x-service-delivery-id'], 'body delivery_id = header');
  const r = row(f, ev.id);
  t.equal(r.state, 'delivered');
  t.equal(r.attempts, 1);
  t.equal(r.lease_until, null);
  t.equal(f.db.get<{ d: number }>('SELECT delivered_at AS d FROM outbox WHERE id = ?', ev.id)!.d, T0);
  const attempts = await f.outbox.listAttempts(ev.id);
  t.same(attempts.map((a) => [a.attempt, a.status, a.error]), [[1, 204, null]]);
  t.notMatch(JSON.stringify(logger.lines), SECRET, 'the secret is never logged');
  t.equal(await worker.tick().then((o) => o.length), 0, 'nothing left');
});

t.test('500, 500, then 204: same id and body, fresh timestamp and signature each time', async (t) => {
  const { f, rx, now, worker } = await setup(t);
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);
  rx.script.push({ status: 500 }, { status: 500 });

  t.same((await worker.tick()).map((o) => o.result), ['failed']);
  let r = row(f, ev.id);
  t.equal(r.state, 'pending');
  t.equal(r.next_attempt_at, now.t + 5_000, 'attempt 2 five seconds after the failure (jitter source fixed at 0)');
  t.equal((await worker.tick()).length, 0, 'not due yet');
  now.t = r.next_attempt_at;

  t.same((await worker.tick()).map((o) => o.result), ['failed']);
  r = row(f, ev.id);
  t.equal(r.next_attempt_at, now.t + 5 * 60_000, 'attempt 3 five minutes later');
  now.t = r.next_attempt_at;

  t.same((await worker.tick()).map((o) => o.result), ['delivered']);
  t.equal(rx.requests.length, 3);
  const ids = new Set(rx.requests.map((q) => q.headers['x-service-delivery-id']));
  t.same([...ids], [ev.id], 'one delivery id on every attempt');
  t.ok(rx.requests.every((q) => q.body.equals(ev.body)), 'the same body on every attempt');
  const stamps = rx.requests.map((q) => q.headers['x-service-timestamp'] as string);
  t.equal(new Set(stamps).size, 3, 'a fresh timestamp on every attempt');
  t.equal(new Set(rx.requests.map((q) => q.headers['x-service-signature'])).size, 3, 'a fresh signature on every attempt');
  for (const q of rx.requests) {
    t.equal(q.headers['x-service-signature'], expectedSignature(SECRET, q.headers['x-service-timestamp'] as string, q.body));
  }
  r = row(f, ev.id);
  t.equal(r.state, 'delivered');
  t.equal(r.attempts, 3);
  t.same((await f.outbox.listAttempts(ev.id)).map((a) => a.status), [500, 500, 204]);
});

t.test('a receiver that does not answer in time: failure, then retried', async (t) => {
  const { f, rx, now, worker } = await setup(t, { timeoutMs: 300 });
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);
  rx.script.push({ hang: true });
  const started = Date.now();
  const [o] = await worker.tick();
  t.ok(Date.now() - started < 5_000, 'bounded by the timeout');
  t.equal(o?.result, 'failed');
  t.equal(o?.status, null);
  t.match(o?.error, /timeout/i);
  now.t = row(f, ev.id).next_attempt_at;
  t.same((await worker.tick()).map((x) => x.result), ['delivered']);
  t.equal(rx.requests.length, 2);
  t.equal(row(f, ev.id).state, 'delivered');
});

t.test('301: a failure; the Location is not followed', async (t) => {
  const { f, rx, worker } = await setup(t);
  const other = await startReceiver('/elsewhere');
  t.teardown(() => other.close());
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);
  rx.script.push({ status: 301, headers: { Location: other.url } });
  const [o] = await worker.tick();
  t.equal(o?.result, 'failed');
  t.equal(o?.status, 301);
  t.match(o?.error, /redirect not followed/);
  t.equal(other.connections, 0, 'the redirect target was never contacted');
  t.equal(rx.requests.length, 1);
  const r = row(f, ev.id);
  t.equal(r.state, 'pending');
  t.equal(r.last_status, 301);
});

t.test('410: the delivery is disabled, the platform callback disabled, later events held; a new URL re-enables', async (t) => {
  const results: string[] = [];
  const { f, rx, now, worker } = await setup(t, { onResult: (r) => results.push(r) });
  const pid = addPlatform(f, rx.url, SECRET);
  const first = enqueue(f, pid, T0);
  rx.script.push({ status: 410 });
  t.same((await worker.tick()).map((o) => o.result), ['disabled']);
  t.equal(row(f, first.id).state, 'disabled');
  t.equal(f.db.get<{ d: number | null }>('SELECT callback_disabled_at AS d FROM platforms WHERE id = ?', pid)!.d, T0);

  const second = enqueue(f, pid, T0 + 1);
  now.t += 60 * 60_000;
  t.equal((await worker.tick()).length, 0, 'nothing is attempted while the callback is disabled');
  t.equal(rx.requests.length, 1);
  t.same(row(f, second.id), { ...row(f, second.id), state: 'pending', attempts: 0 }, 'held, no attempt spent');
  t.same(await f.outbox.stats(), { pending: 0, oldestPendingAt: null }, 'held deliveries are not backlog');

  // Re-enable the way PlatformStore.setCallbackUrl does: a new URL clears callback_disabled_at.
  f.db.run('UPDATE platforms SET callback_url = ?, callback_disabled_at = NULL WHERE id = ?', rx.url, pid);
  const out = await worker.tick();
  t.same(out.map((o) => o.result).sort(), ['delivered', 'delivered']);
  t.same(rx.requests.slice(1).map((q) => q.headers['x-service-delivery-id']).sort(), [first.id, second.id].sort(), 'original ids');
  t.equal(row(f, first.id).state, 'delivered');
  t.equal(row(f, first.id).attempts, 2);
  t.same(results, ['disabled', 'delivered', 'delivered']);
});

t.test('410 with a store that needs the platforms hook: disableCallback is called', async (t) => {
  const calls: [string, number][] = [];
  const { f, rx, worker } = await setup(t, { platforms: { disableCallback: async (id, at) => { calls.push([id, at]); } } });
  const pid = addPlatform(f, rx.url, SECRET);
  enqueue(f, pid, T0);
  rx.fallback = { status: 410 };
  await worker.tick();
  t.same(calls, [[pid, T0]]);
});

t.test('Retry-After (seconds, HTTP date, capped) moves the next attempt later, never earlier', async (t) => {
  const { f, rx, now, worker } = await setup(t);
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);

  rx.script.push({ status: 503, headers: { 'Retry-After': '120' } });
  await worker.tick();
  t.equal(row(f, ev.id).next_attempt_at, now.t + 120_000, 'seconds: later than the 5 s schedule');

  now.t = row(f, ev.id).next_attempt_at;
  rx.script.push({ status: 429, headers: { 'Retry-After': new Date(now.t + 3 * 3600_000).toUTCString() } });
  await worker.tick();
  t.equal(row(f, ev.id).next_attempt_at, now.t + 3 * 3600_000, 'HTTP date: later than the 5 min schedule');

  now.t = row(f, ev.id).next_attempt_at;
  rx.script.push({ status: 503, headers: { 'Retry-After': '10' } });
  await worker.tick();
  t.equal(row(f, ev.id).next_attempt_at, now.t + RETRY_SCHEDULE_MS[3]!, 'shorter than the schedule: the schedule wins');

  now.t = row(f, ev.id).next_attempt_at;
  rx.script.push({ status: 503, headers: { 'Retry-After': String(10 * 86_400) } });
  await worker.tick();
  t.equal(row(f, ev.id).next_attempt_at, now.t + 24 * 3600_000, 'capped at 24 h');
  t.equal(row(f, ev.id).attempts, 4);
});
