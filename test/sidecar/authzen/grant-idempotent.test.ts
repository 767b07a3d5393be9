/**
 * Grant checks consume nothing (issue 34): 1,000 of them (ten batches of 100,
 * through the real HTTP API) over allows under a budget and a `max_calls` of
 * 5, an approval rule and denies leave the credits, verify counts, budget and
 * call counters and approvals as they were, do not spend a challenge a proof
 * was made on, and answer identically each time (but for the decision id).
 * A proof verification of the same action afterwards still consumes and
 * meters as verify does.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { bundleFor, usage } from '../decide/helpers.js';
import { ANY, PATHS, action, agent, http, pdp } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'idempotent@example.com', {
    approve: ['data:read', 'data:write', 'payments:send'],
    constraints: {
      budget: { amount: '100.00', currency: 'USD', period: 'day' }, max_calls: { count: 5, period: 'day' },
      require_approval: { scopes: ['data:write'] },
    },
  });
});
t.teardown(async () => { await sc.close(); });

const ITEMS = [
  { action: action('data:read'), resource: http('GET', '/orders') },
  { action: action('payments:send'), resource: http('POST', '/pay'), context: { amount: '60.00', currency: 'USD' } },
  { action: action('data:write'), resource: http('PUT', '/orders/1') },
  { action: action('payments:send'), resource: ANY, context: { amount: '500.00', currency: 'USD' } },
  { action: action('payments:send'), resource: ANY },
  { action: action('data:delete'), resource: ANY },
];

/** Everything a consuming call would change, read through the API. */
async function state(): Promise<unknown> {
  const u = await usage(f.user);
  const limits = await f.user.get(`/v1/service/delegations/${f.certId}/usage`);
  const approvals = await f.user.get('/v1/service/approvals');
  return { usage: u, limits: limits.body, approvals: approvals.body };
}

/** An answer without its decision ids. */
const strip = (evaluations: { decision: boolean; context: Record<string, unknown> }[]): unknown =>
  evaluations.map(({ decision, context }) => { const { decision_id: _id, ...rest } = context; return { decision, ...rest }; });

t.test('1,000 grant checks consume nothing and answer the same', async (t) => {
  const bundle = await bundleFor(f);
  const before = await state();
  let first: unknown;
  let checks = 0;
  const ids = new Set<string>();
  for (let batch = 0; batch < 10; batch++) {
    const evaluations = Array.from({ length: 100 }, (_v, i) => ITEMS[i % ITEMS.length]);
    const r = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId), evaluations });
    t.equal(r.status, 200, `batch ${batch}: 200`);
    t.equal(r.body.evaluations.length, 100);
    for (const e of r.body.evaluations) ids.add(e.context.decision_id);
    checks += r.body.evaluations.length;
    const answer = strip(r.body.evaluations);
    if (first === undefined) first = answer;
    else t.same(answer, first, `batch ${batch}: the same answers`);
  }
  t.equal(checks, 1000, '1,000 grant checks');
  t.equal(ids.size, 1000, 'each its own decision id');
  const six = (first as { decision: boolean; reason?: string; constraint?: string }[]).slice(0, 6)
    .map((d) => `${d.decision}:${d.reason}${d.constraint ? `:${d.constraint}` : ''}`);
  t.same(six, ['true:authorized', 'true:authorized', 'false:approval_required', 'false:budget_exceeded',
    'false:constraint_denied:budget', 'false:not_delegated'], 'allows past max_calls 5; no approval requested');
  t.same(await state(), before, 'credits, verify counts, budget and call counters, approvals unchanged');

  const v = await f.platform.post('/v1/service/verify', { proof_bundle: bundle, required_scope: 'payments:send',
    context: { method: 'POST', path: '/pay', amount: '60.00', currency: 'USD' } });
  t.equal(v.body?.decision, 'allow', 'the challenge made before the checks is still unspent');
  const after = await state() as { usage: { verify_calls: number; balance_micros: number }; limits: {
    budget: { spent: string }; max_calls: { used: number } } };
  const was = before as typeof after;
  t.equal(after.usage.verify_calls, was.usage.verify_calls + 1, 'verify is metered');
  t.equal(after.usage.balance_micros, was.usage.balance_micros - 2000, 'and billed');
  t.equal(after.limits.budget.spent, '60.00', 'and debits the budget');
  t.equal(after.limits.max_calls.used, 1, 'and counts the call');
});
