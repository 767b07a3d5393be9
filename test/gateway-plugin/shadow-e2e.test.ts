/**
 * Shadow mode against the REAL sidecar (issue 35): the standalone gateway in
 * front of a recording upstream, its routes in `mode: shadow`, and real
 * agents with real hybrid proofs. Every refusal the real decision path can
 * produce — a missing proof, a scope not delegated, a spent proof, a revoked
 * delegation, a constraint, and a sidecar that is gone — is forwarded with
 * `X-Service-Decision: shadow` and `X-Service-Shadow-Refusal`, counted by
 * route and reason in `agent_authz_gateway_shadow_would_refuse_total`; an
 * allow is an ordinary allow; and an enforced route beside them still refuses.
 * (shadow.test.ts covers every row of the outcome table with a fake sidecar,
 * including answers a real one never gives.)
 */
import t from 'tap';
import type { Test } from 'tap';
import { delegateAgent, present, specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, metricSum, proofHeader, send, startGatewayWithKey, startUpstream } from './helpers.js';
import type { Recorded } from './helpers.js';

t.setTimeout(90_000);

const sc = await startSidecar();
const up = await startUpstream();
t.teardown(async () => {
  await up.close();
  await sc.close();
});

const reader = await specFlow(sc, 'shadow-e2e@example.com', { scopes: ['data:read', 'messages:send', 'payments:send'], approve: ['data:read'] });
const getter = await delegateAgent(reader, 'getter', { approve: ['data:read'], constraints: { methods: ['GET'] } });
const doomed = await delegateAgent(reader, 'doomed', { approve: ['data:read'] });

const ROUTES = [
  { method: 'GET', path: '/v1/items/*', scope: 'data:read', mode: 'shadow' },
  { method: 'DELETE', path: '/v1/items/*', scope: 'data:read', mode: 'shadow' },
  { method: 'POST', path: '/v1/messages', scope: 'messages:send', mode: 'shadow' },
  { method: 'POST', path: '/v1/payments', scope: 'payments:send' },
];
const gw = await startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: ROUTES, verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000 }),
  reader.reg.api_key as string);
t.teardown(() => gw.close());
const metricsUrl = gw.metricsUrl ?? '';

const proofOf = async (f: typeof reader): Promise<string> => proofHeader(await present(f));
const last = (): Recorded => up.received[up.received.length - 1] as Recorded;
const wouldRefuse = (route: string, reason: string): Promise<number> =>
  metricSum(metricsUrl, 'agent_authz_gateway_shadow_would_refuse_total', { route, reason });

/** Sends a request that must reach the upstream marked as a shadow refusal; checks the header and the counter. */
async function expectShadow(t: Test, req: { method?: string; path: string; proof?: string; body?: string },
  route: string, refusal: string, reason: string): Promise<void> {
  const before = up.received.length;
  const counted = await wouldRefuse(route, reason);
  const headers: Record<string, string> = req.body === undefined ? {} : { 'content-type': 'application/json' };
  if (req.proof !== undefined) headers['x-service-proof'] = req.proof;
  const res = await send(gw.url, req.path, { method: req.method ?? 'GET', headers, body: req.body });
  t.equal(res.status, 200, `${refusal}: forwarded, the upstream's answer comes back`);
  t.equal(up.received.length, before + 1, `${refusal}: the upstream was called once`);
  t.equal(last().headers['x-service-decision'], 'shadow', `${refusal}: marked shadow`);
  t.equal(last().headers['x-service-shadow-refusal'], refusal, `${refusal}: the would-be refusal`);
  t.notOk('x-service-proof' in last().headers, `${refusal}: the proof is not forwarded`);
  t.equal(await wouldRefuse(route, reason), counted + 1, `${refusal}: counted under ${route} / ${reason}`);
}

t.test('an allow on a shadow route is an ordinary allow', async (t) => {
  const res = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': await proofOf(reader) } });
  t.equal(res.status, 200);
  t.equal(last().headers['x-service-decision'], 'allow');
  t.equal(last().headers['x-service-agent-id'], reader.agentId);
  t.notOk('x-service-shadow-refusal' in last().headers);
});

t.test('every refusal of the real decision path is forwarded, marked and counted', async (t) => {
  await expectShadow(t, { path: '/v1/items/2' }, '/v1/items/*', '401 proof_required', 'proof_required');
  await expectShadow(t, { method: 'POST', path: '/v1/messages', proof: await proofOf(reader), body: '{"to":"x"}' },
    '/v1/messages', '403 not_delegated', 'not_delegated');
  const spent = await proofOf(reader);
  const first = await send(gw.url, '/v1/items/3', { headers: { 'x-service-proof': spent } });
  t.equal(last().headers['x-service-decision'], 'allow', 'the proof is good once');
  t.equal(first.status, 200);
  await expectShadow(t, { path: '/v1/items/3', proof: spent }, '/v1/items/*', '403 proof_rejected; reason=invalid_challenge', 'invalid_challenge');
  await expectShadow(t, { method: 'DELETE', path: '/v1/items/4', proof: await proofOf(getter) },
    '/v1/items/*', '403 constraint_denied', 'constraint_denied');
  const before = await proofOf(doomed);
  const revoked = await doomed.user.post(`/v1/service/delegations/${doomed.certId}/revoke`, { reason: 'shadow e2e' });
  t.equal(revoked.status, 200, 'revoked');
  await expectShadow(t, { path: '/v1/items/5', proof: before }, '/v1/items/*', '403 delegation_revoked', 'delegation_revoked');
});

t.test('an enforced route beside the shadow routes still refuses', async (t) => {
  const before = up.received.length;
  // The payments route keeps the idempotency ledger (docs/gateway.md#idempotency): a key, so the proof is what is missing.
  const res = await send(gw.url, '/v1/payments', {
    method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'order-1' }, body: '{"amount":"1.00"}',
  });
  t.equal(res.status, 401);
  t.equal(res.json?.error?.code, 'proof_required');
  t.equal(up.received.length, before, 'the upstream was not called');
});

t.test('a sidecar that is gone: still forwarded, counted by its cause', async (t) => {
  const proof = await proofOf(reader);
  await sc.close();
  const before = up.received.length;
  const counted = await metricSum(metricsUrl, 'agent_authz_gateway_shadow_would_refuse_total', { route: '/v1/items/*' });
  const res = await send(gw.url, '/v1/items/6', { headers: { 'x-service-proof': proof } });
  t.equal(res.status, 200, 'forwarded');
  t.equal(up.received.length, before + 1);
  t.equal(last().headers['x-service-decision'], 'shadow');
  const refusal = String(last().headers['x-service-shadow-refusal']);
  t.match(refusal, /^503 verify_unavailable; reason=verify_[a-z_]+$/, 'a would-be 503 with its cause');
  const reason = refusal.split('reason=')[1] ?? '';
  t.equal(await wouldRefuse('/v1/items/*', reason), 1, `counted under its cause (${reason})`);
  t.equal(await metricSum(metricsUrl, 'agent_authz_gateway_shadow_would_refuse_total', { route: '/v1/items/*' }), counted + 1);
});
