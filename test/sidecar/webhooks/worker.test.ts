/**
 * The delivery worker against a real HTTP receiver on 127.0.0.1 and a real
 * SQLite outbox in a temp dir. Time is an injected clock; `tick()` is driven
 * by hand, so no test sleeps through the retry schedule.
 */
import t from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebhookWorker } from '../../../sidecar/webhooks/worker.ts';
import type { WebhookWorkerOptions } from '../../../sidecar/webhooks/worker.ts';
import { RETRY_SCHEDULE_MS } from '../../../sidecar/webhooks/schedule.ts';
import { createSecretBox } from '../../../sidecar/secrets.ts';
import { addPlatform, enqueue, memoryLogger, openFixture, row, startReceiver } from './helpers.ts';
import type { Fixture, TestReceiver } from './helpers.ts';

const SECRET = 'whsec_test_9f8e7d6c5b4a';
const T0 = Date.UTC(2030, 0, 1);

/** The spec formula, computed here independently of src/webhooks.ts. */
const expectedSignature = (secret: string, ts: string, body: Buffer): string =>
  createHmac('sha256', Buffer.from(secret, 'utf8')).update(Buffer.concat([Buffer.from(`${ts}.`, 'utf8'), body])).digest('hex');

interface Ctx { f: Fixture; rx: TestReceiver; now: { t: number }; worker: WebhookWorker; logger: ReturnType<typeof memoryLogger> }

async function setup(t: { teardown(fn: () => unknown): void }, opts: Partial<WebhookWorkerOptions> = {}): Promise<Ctx> {
  const f = openFixture();
  const rx = await startReceiver();
  const now = { t: T0 };
  const logger = memoryLogger();
  const worker = new WebhookWorker({
    store: f.outbox, platforms: undefined, box: f.box, clock: () => now.t, allowInsecure: true,
    timeoutMs: 2_000, logger, random: () => 0.5, ...opts,
  });
  t.teardown(async () => {
    await worker.stop();
    await rx.close();
    f.close();
  });
  return { f, rx, now, worker, logger };
}

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

t.test('the whole schedule with an injected clock: 10 attempts, then dead', async (t) => {
  // Jitter source walks through the extremes and the middle.
  const randoms = [0, 0.999999, 0.5, 0.25, 0.75];
  let i = 0;
  const results: string[] = [];
  const { f, rx, now, worker } = await setup(t, { random: () => randoms[i++ % randoms.length]!, onResult: (r) => results.push(r) });
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);
  rx.fallback = { status: 500 };

  const delays: number[] = [];
  for (let attempt = 1; attempt <= 10; attempt++) {
    const out = await worker.tick();
    t.equal(out.length, 1, `attempt ${attempt} made`);
    t.equal(rx.requests.length, attempt);
    const r = row(f, ev.id);
    t.equal(r.attempts, attempt);
    if (attempt < 10) {
      t.equal(r.state, 'pending');
      const delay = r.next_attempt_at - now.t;
      const base = RETRY_SCHEDULE_MS[attempt]!;
      t.ok(delay >= Math.floor(base * 0.9) && delay <= Math.ceil(base * 1.1), `delay after attempt ${attempt} is ${base} ms ±10% (got ${delay})`);
      delays.push(delay);
      now.t = r.next_attempt_at - 1;
      t.equal((await worker.tick()).length, 0, 'not due one millisecond early');
      now.t += 1;
    } else {
      t.equal(r.state, 'dead');
    }
  }
  t.equal(delays.length, 9);
  t.ok(delays[0]! < delays[8]!, 'backoff grows');
  now.t += 365 * 86_400_000;
  t.equal((await worker.tick()).length, 0, 'a dead delivery is never attempted again');
  t.equal(rx.requests.length, 10);
  t.same(results, [...Array<string>(9).fill('failed'), 'dead']);
  t.equal(new Set(rx.requests.map((q) => q.headers['x-service-delivery-id'])).size, 1);

  // A manual redelivery gives a dead delivery one more attempt with the same id and body.
  await f.outbox.redeliver(ev.id, now.t);
  rx.fallback = { status: 204 };
  t.same((await worker.tick()).map((o) => o.result), ['delivered']);
  t.ok(rx.requests[10]!.body.equals(ev.body));
  t.equal(row(f, ev.id).attempts, 11);
});

t.test('a crashed worker: the lease runs out and the delivery goes out with its original id', async (t) => {
  const { f, rx, now, worker } = await setup(t);
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, T0);
  // A previous process claimed it and died before recording anything.
  const claimed = await f.outbox.claimDue(now.t, 10, 60_000);
  t.same(claimed.map((c) => c.id), [ev.id]);
  t.equal((await worker.tick()).length, 0, 'leased: not claimed again');
  now.t += 60_000;
  t.same((await worker.tick()).map((o) => o.result), ['delivered']);
  t.equal(rx.requests[0]!.headers['x-service-delivery-id'], ev.id);
  t.ok(rx.requests[0]!.body.equals(ev.body));
});

t.test('no callback URL: held without spending attempts, delivered once a URL is set', async (t) => {
  const { f, rx, now, worker } = await setup(t);
  const pid = addPlatform(f, null, SECRET);
  const ev = enqueue(f, pid, T0);
  now.t += 86_400_000;
  t.equal((await worker.tick()).length, 0);
  t.equal(row(f, ev.id).attempts, 0);
  f.db.run('UPDATE platforms SET callback_url = ? WHERE id = ?', rx.url, pid);
  t.same((await worker.tick()).map((o) => o.result), ['delivered']);
  t.equal(rx.requests[0]!.headers['x-service-delivery-id'], ev.id);
});

t.test('a body that cannot be opened (other master key): no attempt spent, lease kept, error logged', async (t) => {
  const f0 = await setup(t);
  const pid = addPlatform(f0.f, f0.rx.url, SECRET);
  const ev = enqueue(f0.f, pid, T0);
  const logger = memoryLogger();
  const wrong = new WebhookWorker({
    store: f0.f.outbox, platforms: undefined, box: createSecretBox(randomBytes(32)), clock: () => f0.now.t,
    allowInsecure: true, logger, leaseMs: 30_000,
  });
  t.teardown(() => wrong.stop());
  const [o] = await wrong.tick();
  t.equal(o?.result, 'skipped');
  t.equal(f0.rx.connections, 0);
  const r = row(f0.f, ev.id);
  t.equal(r.attempts, 0);
  t.equal(r.lease_until, T0 + 30_000);
  t.ok(logger.lines.some((l) => l.level === 'error'));
  // The right key, after the lease: delivered.
  f0.now.t += 30_000;
  t.same((await f0.worker.tick()).map((x) => x.result), ['delivered']);
});

t.test('start() and nudge(): a new event goes out without waiting for the poll interval', async (t) => {
  const { f, rx, worker } = await setup(t, { clock: Date.now, pollIntervalMs: 60_000 });
  const pid = addPlatform(f, rx.url, SECRET);
  worker.start();
  await sleep(50);
  const ev = enqueue(f, pid, Date.now());
  worker.nudge();
  for (let i = 0; i < 100 && row(f, ev.id).state !== 'delivered'; i++) await sleep(20);
  t.equal(row(f, ev.id).state, 'delivered');
  t.equal(rx.requests.length, 1);
  await worker.stop();
});

t.test('stop() with a delivery in flight: aborted after the grace period, lease released, no attempt recorded', async (t) => {
  const { f, rx, worker } = await setup(t, { clock: Date.now, timeoutMs: 10_000, stopGraceMs: 100, pollIntervalMs: 20 });
  const pid = addPlatform(f, rx.url, SECRET);
  const ev = enqueue(f, pid, Date.now());
  rx.script.push({ hang: true });
  worker.start();
  for (let i = 0; i < 150 && rx.requests.length === 0; i++) await sleep(20);
  t.equal(rx.requests.length, 1, 'the request is in flight');
  const started = Date.now();
  await worker.stop();
  t.ok(Date.now() - started < 3_000, 'stop is bounded');
  const r = row(f, ev.id);
  t.equal(r.state, 'pending');
  t.equal(r.attempts, 0);
  t.equal(r.lease_until, null, 'lease released: due again at once after a restart');
  t.same(await f.outbox.listAttempts(ev.id), []);
  t.throws(() => worker.start(), 'a stopped worker stays stopped');
  await t.rejects(worker.tick());
  // "Restart": a new worker sends it with the same id.
  const again = new WebhookWorker({ store: f.outbox, platforms: undefined, box: f.box, allowInsecure: true, logger: memoryLogger() });
  t.teardown(() => again.stop());
  t.same((await again.tick()).map((o) => o.result), ['delivered']);
  t.equal(rx.requests[1]!.headers['x-service-delivery-id'], ev.id);
});

t.test('concurrency: several deliveries in one tick, each exactly once', async (t) => {
  const { f, rx, worker } = await setup(t, { concurrency: 3 });
  const pid = addPlatform(f, rx.url, SECRET);
  const ids = Array.from({ length: 7 }, (_, k) => enqueue(f, pid, T0 - 7 + k).id);
  let total = 0;
  for (let i = 0; i < 5 && total < 7; i++) total += (await worker.tick()).length;
  t.equal(total, 7);
  t.same(rx.requests.map((q) => q.headers['x-service-delivery-id']).sort(), [...ids].sort());
});

t.test('options are checked', async (t) => {
  const f = openFixture();
  t.teardown(() => f.close());
  const base = { store: f.outbox, platforms: undefined, box: f.box, allowInsecure: false, logger: memoryLogger() };
  t.throws(() => new WebhookWorker({ ...base, timeoutMs: 10_000, leaseMs: 5_000 }), TypeError);
  t.throws(() => new WebhookWorker({ ...base, concurrency: 0 }), TypeError);
});
