/**
 * `agent-authz/client` against the REAL sidecar (in process, SQLite, real
 * signatures) and the REAL standalone gateway in front of a small upstream:
 *
 * - a request gets a fresh proof (challenge + present) and passes; the body
 *   is sent byte for byte; every call makes a new proof, bound to the query
 *   string too;
 * - a 401 with a challenge is presented and retried exactly once
 *   (`challenge: 'server'`, and a front that always drops the proof);
 * - a 403 is never retried and throws an AgentAuthzError with the code,
 *   the decision reason and the constraint;
 * - the API's own errors come back as Responses; sidecar failures throw
 *   AgentAuthzErrors with `source: 'sidecar'`; options are checked.
 */

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AgentAuthzError, createAgentFetch } from '../../client/index.js';
import type { AgentFetchOptions } from '../../client/index.js';
import { delegateAgent, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, metricSum, startGatewayWithKey } from '../gateway-plugin/helpers.js';

t.setTimeout(60_000);

/** An upstream that records requests; `/v1/app-error` answers the app's own 403. */
const received: Array<{ method: string; url: string; body: string; agent: string | undefined }> = [];
const upstream = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received.push({ method: req.method ?? '', url: req.url ?? '', body: Buffer.concat(chunks).toString('utf8'), agent: req.headers['x-service-agent-id'] as string | undefined });
    const forbidden = req.url === '/v1/app-error';
    res.writeHead(forbidden ? 403 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(forbidden ? { error: { code: 'forbidden_by_app', message: 'no', status: 403 } } : { ok: true, url: req.url }));
  });
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
const sc = await startSidecar();
t.teardown(async () => {
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
  await sc.close();
});

const payer: Flow = await specFlow(sc, 'client-owner@example.com', {
  scopes: ['data:read', 'data:write', 'payments:send'], approve: ['data:read', 'payments:send'],
  constraints: { max_amount: { amount: '50.00', currency: 'USD' } },
});
const gw = await startGatewayWithKey(gatewayConfig(upstreamUrl, sc.url, {
  routes: [
    { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
    { method: 'DELETE', path: '/v1/items/:id', scope: 'data:write' },
    { method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } },
    { method: 'GET', path: '/v1/app-error', scope: 'data:read' },
  ],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), payer.reg.api_key as string);
t.teardown(() => gw.close());

const options = (flow: Flow, extra: Partial<AgentFetchOptions> = {}): AgentFetchOptions => ({
  sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId, ...extra,
});
const agentFetch = createAgentFetch(options(payer));
const count = (outcome: string): Promise<number> => metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_requests_total', { outcome });

t.test('a request gets a proof and passes; each call makes a new one', async (t) => {
  for (const id of [1, 2, 3]) {
    const res = await agentFetch(`${gw.url}/v1/items/${id}?x=1`);
    t.equal(res.status, 200);
    t.same(await res.json(), { ok: true, url: `/v1/items/${id}?x=1` });
    t.equal(received.at(-1)?.agent, payer.agentId, 'the upstream sees the verified agent');
  }
  // The proof binds the query's hash: the client hashes the query fetch sends (the URL's
  // serialized form), the gateway the one it received, byte for byte.
  const odd = await agentFetch(`${gw.url}/v1/items/9?q=a b&e=é&x=%41&&y=`);
  t.equal(odd.status, 200, 'a query that URL serialization rewrites still matches');
  t.same(await odd.json(), { ok: true, url: '/v1/items/9?q=a%20b&e=%C3%A9&x=%41&&y=' });
  const body = '{"amount":"12.00","currency":"USD","to":"acct-1"}';
  const res = await agentFetch(new Request(`${gw.url}/v1/payments`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }));
  t.equal(res.status, 200);
  t.equal(received.at(-1)?.body, body, 'the body reached the upstream byte for byte');
});

t.test('a 403 is never retried and throws the decision reason', async (t) => {
  const refusedBefore = await count('403');
  const allowedBefore = await count('allowed');
  const err = await agentFetch(`${gw.url}/v1/items/9`, { method: 'DELETE' }).catch((e: unknown) => e);
  t.ok(err instanceof AgentAuthzError, 'an AgentAuthzError');
  const e = err as AgentAuthzError;
  t.same([e.code, e.reason, e.status, e.source], ['not_delegated', 'not_delegated', 403, 'gateway']);
  t.same(e.operation, { method: 'DELETE', path: '/v1/items/9', tool: undefined, body_sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' });
  t.match(e.requestId, /^[0-9a-f-]{36}$/);
  const over = await agentFetch(`${gw.url}/v1/payments`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"amount":75,"currency":"USD"}' }).catch((x: unknown) => x) as AgentAuthzError;
  t.same([over.code, over.reason, over.constraint], ['constraint_denied', 'constraint_denied', 'max_amount']);
  t.equal(await count('403'), refusedBefore + 2, 'exactly one request per refused call');
  t.equal(await count('allowed'), allowedBefore, 'nothing else was sent');
});

t.test('a 401 with a challenge is presented and retried once', async (t) => {
  const lazy = createAgentFetch(options(payer, { challenge: 'server' }));
  const before401 = await count('401');
  const res = await lazy(`${gw.url}/v1/items/5`);
  t.equal(res.status, 200, 'the gateway\'s challenge, presented, passes');
  t.equal(await count('401'), before401 + 1, 'one 401 first');

  // A front that always drops the proof: the retry gets a 401 again, and the client stops.
  let seen = 0;
  const stripper = http.createServer((req, res2) => {
    seen += 1;
    const headers = { ...req.headers };
    delete headers['x-service-proof'];
    const fwd = http.request(`${gw.url}${req.url}`, { method: req.method, headers }, (up) => {
      res2.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res2);
    });
    req.pipe(fwd);
  });
  await new Promise<void>((resolve) => stripper.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { stripper.closeAllConnections(); stripper.close(() => resolve()); }));
  const err = await agentFetch(`http://127.0.0.1:${(stripper.address() as AddressInfo).port}/v1/items/6`).catch((e: unknown) => e) as AgentAuthzError;
  t.ok(err instanceof AgentAuthzError);
  t.equal(err.code, 'proof_required');
  t.equal(err.status, 401);
  t.equal(seen, 2, 'sent twice: the request and one retry');
});

t.test('the API\'s own errors are responses, not refusals', async (t) => {
  const res = await agentFetch(`${gw.url}/v1/app-error`);
  t.equal(res.status, 403);
  t.same(await res.json(), { error: { code: 'forbidden_by_app', message: 'no', status: 403 } });
});

t.test('sidecar failures and bad options', async (t) => {
  const lonely = await delegateAgent(payer, 'lonely', { approve: ['data:read'] });
  await payer.user.post(`/v1/service/delegations/${lonely.certId}/revoke`, { reason: 'test' });
  const noCert = await createAgentFetch(options(lonely))(`${gw.url}/v1/items/1`).catch((e: unknown) => e) as AgentAuthzError;
  t.same([noCert.source, noCert.code, noCert.status], ['sidecar', 'no_active_delegation', 404]);
  const badKey = await createAgentFetch(options(payer, { apiKey: 'not-a-real-key-123' }))(`${gw.url}/v1/items/1`).catch((e: unknown) => e) as AgentAuthzError;
  t.same([badKey.source, badKey.code, badKey.status], ['sidecar', 'invalid_api_key', 401]);
  const down = await createAgentFetch(options(payer, { sidecarUrl: 'http://127.0.0.1:1', timeoutMs: 2000 }))(`${gw.url}/v1/items/1`).catch((e: unknown) => e) as AgentAuthzError;
  t.same([down.source, down.code, down.status], ['sidecar', 'service_unavailable', 503]);
  const bad: Array<[unknown, RegExp]> = [
    [{ ...options(payer), extra: 1 }, /^agent fetch options: extra: unknown option/],
    [{ ...options(payer), sidecarUrl: 'ftp://x' }, /^agent fetch options: sidecarUrl: must be an absolute http\(s\) URL$/],
    [{ ...options(payer), apiKey: '' }, /^agent fetch options: apiKey: must be a non-empty string/],
    [{ ...options(payer), challenge: 'always' }, /^agent fetch options: challenge: must be "sidecar" or "server"$/],
    [{ ...options(payer), timeoutMs: 0 }, /^agent fetch options: timeoutMs: must be a positive integer$/],
  ];
  for (const [o, message] of bad) t.throws(() => createAgentFetch(o as AgentFetchOptions), { name: 'TypeError', message });
  await t.rejects(createAgentFetch(options(payer, { maxBodyBytes: 4 }))(`${gw.url}/v1/payments`, { method: 'POST', body: 'too long' }), RangeError);
});
