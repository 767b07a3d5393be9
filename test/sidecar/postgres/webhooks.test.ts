/**
 * Webhooks with several replicas on one PostgreSQL database (replica
 * processes from fixtures/replica.mjs: the sidecar with a 20 s lease and an
 * 18 s send timeout, so that a lease runs out within the test):
 *
 * 1. Three replicas drain one outbox: every event arrives exactly once, with
 *    one recorded attempt, and the replicas' delivered counters sum to the
 *    number of events (each attempt claimed by one replica).
 * 2. A replica holds a delivery in flight; a replica that starts meanwhile
 *    does not take it (no lease release at start); the holder is killed
 *    with SIGKILL; after the lease ran out, another replica delivers the same
 *    delivery id with the same bytes.
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { specFlow } from '../../helpers/sidecar.js';
import { startHookReceiver } from '../webhooks/fixtures/hooks.js';
import { newReplicaGroup, sameSession, startReplica } from './replicas.js';
import type { Replica } from './replicas.js';

// The send timeout outlasts a replica's start on a busy machine (a CI run saw more than 9 s), so
// the starting replica meets a live lease; the lease is as short as that allows.
const LEASE_MS = 20_000;
const SEND_TIMEOUT_MS = LEASE_MS - 2_000;
const ENTRY = 'test/sidecar/postgres/fixtures/replica.mjs';
const ENV = { AUTHZ_TEST_WEBHOOK_LEASE_MS: String(LEASE_MS), AUTHZ_TEST_WEBHOOK_TIMEOUT_MS: String(SEND_TIMEOUT_MS), AUTHZ_TEST_WEBHOOK_POLL_MS: '200' };

t.setTimeout(180_000);
const pg = await startPostgres(t);
if (pg) {
  const g = await newReplicaGroup(t, pg);
  const rx = await startHookReceiver();
  t.teardown(() => rx.close());
  const db = g.dbUrl.split('/').pop()!;
  const start = (name: string): Promise<Replica> => startReplica(t, g, name, { entry: ENTRY, env: ENV });
  const ids = (): string[] => rx.hits.map((h) => String(h.headers['x-service-delivery-id']));
  const until = async (what: string, ok: () => boolean | Promise<boolean>, ms: number): Promise<void> => {
    const deadline = Date.now() + ms;
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const [A, B, C] = await Promise.all([start('A'), start('B'), start('C')]);
  const f = await specFlow(A.sc, 'hooks@example.com', { callbackUrl: rx.url });

  await t.test('three replicas: every event exactly once, one attempt each', async (t) => {
    for (let i = 0; i < 12; i++) {
      const on = [A, B, C][i % 3]!;
      const user = sameSession(f.user, on);
      const sr = await user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id });
      t.equal((await user.post(`/v1/service/delegations/requests/${sr.body.request_id}/deny`)).status, 200);
    }
    const want = (await pg.admin<{ id: string }>('SELECT id FROM outbox', [], db)).map((r) => r.id).sort();
    t.ok(want.length >= 14, `${want.length} events in the outbox`);
    await until('every event delivered', async () => (await pg.admin<{ n: number }>("SELECT COUNT(*)::int AS n FROM outbox WHERE state <> 'delivered'", [], db))[0]!.n === 0, 30_000);
    t.same([...new Set(ids())].sort(), want, 'every event arrived');
    t.equal(ids().length, want.length, 'none twice');
    const multi = await pg.admin('SELECT delivery_id FROM delivery_attempts GROUP BY delivery_id HAVING COUNT(*) > 1', [], db);
    t.same(multi, [], 'one recorded attempt per delivery');
    const delivered = await Promise.all([A, B, C].map((r) => r.metric('agent_authz_webhook_deliveries_total', 'agent_authz_webhook_deliveries_total', { result: 'delivered' })));
    t.equal(delivered.reduce((a, b) => a! + (b ?? 0), 0), want.length, `the replicas' attempts sum to the events (${delivered.join(' + ')})`);
  });

  await t.test('a killed replica\'s delivery goes out from another after the lease; a starting one never takes it early', async (t) => {
    t.equal(await B.stop(), 0, 'B stopped');
    t.equal(await C.stop(), 0, 'C stopped');
    rx.holdNext = 1;
    const before = rx.hits.length;
    const sr = await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id });
    t.equal((await f.user.post(`/v1/service/delegations/requests/${sr.body.request_id}/deny`)).status, 200, 'an event on A');
    await until('A sends it (held open by the receiver)', () => rx.hits.length > before, 10_000);
    const held = rx.hits[before]!;
    t.equal(held.answer, 'held');
    const id = String(held.headers['x-service-delivery-id']);
    const D = await start('D');
    await new Promise((r) => setTimeout(r, 1_000));
    const inFlight = Date.now() - held.receivedAt < SEND_TIMEOUT_MS;
    t.ok(inFlight, `A's send is still in flight ${Date.now() - held.receivedAt} ms after it began`);
    t.equal(ids().filter((x) => x === id).length, 1, 'D started while A holds the lease: it did not take the delivery');
    await A.kill9();
    await until('another replica delivers it', () => rx.answered().some((h) => h.headers['x-service-delivery-id'] === id), LEASE_MS + 15_000);
    const again = rx.answered().find((h) => h.headers['x-service-delivery-id'] === id)!;
    t.ok(again.receivedAt - held.receivedAt >= LEASE_MS - 500, `delivered ${again.receivedAt - held.receivedAt} ms after the first send (lease ${LEASE_MS} ms)`);
    t.ok(again.raw.equals(held.raw), 'the same bytes');
    t.equal(ids().filter((x) => x === id).length, 2, 'sent twice in all: at least once, and the same delivery id');
    t.equal(D.proc.exitCode, null, 'D is running');
  });
}
