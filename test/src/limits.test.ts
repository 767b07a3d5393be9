/**
 * src/limits.ts and src/approval-rule.ts: validation of `budget`,
 * `max_calls` and `require_approval` (through validateConstraints, as the
 * approve route calls it), the calendar windows at their boundaries (UTC
 * minute, hour, day, ISO week, month, leap day, total), the debits an allow
 * plans, and when the approval rule applies.
 */
import t from 'tap';
import { validateConstraints, evaluateConstraints } from '../../src/constraints.js';
import type { Constraints } from '../../src/constraints.js';
import { formatMicros, planLimits, windowOf } from '../../src/limits.js';
import { approvalApplies } from '../../src/approval-rule.js';

const T = (iso: string): number => Date.parse(iso);

t.test('validation of the new constraints', async (t) => {
  const good: Constraints = {
    require_bound_operation: true, budget: { amount: '200.00', currency: 'USD', period: 'day' }, max_calls: { count: 1000, period: 'hour' },
    require_approval: { scopes: ['payments:send'], above: { amount: '100.00', currency: 'USD' } },
  };
  t.equal(validateConstraints(good), null);
  t.equal(validateConstraints({ require_approval: { scopes: ['data:delete'] } }), null, 'no threshold');
  const bad: [unknown, RegExp][] = [
    [{ require_bound_operation: 'yes' }, /require_bound_operation/],
    [{ budget: { amount: '200.00', currency: 'USD' } }, /budget.period/],
    [{ budget: { amount: '200', currency: 'usd', period: 'day' } }, /budget.currency/],
    [{ budget: { amount: '0', currency: 'USD', period: 'day' } }, /budget.amount/],
    [{ budget: { amount: '1000000000', currency: 'USD', period: 'day' } }, /at most 9 integer digits/],
    [{ budget: { amount: '1', currency: 'USD', period: 'hour' } }, /budget.period must be one of day, week, month, total/],
    [{ budget: { amount: '1', currency: 'USD', period: 'day', x: 1 } }, /budget must be/],
    [{ max_calls: { count: 0, period: 'day' } }, /max_calls.count/],
    [{ max_calls: { count: 1.5, period: 'day' } }, /max_calls.count/],
    [{ max_calls: { count: 5, period: 'week' } }, /max_calls.period must be one of minute, hour, day, total/],
    [{ require_approval: { scopes: [] } }, /require_approval.scopes/],
    [{ require_approval: { scopes: ['payments:*'] } }, /require_approval.scopes/],
    [{ require_approval: { scopes: ['payments:send'], above: { amount: '-1', currency: 'USD' } } }, /above.amount/],
    [{ require_approval: { scopes: ['payments:send'], when: 1 } }, /require_approval must be/],
  ];
  for (const [c, re] of bad) t.match(validateConstraints(c), re, JSON.stringify(c));
  t.same(evaluateConstraints(good, {}, 'payments:send', T('2030-01-01T00:00:00Z')), { ok: true }, 'limits and rules are not per-request constraints');
});

t.test('calendar windows in UTC, at their boundaries', async (t) => {
  const w = (p: Parameters<typeof windowOf>[0], at: string): [string, string] => {
    const x = windowOf(p, T(at));
    return [new Date(x.start).toISOString(), Number.isFinite(x.end) ? new Date(x.end).toISOString() : 'never'];
  };
  t.same(w('minute', '2030-05-06T07:08:59.999Z'), ['2030-05-06T07:08:00.000Z', '2030-05-06T07:09:00.000Z']);
  t.same(w('minute', '2030-05-06T07:09:00.000Z'), ['2030-05-06T07:09:00.000Z', '2030-05-06T07:10:00.000Z']);
  t.same(w('hour', '2030-05-06T07:59:59.999Z'), ['2030-05-06T07:00:00.000Z', '2030-05-06T08:00:00.000Z']);
  t.same(w('day', '2030-05-06T23:59:59.999Z'), ['2030-05-06T00:00:00.000Z', '2030-05-07T00:00:00.000Z']);
  t.same(w('day', '2030-05-07T00:00:00.000Z'), ['2030-05-07T00:00:00.000Z', '2030-05-08T00:00:00.000Z']);
  // 2030-05-05 is a Sunday, 2030-05-06 a Monday: ISO weeks start on Monday.
  t.same(w('week', '2030-05-05T23:59:59.999Z'), ['2030-04-29T00:00:00.000Z', '2030-05-06T00:00:00.000Z']);
  t.same(w('week', '2030-05-06T00:00:00.000Z'), ['2030-05-06T00:00:00.000Z', '2030-05-13T00:00:00.000Z']);
  t.same(w('week', '2030-01-01T12:00:00.000Z'), ['2029-12-31T00:00:00.000Z', '2030-01-07T00:00:00.000Z'], 'across a year');
  t.same(w('month', '2028-02-29T23:59:59.999Z'), ['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z'], 'leap day');
  t.same(w('month', '2030-12-31T23:59:59.999Z'), ['2030-12-01T00:00:00.000Z', '2031-01-01T00:00:00.000Z']);
  t.same(w('total', '2030-12-31T23:59:59.999Z'), ['1970-01-01T00:00:00.000Z', 'never']);
});

t.test('planLimits: the debits of an allow', async (t) => {
  const c = { budget: { amount: '10.00', currency: 'USD', period: 'day' as const }, max_calls: { count: 3, period: 'minute' as const } };
  const now = T('2030-05-06T07:08:09Z');
  t.same(planLimits(c, 'payments:send', { amount: '2.5', currency: 'USD' }, now), {
    ok: true, debits: [
      { kind: 'budget', windowStart: T('2030-05-06T00:00:00Z'), amount: 2_500_000, limit: 10_000_000 },
      { kind: 'calls', windowStart: T('2030-05-06T07:08:00Z'), amount: 1, limit: 3 },
    ],
  });
  t.same(planLimits(c, 'data:read', {}, now), { ok: true, debits: [{ kind: 'calls', windowStart: T('2030-05-06T07:08:00Z'), amount: 1, limit: 3 }] }, 'the budget is for payments:* only');
  t.same(planLimits(c, 'payments:send', { currency: 'USD' }, now), { ok: false, constraint: 'budget' }, 'no amount');
  t.same(planLimits(c, 'payments:send', { amount: '1', currency: 'EUR' }, now), { ok: false, constraint: 'budget' }, 'another currency');
  t.same(planLimits(c, 'payments:send', { amount: '999999999999999', currency: 'USD' }, now).ok, true);
  const huge = planLimits(c, 'payments:send', { amount: '999999999999999', currency: 'USD' }, now);
  t.ok(huge.ok && huge.debits[0]!.amount > huge.debits[0]!.limit, 'an amount above the whole budget is a debit that cannot pass');
  t.same(planLimits(null, 'payments:send', {}, now), { ok: true, debits: [] });
  t.equal(formatMicros(1_500_000), '1.50');
  t.equal(formatMicros(0), '0.00');
  t.equal(formatMicros(1_234_567), '1.234567');
});

t.test('approvalApplies', async (t) => {
  const rule = { scopes: ['payments:send'], above: { amount: '100.00', currency: 'USD' } };
  t.equal(approvalApplies(rule, 'payments:send', { amount: '100', currency: 'USD' }), false, 'at the threshold: no');
  t.equal(approvalApplies(rule, 'payments:send', { amount: '100.000001', currency: 'USD' }), true, 'above: yes');
  t.equal(approvalApplies(rule, 'payments:send', { amount: '5', currency: 'EUR' }), true, 'another currency: yes');
  t.equal(approvalApplies(rule, 'payments:send', {}), true, 'no amount: yes');
  t.equal(approvalApplies(rule, 'payments:refund', { amount: '500', currency: 'USD' }), false, 'another scope: no');
  t.equal(approvalApplies({ scopes: ['data:delete'] }, 'data:delete', undefined), true, 'no threshold: always');
  t.equal(approvalApplies(undefined, 'data:delete', undefined), false);
});
