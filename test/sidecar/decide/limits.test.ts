/**
 * Budgets and rate limits through the real sidecar (issue 23), with the
 * injectable clock: a daily budget over allowed payments and a per-minute
 * call limit hold at their UTC window boundaries (one millisecond before and
 * at the boundary; week and month too); a budget needs the amount in its
 * currency; a verify refused for any other reason consumes nothing; the usage
 * read shows spent and left and agrees with the audit; with a budget of
 * exactly N payments of 1.00, 3N concurrent verifies give exactly N allows.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Client, Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, verify } from './helpers.js';
import { boundBundle, opOf, payment } from '../approvals/helpers.js';

let sc: TestSidecar;
t.before(async () => { sc = await startSidecar(); });
t.teardown(async () => { await sc.close(); });

const T = (iso: string): number => Date.parse(iso);
const usageOf = async (f: Flow): Promise<any> => { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await f.user.get(`/v1/service/delegations/${f.certId}/usage`);
  if (r.status !== 200) throw new Error(`usage: ${r.status} ${r.text}`);
  return r.body;
};
const pay = async (f: Flow, amount: string, o: { currency?: string } = {}): Promise<string> => {
  const r = await verify(f.platform, await bundleFor(f), 'payments:send', payment(amount, o).context);
  return r.body?.decision === 'allow' ? 'allow' : String(r.body?.decision_reason ?? r.status);
};

t.test('a daily budget holds at the UTC day boundary', async (t) => {
  sc.clock.t = T('2030-05-06T23:59:00.000Z');
  const f = await specFlow(sc, 'budget-day@example.com', { approve: ['payments:send', 'data:read'], constraints: { budget: { amount: '10.00', currency: 'USD', period: 'day' } } });
  t.same([await pay(f, '4.00'), await pay(f, '4.00'), await pay(f, '4.00'), await pay(f, '2.00'), await pay(f, '0.01')],
    ['allow', 'allow', 'budget_exceeded', 'allow', 'budget_exceeded'], '10.00 a day, exactly');
  t.match(await usageOf(f), {
    cert_id: f.certId, max_calls: null,
    budget: { amount: '10.00', currency: 'USD', period: 'day', window_start: '2030-05-06T00:00:00.000Z', window_end: '2030-05-07T00:00:00.000Z', spent: '10.00', left: '0.00', spent_micros: 10_000_000, left_micros: 0 },
  });
  sc.clock.t = T('2030-05-06T23:59:59.999Z');
  t.equal(await pay(f, '0.01'), 'budget_exceeded', 'one millisecond before midnight: the same day');
  sc.clock.t = T('2030-05-07T00:00:00.000Z');
  t.equal(await pay(f, '10.00'), 'allow', 'at midnight UTC: a new day');
  t.equal(await pay(f, '10.01'), 'budget_exceeded', 'one payment above the whole budget');
  t.match((await usageOf(f)).budget, { window_start: '2030-05-07T00:00:00.000Z', spent: '10.00' });
  t.equal((await verify(f.platform, await bundleFor(f), 'data:read', { method: 'GET' })).body.decision, 'allow', 'other scopes are not budgeted');
});

t.test('weekly and monthly budgets start on Monday and on the 1st (UTC)', async (t) => {
  sc.clock.t = T('2030-05-05T23:59:59.000Z'); // a Sunday
  const w = await specFlow(sc, 'budget-week@example.com', { approve: ['payments:send'], constraints: { budget: { amount: '5', currency: 'USD', period: 'week' } } });
  t.equal(await pay(w, '5'), 'allow');
  t.equal(await pay(w, '1'), 'budget_exceeded', 'Sunday is the end of the ISO week');
  sc.clock.t = T('2030-05-06T00:00:00.000Z');
  t.equal(await pay(w, '5'), 'allow', 'Monday 00:00 UTC: a new week');
  sc.clock.t = T('2030-05-31T23:59:59.000Z');
  const m = await specFlow(sc, 'budget-month@example.com', { approve: ['payments:send'], constraints: { budget: { amount: '3.5', currency: 'EUR', period: 'month' } } });
  t.equal(await pay(m, '3.5', { currency: 'EUR' }), 'allow');
  t.equal(await pay(m, '0.000001', { currency: 'EUR' }), 'budget_exceeded', 'a micro-unit over');
  t.equal(await pay(m, '1', { currency: 'USD' }), 'constraint_denied', 'another currency: the budget cannot be applied');
  sc.clock.t = T('2030-06-01T00:00:00.000Z');
  t.equal(await pay(m, '3.5', { currency: 'EUR' }), 'allow', 'the 1st: a new month');
  t.match((await usageOf(m)).budget, { window_start: '2030-06-01T00:00:00.000Z', window_end: '2030-07-01T00:00:00.000Z', spent: '3.50', left: '0.00' });
});

t.test('max_calls per minute holds at the minute boundary, for any scope', async (t) => {
  sc.clock.t = T('2030-05-06T10:00:59.000Z');
  const f = await specFlow(sc, 'rate@example.com', { approve: ['data:read', 'data:write'], constraints: { max_calls: { count: 2, period: 'minute' } } });
  const call = async (scope: string): Promise<string> => {
    const r = await verify(f.platform, await bundleFor(f), scope, { method: 'GET' });
    return r.body?.decision === 'allow' ? 'allow' : String(r.body?.decision_reason);
  };
  t.same([await call('data:read'), await call('data:write'), await call('data:read')], ['allow', 'allow', 'rate_exceeded']);
  t.match((await usageOf(f)).max_calls, { count: 2, period: 'minute', window_start: '2030-05-06T10:00:00.000Z', window_end: '2030-05-06T10:01:00.000Z', used: 2, left: 0 });
  sc.clock.t = T('2030-05-06T10:00:59.999Z');
  t.equal(await call('data:read'), 'rate_exceeded', 'one millisecond before the next minute');
  sc.clock.t = T('2030-05-06T10:01:00.000Z');
  t.equal(await call('data:read'), 'allow', 'the next minute');
  t.equal(await call('data:delete'), 'not_delegated', 'a deny is not counted');
  t.match((await usageOf(f)).max_calls, { used: 1, left: 1 });
});

t.test('a budget needs the amount in its currency', async (t) => {
  const f = await specFlow(sc, 'budget-ctx@example.com', { approve: ['payments:send'], constraints: { budget: { amount: '10', currency: 'USD', period: 'total' } } });
  const r = await verify(f.platform, await bundleFor(f), 'payments:send', { method: 'POST' });
  expectDecision(t, r, 'deny', 'constraint_denied', 'budget', 'no amount');
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'payments:send', { amount: '1', currency: 'GBP' }), 'deny', 'constraint_denied', 'budget', 'another currency');
  t.match((await usageOf(f)).budget, { spent: '0.00', left: '10.00', window_end: null });
});

t.test('a verify refused for another reason consumes nothing', async (t) => {
  const f = await specFlow(sc, 'budget-nothing@example.com', {
    approve: ['payments:send'],
    constraints: { budget: { amount: '10', currency: 'USD', period: 'total' }, max_calls: { count: 100, period: 'total' }, max_amount: { amount: '5', currency: 'USD' } },
  });
  const p = payment('4.00');
  const refused = [
    await verify(f.platform, await bundleFor(f), 'payments:send', payment('6.00').context), // max_amount
    await verify(f.platform, await bundleFor(f), 'payments:refund', p.context), // not delegated
    await verify(f.platform, await boundBundle(f, opOf(payment('4.00', { to: 'x' }).context)), 'payments:send', p.context), // operation_mismatch
  ];
  t.same(refused.map((r) => r.body?.decision_reason), ['constraint_denied', 'not_delegated', 'operation_mismatch']);
  const b = await bundleFor(f);
  t.equal((await verify(f.platform, { ...b, sig: { ...b.sig, ed25519: b.sig.ed25519.replace(/^./, (c: string) => (c === 'A' ? 'B' : 'A')) } }, 'payments:send', p.context)).status, 400, 'a bad signature (400)');
  t.match(await usageOf(f), { budget: { spent: '0.00' }, max_calls: { used: 0 } }, 'nothing debited');
  t.equal(await pay(f, '4.00'), 'allow');
  t.match(await usageOf(f), { budget: { spent: '4.00', left: '6.00' }, max_calls: { used: 1, left: 99 } });
});

t.test('3N concurrent payments of 1.00 against a budget of N: exactly N allows; usage agrees with the audit', async (t) => {
  const N = 10;
  sc.clock.t = Date.now();
  const f = await specFlow(sc, 'budget-race@example.com', { approve: ['payments:send'], constraints: { budget: { amount: `${N}.00`, currency: 'USD', period: 'total' }, max_calls: { count: 1000, period: 'day' } } });
  const bundles = [];
  for (let i = 0; i < 3 * N; i++) bundles.push(await bundleFor(f));
  const rs = await Promise.all(bundles.map((b, i) => verify(f.platform, b, 'payments:send', payment('1.00', { to: `acct_${i}` }).context)));
  t.equal(rs.filter((r) => r.body?.decision === 'allow').length, N, `exactly ${N} allows`);
  t.equal(rs.filter((r) => r.body?.decision_reason === 'budget_exceeded').length, 2 * N, `${2 * N} budget_exceeded`);
  t.equal(rs.filter((r) => r.status !== 200).length, 0, 'no errors');
  const u = await usageOf(f);
  t.match(u, { budget: { spent: `${N}.00`, left: '0.00' }, max_calls: { used: N } });
  await t.test('the usage read agrees with the audit', async (t) => {
    const rows = (await auditAll(f.user as Client, 'event_type=proof.verified')).filter((e) => e.cert_id === f.certId);
    t.equal(rows.length, N);
    const micros = rows.reduce((n, e) => n + Math.round(Number((e.details.budget_debit as { amount: string }).amount) * 1_000_000), 0);
    t.equal(micros, u.budget.spent_micros, 'sum of budget_debit = spent');
    t.equal(rows.reduce((n, e) => n + (e.details.calls_debit as { count: number }).count, 0), u.max_calls.used, 'sum of calls_debit = used');
    const denied = (await auditAll(f.user as Client, 'event_type=proof.rejected')).filter((e) => e.cert_id === f.certId);
    t.ok(denied.every((e) => e.details.budget_debit === undefined && e.details.decision_reason === 'budget_exceeded'), 'denies debit nothing');
  });
});
