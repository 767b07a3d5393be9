/**
 * Step-up approval, operation binding and a budget through the real gateway
 * (standalone, real HTTP) in front of a recording upstream and the real
 * sidecar: the gateway derives method, path, amount and body hash from the
 * request it received, so a proof bound by the agent to its request passes
 * and the same proof cannot pass for another route or body; an action above
 * the threshold is refused (403, reason `approval_required`) until the
 * account holder approves it, then exactly one retry reaches the upstream;
 * the gateway passes the `approval_id` on (body and `X-Service-Approval-Id`).
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { gatewayConfig, send, startGatewayWithKey, startUpstream } from '../../gateway-plugin/helpers.js';
import type { Response, StartedGateway, TestServer, Recorded } from '../../gateway-plugin/helpers.js';
import { boundBundle, sha } from './helpers.js';

let sc: TestSidecar;
let up: TestServer & { received: Recorded[] };
let gw: StartedGateway;
let f: Flow;

t.before(async () => {
  sc = await startSidecar();
  sc.clock.t = Date.now();
  const ticker = setInterval(() => { sc.clock.t = Math.max(sc.clock.t, Date.now()); }, 20);
  ticker.unref();
  up = await startUpstream();
  f = await specFlow(sc, 'gateway-approvals@example.com', {
    approve: ['payments:send', 'data:read'],
    constraints: {
      require_bound_operation: true, budget: { amount: '500.00', currency: 'USD', period: 'day' },
      require_approval: { scopes: ['payments:send'], above: { amount: '100.00', currency: 'USD' } },
    },
  });
  gw = await startGatewayWithKey(gatewayConfig(up.url, sc.url, { verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000 }), f.reg.api_key as string);
  t.teardown(async () => {
    clearInterval(ticker);
    await gw.close();
    await up.close();
    await sc.close();
  });
});

/** POST /v1/payments through the gateway with a proof bound to `bindTo` (default: this very request). */
async function pay(amount: number, o: { to?: string; bindTo?: { path: string; body: string } } = {}): Promise<Response> {
  const body = JSON.stringify({ amount, currency: 'USD', to: o.to ?? 'acct_1' });
  const bind = o.bindTo ?? { path: '/v1/payments', body };
  const bundle = await boundBundle(f, { method: 'POST', path: bind.path, body_sha256: sha(bind.body), scope: 'payments:send' });
  return send(gw.url, '/v1/payments', {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', 'x-service-proof': Buffer.from(JSON.stringify(bundle)).toString('base64') },
  });
}

t.test('a bound proof passes for its own request only', async (t) => {
  const before = up.received.length;
  t.equal((await pay(20)).status, 200, 'its own request reaches the upstream');
  t.equal(up.received.length, before + 1);
  const other = await pay(20, { bindTo: { path: '/v1/payments', body: JSON.stringify({ amount: 20, currency: 'USD', to: 'acct_2' }) } });
  t.equal(other.status, 403, 'a proof bound to another body');
  t.match(other.json?.error, { code: 'proof_rejected', reason: 'operation_mismatch' });
  const route = await pay(20, { bindTo: { path: '/v1/refunds', body: JSON.stringify({ amount: 20, currency: 'USD', to: 'acct_1' }) } });
  t.match(route.json?.error, { code: 'proof_rejected', reason: 'operation_mismatch' }, 'a proof bound to another route');
  t.equal(up.received.length, before + 1, 'neither reached the upstream');
});

t.test('above the threshold: refused until approved, then exactly one retry passes', async (t) => {
  const before = up.received.length;
  const first = await pay(150);
  t.equal(first.status, 403);
  t.match(first.json?.error, { code: 'proof_rejected', reason: 'approval_required' });
  const pending = (await f.user.get('/v1/service/approvals?state=pending')).body.approvals as { approval_id: string; summary: string }[];
  t.equal(pending.length, 1);
  t.equal(pending[0]!.summary, 'payments:send 150 USD: POST /v1/payments', 'the amount as the gateway read it from the body');
  t.equal(first.json?.error?.approval_id, pending[0]!.approval_id, 'the gateway passes the approval id');
  t.equal(first.headers['x-service-approval-id'], pending[0]!.approval_id, 'also in X-Service-Approval-Id');
  t.equal((await f.user.post(`/v1/service/approvals/${pending[0]!.approval_id}/approve`)).status, 200);
  t.equal((await pay(150, { to: 'acct_9' })).json?.error?.reason, 'approval_required', 'another payee is another action');
  t.equal((await pay(150)).status, 200, 'the approved action passes');
  const again = await pay(150);
  t.equal(again.status, 403);
  t.match(again.json?.error, { code: 'proof_rejected', reason: 'approval_used' });
  t.equal(up.received.length, before + 1, 'the upstream saw it once');
});

t.test('the budget holds through the gateway', async (t) => {
  const usage = async (): Promise<string> => (await f.user.get(`/v1/service/delegations/${f.certId}/usage`)).body.budget.spent as string;
  t.equal(await usage(), '170.00', '20 + 150 so far');
  for (let i = 0; i < 3; i++) t.equal((await pay(100, { to: `acct_b${i}` })).status, 200);
  const over = await pay(31);
  t.match(over.json?.error, { code: 'proof_rejected', reason: 'budget_exceeded' });
  t.equal((await pay(30)).status, 200, 'exactly the rest');
  t.equal(await usage(), '500.00');
});
