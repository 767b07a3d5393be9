/**
 * Store faults on the new decision stages, through the store wrapper (so they
 * hold for any engine): a failing approval lookup or usage read is 200
 * `indeterminate` / `store_unavailable`; a failing commit of a decision with
 * effects (a requested approval, a spent approval, counter debits) is
 * `audit_write_failed`; in every case nothing is committed — no approval
 * recorded or spent, no webhook queued, no budget debited — and the same
 * proof works once the fault clears.
 */
import t from 'tap';
import { specFlow } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { startFaultySidecar } from '../../helpers/store-faults.js';
import type { FaultySidecar } from '../../helpers/store-faults.js';
import { auditAll, bundleFor, expectDecision, usage, verify } from '../decide/helpers.js';
import type { Bundle, T } from '../decide/helpers.js';
import { payment } from './helpers.js';

let sc: FaultySidecar;
let f: Flow;
t.before(async () => {
  sc = await startFaultySidecar();
  f = await specFlow(sc, 'approval-faults@example.com', {
    approve: ['payments:send'],
    constraints: { require_approval: { scopes: ['payments:send'], above: { amount: '100', currency: 'USD' } }, budget: { amount: '1000', currency: 'USD', period: 'total' } },
  });
});
t.afterEach(() => { sc.faults.clear(); });
t.teardown(async () => { await sc.close(); });

/** Everything an indeterminate answer must leave as it was. */
async function snapshot(): Promise<unknown> {
  const u = await usage(f.user);
  return {
    balance: u.balance_micros, calls: u.verify_calls, events: (await auditAll(f.user)).map((e) => e.event_id),
    approvals: (await f.user.get('/v1/service/approvals?limit=200')).body.approvals.map((a: { approval_id: string; state: string }) => `${a.approval_id}:${a.state}`),
    spent: (await f.user.get(`/v1/service/delegations/${f.certId}/usage`)).body.budget.spent,
    deliveries: (await f.user.get('/v1/service/webhooks/deliveries?limit=200')).body.deliveries.length,
  };
}

/** Verify of `amount` with `ops` failing: indeterminate `reason`, nothing committed; then the same bundle decides. */
async function failsClosed(t: T, ops: RegExp | string, reason: string, amount: string, b?: Bundle): Promise<ReturnType<typeof verify>> {
  const bundle = b ?? await bundleFor(f);
  const before = await snapshot();
  sc.app.ctx.caches.apiKeys.clear();
  const h = sc.faults.fail(ops);
  const r = await verify(f.platform, bundle, 'payments:send', payment(amount).context);
  sc.faults.clear();
  t.ok(h.hits > 0, `${String(ops)} fired`);
  expectDecision(t, r, 'indeterminate', reason, undefined, String(ops));
  t.same(await snapshot(), before, `${String(ops)}: nothing committed`);
  return verify(f.platform, bundle, 'payments:send', payment(amount).context);
}

t.test('reads of the new stages fail closed', async (t) => {
  expectDecision(t, await failsClosed(t, 'usage.usage', 'store_unavailable', '10.00'), 'allow', 'authorized', undefined, 'after the fault');
  expectDecision(t, await failsClosed(t, 'approvals.findForOperation', 'store_unavailable', '150.00'), 'deny', 'approval_required', undefined, 'after the fault');
});

t.test('commits with effects fail closed', async (t) => {
  const requested = await failsClosed(t, 'proofs.commitDecision', 'audit_write_failed', '200.00');
  expectDecision(t, requested, 'deny', 'approval_required', undefined, 'the request is recorded once the fault clears');
  const id = requested.body.approval_id as string;
  t.equal((await f.user.post(`/v1/service/approvals/${id}/approve`)).status, 200);
  const used = await failsClosed(t, 'proofs.commitDecision', 'audit_write_failed', '200.00');
  expectDecision(t, used, 'allow', 'authorized', undefined, 'the approval was not spent by the failed commit');
  t.equal(used.body.approval_id, id);
  t.equal((await f.user.get(`/v1/service/delegations/${f.certId}/usage`)).body.budget.spent, '210.00', 'debited once per committed allow');
});

t.test('a failing approval write on the routes is an error, not a change', async (t) => {
  const id = (await verify(f.platform, await bundleFor(f), 'payments:send', payment('300.00').context)).body.approval_id as string;
  sc.faults.fail('approvals.decideApproval');
  const r = await f.user.post(`/v1/service/approvals/${id}/approve`);
  sc.faults.clear();
  t.equal(r.status, 500);
  t.equal(r.body?.error?.code, 'internal_error');
  t.equal((await f.user.get(`/v1/service/approvals/${id}`)).body.state, 'pending', 'still pending');
});
