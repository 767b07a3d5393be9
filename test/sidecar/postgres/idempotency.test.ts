/**
 * The idempotency ledger is exact across gateway replicas and sidecar replicas on PostgreSQL
 * (docs/gateway.md#idempotency): two sidecar processes on one database, two gateways (one in
 * front of each replica) before one counting upstream.
 *
 * - 50 concurrent requests with one key, spread over both gateways, each with its own proof:
 *   exactly one upstream call, one budget debit, one billed verify; the 49 others are replays of
 *   the first answer or 409 `idempotency_in_flight`; a later repeat on either gateway replays;
 * - the same key with another body is 422 on either gateway, and a missing key 400;
 * - a recorded answer is replayed after the replica that recorded it is stopped (the other one,
 *   and a replica started afterwards, read the same ledger).
 */
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { specFlow } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { startPostgres } from '../../helpers/postgres.js';
import { gatewayConfig, proofHeader, send, startGatewayWithKey } from '../../gateway-plugin/helpers.js';
import type { Response, StartedGateway } from '../../gateway-plugin/helpers.js';
import { newReplicaGroup, platformOn, sameSession, startReplica, startReplicas } from './replicas.js';
import type { Replica } from './replicas.js';

t.setTimeout(240_000);

const pgc = await startPostgres(t);
if (pgc) {
  const group = await newReplicaGroup(t, pgc);
  const [A, B] = await startReplicas(t, group, 2) as [Replica, Replica];

  const calls: string[] = [];
  const upstream = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls.push(Buffer.concat(chunks).toString('utf8'));
      const n = calls.length;
      setTimeout(() => {
        res.writeHead(201, { 'content-type': 'application/json', 'x-payment-id': `pay_${n}` });
        res.end(JSON.stringify({ payment_id: `pay_${n}` }));
      }, 200);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  t.teardown(() => new Promise<void>((resolve) => { upstream.closeAllConnections(); upstream.close(() => resolve()); }));

  const f: Flow = await specFlow(A.sc, 'pg-ledger@example.com', {
    approve: ['payments:send'], constraints: { budget: { amount: '1000.00', currency: 'USD', period: 'day' } },
  });
  const routes = [{ method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } }];
  const gateway = (r: Replica): Promise<StartedGateway> => startGatewayWithKey(gatewayConfig(upstreamUrl, r.url, {
    routes, verify_timeout_ms: 30_000, challenge_timeout_ms: 10_000,
  }), f.reg.api_key as string);
  const gwA = await gateway(A);
  const gwB = await gateway(B);
  const gateways = [gwA, gwB];
  t.teardown(async () => { for (const g of gateways) await g.close(); });

  const spent = async (r: Replica): Promise<string> =>
    (await sameSession(f.user, r).get(`/v1/service/delegations/${f.certId}/usage`)).body.budget.spent as string;
  const balance = async (r: Replica): Promise<number> =>
    (await sameSession(f.user, r).get('/v1/service/usage/personal')).body.balance_micros as number;
  /** A proof from replica `r` (challenge and present there). */
  const proofOn = async (r: Replica): Promise<string> => {
    const p = platformOn(r, f.reg.api_key as string);
    const ch = await p.post('/v1/service/challenge');
    const pr = await p.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge });
    if (pr.status !== 200) throw new Error(`present: ${pr.status} ${pr.text}`);
    return proofHeader(pr.body.proof_bundle as Record<string, unknown>);
  };
  const pay = (gw: StartedGateway, key: string | undefined, amount: number, proof: string): Promise<Response> => send(gw.url,
    '/v1/payments', {
      method: 'POST', body: JSON.stringify({ amount, currency: 'USD' }),
      headers: { 'content-type': 'application/json', 'x-service-proof': proof, ...(key === undefined ? {} : { 'idempotency-key': key }) },
    });

  await t.test('50 concurrent requests over two gateways and two replicas: one upstream call, one debit', async (t) => {
    const key = `order-${randomUUID()}`;
    const proofs: string[] = [];
    for (let i = 0; i < 50; i++) proofs.push(await proofOn(i % 2 === 0 ? A : B));
    const [before, budget, credits] = [calls.length, await spent(A), await balance(B)];
    const answers = await Promise.all(proofs.map((proof, i) => pay(gateways[i % 2]!, key, 40, proof)));
    t.equal(calls.length, before + 1, 'exactly one upstream call');
    t.equal(await spent(B), (Number(budget) + 40).toFixed(2), 'the budget is debited once');
    t.equal(credits - await balance(A), 2_000, 'one billed verify');
    const first = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined);
    const replays = answers.filter((a) => a.headers['idempotent-replayed'] === 'true');
    const busy = answers.filter((a) => a.status === 409);
    t.equal(first.length, 1, 'one answer from the upstream');
    t.equal(replays.length + busy.length, 49, `the others: ${replays.length} replays, ${busy.length} in flight`);
    for (const b of busy) t.match(b.json, { error: { code: 'idempotency_in_flight', status: 409 } });
    t.ok(replays.every((r) => r.status === 201 && r.text === first[0]!.text), 'every replay is the first answer');
    for (const [gw, r] of [[gwA, A], [gwB, B]] as const) {
      const later = await pay(gw, key, 40, await proofOn(r));
      t.equal(later.headers['idempotent-replayed'], 'true', 'a later repeat replays');
      t.equal(later.text, first[0]!.text);
      t.equal(later.headers['x-payment-id'], first[0]!.headers['x-payment-id']);
    }
    t.equal(calls.length, before + 1, 'still one upstream call');
    t.equal(await spent(A), (Number(budget) + 40).toFixed(2), 'still one debit');
  });

  await t.test('another body under the key is 422 on either gateway; a missing key is 400', async (t) => {
    const key = `order-${randomUUID()}`;
    t.equal((await pay(gwA, key, 3, await proofOn(A))).status, 201);
    for (const [gw, r] of [[gwA, A], [gwB, B]] as const) {
      const other = await pay(gw, key, 4, await proofOn(r));
      t.equal(other.status, 422);
      t.match(other.json, { error: { code: 'idempotency_key_reused', status: 422 } });
    }
    const missing = await pay(gwB, undefined, 4, await proofOn(B));
    t.match(missing.json, { error: { code: 'idempotency_key_required', status: 400 } });
  });

  await t.test('a recorded answer outlives the replica that recorded it', async (t) => {
    const key = `order-${randomUUID()}`;
    const first = await pay(gwA, key, 5, await proofOn(A));
    t.equal(first.status, 201);
    const before = calls.length;
    t.equal(await A.stop(), 0, 'replica A stopped');
    const again = await pay(gwB, key, 5, await proofOn(B));
    t.equal(again.headers['idempotent-replayed'], 'true', 'replica B replays A\'s record');
    t.equal(again.text, first.text);
    const C = await startReplica(t, group, 'idem-c');
    const gwC = await gateway(C);
    gateways.push(gwC);
    const third = await pay(gwC, key, 5, await proofOn(C));
    t.equal(third.headers['idempotent-replayed'], 'true', 'and so does a replica started afterwards');
    t.equal(calls.length, before, 'not forwarded again');
  });
}
