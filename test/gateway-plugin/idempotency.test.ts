/**
 * The idempotency ledger through the real gateway (standalone, real HTTP on 127.0.0.1) in front
 * of a counting upstream and the real sidecar on SQLite (docs/gateway.md#idempotency):
 *
 * - 50 concurrent requests with one key, each with its own proof: exactly one upstream call, one
 *   budget debit and one billed verify; the 49 others are replays identical to the first answer
 *   (`Idempotent-Replayed: true`) or 409 `idempotency_in_flight`; a later repeat is a replay;
 * - the same key with another body is 422 `idempotency_key_reused`; a missing, doubled or bad key
 *   is 400 `idempotency_key_required` before verify (the proof stays unspent);
 * - a repeat still needs a proof of live authority: without one 401, with a revoked certificate 403;
 * - an upstream that does not answer releases the claim (the retry with the same key goes through);
 * - a recorded answer is replayed by a new sidecar on the same database file (a restart, same port).
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import { buildServer } from '../../sidecar/server.js';
import type { SidecarServer } from '../../sidecar/server.js';
import { present, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, proofHeader, send, startGatewayWithKey } from './helpers.js';
import type { Response, StartedGateway } from './helpers.js';

t.setTimeout(120_000);

/** An upstream that counts calls, answers 201 with a per-call id after `delayMs`, and a header of its own. */
async function countingUpstream(delayMs: number): Promise<{ url: string; calls: string[]; close(): Promise<void> }> {
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls.push(Buffer.concat(chunks).toString('utf8'));
      const n = calls.length;
      setTimeout(() => {
        const text = JSON.stringify({ payment_id: `pay_${n}`, received: JSON.parse(calls[n - 1]!) as unknown });
        res.writeHead(201, { 'content-type': 'application/json', 'x-payment-id': `pay_${n}`, 'set-cookie': ['a=1', 'b=2'] });
        res.end(text);
      }, delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`, calls,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const sc = await startSidecar();
sc.clock.t = Date.now();
/** The sidecar of the restart test, on the first one's port and database. */
let restarted: SidecarServer | undefined;
const ticker = setInterval(() => { sc.clock.t = Math.max(sc.clock.t, Date.now()); }, 20);
ticker.unref();
const up = await countingUpstream(150);
const f: Flow = await specFlow(sc, 'ledger@example.com', {
  approve: ['payments:send'], constraints: { budget: { amount: '1000.00', currency: 'USD', period: 'day' } },
});
const ROUTES = [{ method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } }];
const config = (upstream: string, sidecar: string): Record<string, unknown> =>
  gatewayConfig(upstream, sidecar, { routes: ROUTES, verify_timeout_ms: 20_000, challenge_timeout_ms: 5_000 });
const gw: StartedGateway = await startGatewayWithKey(config(up.url, sc.url), f.reg.api_key as string);
t.teardown(async () => {
  clearInterval(ticker);
  await gw.close();
  await up.close();
  if (restarted === undefined) await sc.close();
  else {
    // sc.close() closes the first process; the restarted one is closed here.
    await restarted.close();
    await sc.mail.close();
    fs.rmSync(sc.dataDir, { recursive: true, force: true });
  }
});

const spent = async (flow: Flow = f): Promise<string> =>
  (await flow.user.get(`/v1/service/delegations/${flow.certId}/usage`)).body.budget.spent as string;
const balance = async (): Promise<number> => (await f.user.get('/v1/service/usage/personal')).body.balance_micros as number;

/** POST /v1/payments with a fresh proof (or `proof`), `key` (undefined: none) and `amount`. */
async function pay(key: string | string[] | undefined, amount: number, o: { proof?: string | null; base?: string } = {}):
  Promise<Response> {
  const proof = o.proof === undefined ? proofHeader(await present(f)) : o.proof;
  const headers: Record<string, string | string[]> = { 'content-type': 'application/json' };
  if (proof !== null) headers['x-service-proof'] = proof;
  if (key !== undefined) headers['idempotency-key'] = key;
  return send(o.base ?? gw.url, '/v1/payments', { method: 'POST', headers, body: JSON.stringify({ amount, currency: 'USD' }) });
}

t.test('50 concurrent requests with one key: one upstream call, one debit, 49 replays or 409s', async (t) => {
  const key = `order-${randomUUID()}`;
  const proofs = [];
  for (let i = 0; i < 50; i++) proofs.push(proofHeader(await present(f)));
  const [calls, budget, credits] = [up.calls.length, await spent(), await balance()];
  const answers = await Promise.all(proofs.map((proof) => pay(key, 25, { proof })));
  t.equal(up.calls.length, calls + 1, 'exactly one upstream call');
  t.equal(await spent(), (Number(budget) + 25).toFixed(2), 'the budget is debited once');
  t.equal(credits - await balance(), 2_000, 'one billed verify: replays and 409s are not billed');
  const first = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined);
  const replays = answers.filter((a) => a.headers['idempotent-replayed'] === 'true');
  const busy = answers.filter((a) => a.status === 409);
  t.equal(first.length, 1, 'one answer came from the upstream');
  t.equal(replays.length + busy.length, 49, `the others: ${replays.length} replays, ${busy.length} in flight`);
  for (const b of busy) t.match(b.json, { error: { code: 'idempotency_in_flight', status: 409 } });
  for (const r of replays) {
    t.equal(r.status, 201);
    t.equal(r.text, first[0]!.text, 'a replay has the recorded body');
  }
  const later = await pay(key, 25);
  t.equal(later.status, 201, 'a later repeat');
  t.equal(later.headers['idempotent-replayed'], 'true');
  t.equal(later.text, first[0]!.text, 'replays the first answer');
  t.equal(later.headers['x-payment-id'], first[0]!.headers['x-payment-id'], 'with its headers');
  t.same(later.headers['set-cookie'], ['a=1', 'b=2'], 'repeated headers too');
  t.match(later.headers['content-type'], /^application\/json/);
  t.not(later.headers['x-request-id'], first[0]!.headers['x-request-id'], 'the request id is the repeat\'s own');
  t.equal(up.calls.length, calls + 1, 'still one upstream call');
  t.equal(await spent(), (Number(budget) + 25).toFixed(2), 'still one debit');
});

t.test('the same key for another request is 422; other agents and keys are separate', async (t) => {
  const key = `order-${randomUUID()}`;
  t.equal((await pay(key, 10)).status, 201);
  const calls = up.calls.length;
  const budget = await spent();
  const other = await pay(key, 11);
  t.equal(other.status, 422);
  t.match(other.json, { error: { code: 'idempotency_key_reused', status: 422 } });
  t.equal(up.calls.length, calls, 'not forwarded');
  t.equal(await spent(), budget, 'not debited');
  t.equal((await pay(`order-${randomUUID()}`, 11)).status, 201, 'a new key is a new request');
});

t.test('a missing, doubled or malformed key is 400 before verify', async (t) => {
  const proof = proofHeader(await present(f));
  const calls = up.calls.length;
  for (const [key, what] of [[undefined, 'missing'], [['k1', 'k2'], 'twice'], ['has space', 'a space'],
    ['x'.repeat(256), '256 characters']] as const) {
    const r = await pay(key as string | string[] | undefined, 5, { proof });
    t.equal(r.status, 400, what);
    t.match(r.json, { error: { code: 'idempotency_key_required', status: 400 } }, what);
  }
  const noProof = await pay(undefined, 5, { proof: null });
  t.match(noProof.json, { error: { code: 'idempotency_key_required' } }, 'before the proof is asked for');
  t.equal(up.calls.length, calls, 'none forwarded');
  t.equal((await pay(`k-${randomUUID()}`, 5, { proof })).status, 201, 'the proof was never spent');
});

t.test('a repeat still needs live authority', async (t) => {
  const key = `order-${randomUUID()}`;
  t.equal((await pay(key, 7)).status, 201);
  const noProof = await pay(key, 7, { proof: null });
  t.equal(noProof.status, 401, 'no proof, no replay');
  t.match(noProof.json, { error: { code: 'proof_required' } });
  const used = proofHeader(await present(f));
  t.equal((await pay(key, 7, { proof: used })).headers['idempotent-replayed'], 'true');
  const again = await pay(key, 7, { proof: used });
  t.match(again.json, { error: { code: 'proof_rejected', reason: 'invalid_challenge' } }, 'a replay spends its proof');
});

t.test('an upstream that does not answer releases the claim: the retry with the same key goes through', async (t) => {
  const dead = await countingUpstream(0);
  await dead.close();
  const deadGw = await startGatewayWithKey(config(dead.url, sc.url), f.reg.api_key as string);
  t.teardown(() => deadGw.close());
  const key = `order-${randomUUID()}`;
  const budget = await spent();
  const failed = await pay(key, 3, { base: deadGw.url });
  t.equal(failed.status, 502);
  t.match(failed.json, { error: { code: 'upstream_unavailable' } });
  let retry: Response | undefined;
  for (let i = 0; i < 50; i++) {
    retry = await pay(key, 3);
    if (retry.status !== 409) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(retry?.status, 201, 'the retry claimed the key again');
  t.equal(retry?.headers['idempotent-replayed'], undefined, 'and was forwarded');
  t.equal(await spent(), (Number(budget) + 6).toFixed(2), 'each allowed verify debited the budget');
});

t.test('a recorded answer survives a sidecar restart', async (t) => {
  const key = `order-${randomUUID()}`;
  const first = await pay(key, 9);
  t.equal(first.status, 201);
  const calls = up.calls.length;
  const port = Number(new URL(sc.url).port);
  const old = sc.app;
  const closing = old.close();
  // Keep-alive connections (the gateway's pool, this test's fetch) must not reach the old process.
  old.server.closeAllConnections();
  await closing;
  const open = await new Promise<number>((resolve) => old.server.getConnections((_e, n) => resolve(n)));
  t.equal(open, 0, 'the old sidecar has no connection left');
  const app = await buildServer(sc.config, { clock: sc.clock.now });
  await app.listen({ host: '127.0.0.1', port });
  restarted = app;
  const again = await pay(key, 9);
  t.equal(again.status, 201);
  t.equal(again.headers['idempotent-replayed'], 'true', 'replayed by the new process');
  t.equal(again.text, first.text);
  t.equal(up.calls.length, calls, 'not forwarded');
});
