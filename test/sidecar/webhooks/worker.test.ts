/**
 * The delivery worker's scheduling and lifecycle (`sidecar/webhooks/worker.ts`)
 * against a real HTTP receiver on 127.0.0.1 and a real SQLite outbox in a temp
 * dir: the whole retry schedule up to `dead`, leases after a crash, held and
 * unopenable deliveries, start / nudge / stop, concurrency and option checks.
 * Time is an injected clock where it can be; `tick()` is driven by hand, so no
 * test sleeps through the retry schedule.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebhookWorker } from '../../../sidecar/webhooks/worker.js';
import { RETRY_SCHEDULE_MS } from '../../../sidecar/webhooks/schedule.js';
import { createSecretBox } from '../../../sidecar/secrets.js';
import { addPlatform, enqueue, memoryLogger, openFixture, row } from './helpers.js';
import { SECRET, T0, setup } from './fixtures/worker.js';

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
