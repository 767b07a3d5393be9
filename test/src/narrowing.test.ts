/**
 * Narrowing (src/narrowing.ts, issue 33): a child grant accepted by
 * `checkNarrowing` allows no request its parent refuses — checked as a
 * property against the real evaluators (`evaluateConstraints`,
 * `approvalApplies`) over random constraints, contexts and times — and each
 * way of widening is refused naming its member.
 */
import t from 'tap';
import fc from 'fast-check';
import { checkNarrowing } from '../../src/narrowing.js';
import type { Grant } from '../../src/narrowing.js';
import { evaluateConstraints, validateConstraints } from '../../src/constraints.js';
import type { Constraints } from '../../src/constraints.js';
import { approvalApplies } from '../../src/approval-rule.js';

const SCOPES = ['data:read', 'data:write', 'payments:send'] as const;
const METHODS = ['GET', 'POST', 'PUT', 'DELETE'];
const PREFIXES = ['/a', '/a/b', '/a/b/c', '/b', '/a/bc', '/ab', '/'];
const PATHS = ['/a', '/a/b', '/a/b/c/d', '/a/bc', '/a/b/x', '/ab', '/ab/x', '/abc', '/b/x', '/c', '/'];
const CIDRS = [
  '10.0.0.0/7', '10.1.2.0/23', '10.0.0.0/8', '10.1.0.0/16', '10.1.2.0/24', '10.1.2.3', '192.168.0.0/16', '::1', '2001:db8::/32', '2001:db8:1::/48'];
const IPS = ['10.1.2.3', '10.1.9.9', '10.200.0.1', '10.0.0.0', '10.255.255.255', '11.0.0.0', '9.255.255.255', '10.1.255.255', '10.2.0.0',
  '10.1.2.0', '10.1.2.255', '10.1.3.0', '192.168.1.1', '8.8.8.8', '::1', '::2', '2001:db8:1::5', '2001:db8:2::5', '2001:db9::1'];
const TENANTS = ['t1', 't2', 't3'];
const AMOUNTS = ['1.00', '10.00', '50.00', '99.99'];
const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;

const hhmm = fc.integer({ min: 0, max: 95 }).map((q) => `${String(Math.floor(q / 4)).padStart(2, '0')}:${String((q % 4) * 15).padStart(2, '0')}`);
const someOf = <T>(xs: readonly T[]) => fc.subarray([...xs], { minLength: 1 });
const constraints: fc.Arbitrary<Constraints> = fc.record({
  max_amount: fc.record({ amount: fc.constantFrom(...AMOUNTS), currency: fc.constantFrom('USD', 'EUR') }),
  methods: someOf(METHODS),
  path_prefixes: someOf(PREFIXES),
  client_ips: someOf(CIDRS),
  tenants: someOf(TENANTS),
  time_window: fc.record({ start: hhmm, end: hhmm, days: someOf(DAY_NAMES) }, { requiredKeys: ['start', 'end'] })
    .filter((w) => w.start !== w.end),
  require_bound_operation: fc.boolean(),
  require_approval: fc.record({ scopes: someOf(SCOPES), above: fc.record({ amount: fc.constantFrom(...AMOUNTS), currency: fc.constantFrom('USD', 'EUR') }) },
    { requiredKeys: ['scopes'] }),
}, { requiredKeys: [] }) as fc.Arbitrary<Constraints>;
const grant: fc.Arbitrary<Grant> = fc.record({
  scopes: someOf(SCOPES), constraints, expiresAt: fc.option(fc.integer({ min: 1, max: 10 }), { nil: null }),
});
const pick = fc.oneof(
  { arbitrary: fc.constant('keep'), weight: 8 }, { arbitrary: fc.constant('drop'), weight: 1 }, { arbitrary: fc.constant('other'), weight: 1 },
);
/** A parent and a child made from it: each member kept, dropped, replaced at random or added, so many children narrow and many do not. */
const family: fc.Arbitrary<[Grant, Grant]> = fc.tuple(grant, grant, fc.array(pick, { minLength: 12, maxLength: 12 }))
  .map(([parent, other, picks]) => {
    const keys = ['max_amount', 'methods', 'path_prefixes', 'client_ips', 'tenants', 'time_window', 'require_bound_operation', 'require_approval'] as const;
    const c: Record<string, unknown> = {};
    keys.forEach((k, i) => {
      const pick = picks[i];
      const value = pick === 'keep' ? parent.constraints?.[k] ?? other.constraints?.[k] : pick === 'other' ? other.constraints?.[k] : undefined;
      if (value !== undefined) c[k] = value;
    });
    const scopes = picks[8] === 'other' ? other.scopes : parent.scopes.filter((_, i) => i === 0 || picks[9] !== 'drop');
    const expiresAt = picks[10] === 'other' ? other.expiresAt : parent.expiresAt;
    return [parent, { scopes, constraints: c as Constraints, expiresAt }];
  });
const context = fc.record({
  method: fc.constantFrom(...METHODS), path: fc.constantFrom(...PATHS), client_ip: fc.constantFrom(...IPS),
  tenant: fc.constantFrom(...TENANTS), amount: fc.constantFrom('0.50', ...AMOUNTS, '100.00'), currency: fc.constantFrom('USD', 'EUR'),
}, { requiredKeys: [] });
/** A time within one week (any minute), epoch ms. */
const instant = fc.integer({ min: 0, max: 7 * 1440 - 1 }).map((m) => Date.UTC(2026, 10, 1) + m * 60_000);

t.test('the generators make valid constraints', async (t) => {
  fc.assert(fc.property(constraints, (c) => validateConstraints(c) === null), { numRuns: 300 });
  t.pass();
});

t.test('soundness: an accepted child allows no request its parent refuses', async (t) => {
  let accepted = 0;
  fc.assert(fc.property(family, context, instant, ([parent, child], ctx, now) => {
    if (!checkNarrowing(child, parent).ok) return true;
    accepted += 1;
    if (parent.expiresAt !== null && (child.expiresAt === null || child.expiresAt > parent.expiresAt)) return false;
    for (const scope of child.scopes) {
      if (!parent.scopes.includes(scope)) return false;
      if (evaluateConstraints(child.constraints, ctx, scope, now).ok && !evaluateConstraints(parent.constraints, ctx, scope, now).ok) return false;
      if (approvalApplies(parent.constraints?.require_approval, scope, ctx) && !approvalApplies(child.constraints?.require_approval, scope, ctx)) {
        return false;
      }
      if (parent.constraints?.require_bound_operation === true && child.constraints?.require_bound_operation !== true) return false;
    }
    return true;
  }), { numRuns: 20_000 });
  t.ok(accepted > 1_000, `enough children were accepted to mean something (${accepted})`);
});

/** Every quarter hour of a week: the windows here start and end on quarter hours, so this is every case. */
const QUARTERS = Array.from({ length: 7 * 96 }, (_, q) => Date.UTC(2026, 10, 1) + q * 15 * 60_000);

t.test('per member, against a universe of requests: accepted children allow nothing more (time windows: exactly)', async (t) => {
  const only = (c: Constraints): Grant => ({ scopes: ['data:read'], constraints: c, expiresAt: null });
  const allows = (c: Constraints, ctx: object, now: number): boolean => evaluateConstraints(c, ctx, 'data:read', now).ok;
  const pairs = <T>(arb: fc.Arbitrary<T>, wrap: (x: T) => Constraints, universe: object[], exact: boolean, instants = QUARTERS.slice(0, 1)): number => {
    let accepted = 0;
    fc.assert(fc.property(arb, arb, (a, b) => {
      const ok = checkNarrowing(only(wrap(a)), only(wrap(b))).ok;
      const wider = instants.some((now) => universe.some((ctx) => allows(wrap(a), ctx, now) && !allows(wrap(b), ctx, now)));
      if (ok) accepted += 1;
      return exact ? ok === !wider : !ok || !wider;
    }), { numRuns: instants.length > 1 ? 300 : 2_000 });
    return accepted;
  };
  const windows = fc.record({ start: hhmm, end: hhmm, days: someOf(DAY_NAMES) }, { requiredKeys: ['start', 'end'] }).filter((w) => w.start !== w.end);
  t.ok(pairs(windows, (w) => ({ time_window: w }), [{}], true, QUARTERS) > 0, 'time windows');
  t.ok(pairs(someOf(PREFIXES), (p) => ({ path_prefixes: p }), PATHS.map((path) => ({ path })), false) > 100, 'path prefixes');
  t.ok(pairs(someOf(CIDRS), (c) => ({ client_ips: c }), IPS.map((client_ip) => ({ client_ip })), false) > 100, 'client addresses');
  t.ok(pairs(someOf(METHODS), (m) => ({ methods: m }), METHODS.map((method) => ({ method })), true) > 100, 'methods (exactly)');
  t.ok(pairs(someOf(TENANTS), (x) => ({ tenants: x }), TENANTS.map((tenant) => ({ tenant })), true) > 100, 'tenants (exactly)');
});

t.test('a grant narrows itself, and a child with more constraints narrows its parent', async (t) => {
  fc.assert(fc.property(grant, (g) => checkNarrowing(g, g).ok), { numRuns: 2_000 });
  fc.assert(fc.property(grant, constraints, (g, extra) => checkNarrowing({ ...g, constraints: { ...extra, ...g.constraints } }, g).ok),
    { numRuns: 2_000 });
  t.pass();
});

const parent: Grant = {
  scopes: ['data:read', 'payments:send'], expiresAt: Date.UTC(2027, 0, 1),
  constraints: {
    max_amount: { amount: '50.00', currency: 'USD' }, methods: ['GET', 'POST'], path_prefixes: ['/a'], client_ips: ['10.0.0.0/8'],
    tenants: ['t1'], time_window: { start: '09:00', end: '17:00', days: ['mon', 'tue'] }, require_bound_operation: true,
    require_approval: { scopes: ['payments:send'], above: { amount: '20.00', currency: 'USD' } },
    budget: { amount: '100.00', currency: 'USD', period: 'day' }, max_calls: { count: 100, period: 'hour' },
  },
};
const widen = (patch: Partial<Grant> | Partial<Constraints>, inConstraints = true): Grant => inConstraints
  ? { ...parent, constraints: { ...parent.constraints, ...(patch as Partial<Constraints>) } }
  : { ...parent, ...(patch as Partial<Grant>) };

t.test('each way of widening is refused, naming the member', async (t) => {
  t.same(checkNarrowing(parent, parent), { ok: true }, 'the parent itself');
  const cases: [string, Grant][] = [
    ['scopes', widen({ scopes: ['data:read', 'data:write'] }, false)],
    ['expires_at', widen({ expiresAt: Date.UTC(2027, 0, 2) }, false)],
    ['expires_at', widen({ expiresAt: null }, false)],
    ['max_amount', widen({ max_amount: { amount: '50.01', currency: 'USD' } })],
    ['max_amount', widen({ max_amount: { amount: '5.00', currency: 'EUR' } })],
    ['max_amount', widen({ max_amount: undefined })],
    ['methods', widen({ methods: ['GET', 'DELETE'] })],
    ['path_prefixes', widen({ path_prefixes: ['/ab'] })],
    ['client_ips', widen({ client_ips: ['11.0.0.0/8'] })],
    ['client_ips', widen({ client_ips: ['10.0.0.0/7'] })],
    ['tenants', widen({ tenants: ['t1', 't2'] })],
    ['time_window', widen({ time_window: { start: '08:59', end: '17:00', days: ['mon'] } })],
    ['time_window', widen({ time_window: { start: '09:00', end: '17:00', days: ['mon', 'wed'] } })],
    ['time_window', widen({ time_window: { start: '16:00', end: '09:30', days: ['mon'] } })],
    ['require_bound_operation', widen({ require_bound_operation: false })],
    ['require_approval', widen({ require_approval: { scopes: ['payments:send'], above: { amount: '20.01', currency: 'USD' } } })],
    ['require_approval', widen({ require_approval: undefined })],
    ['budget', widen({ budget: { amount: '100.00', currency: 'USD', period: 'month' } })],
    ['budget', widen({ budget: { amount: '100.01', currency: 'USD', period: 'day' } })],
    ['max_calls', widen({ max_calls: { count: 101, period: 'hour' } })],
    ['max_calls', widen({ max_calls: undefined })],
  ];
  for (const [member, child] of cases) {
    const r = checkNarrowing(child, parent);
    t.equal(r.ok ? undefined : r.member, member, `${member}: ${JSON.stringify(r)}`);
    t.ok(r.ok || r.detail.length > 0, 'with a reason');
  }
});

t.test('narrower children pass', async (t) => {
  const ok: Grant[] = [
    widen({ scopes: ['data:read'] }, false),
    widen({ expiresAt: Date.UTC(2026, 11, 1) }, false),
    widen({ path_prefixes: ['/a/b', '/a/c'], client_ips: ['10.1.2.0/24', '10.9.9.9'], methods: ['GET'] }),
    widen({ time_window: { start: '10:00', end: '11:00', days: ['tue'] } }),
    widen({ require_approval: { scopes: ['payments:send'] } }),
    // Without a payments scope, amounts and budgets do not apply to the child.
    { ...widen({ max_amount: undefined, budget: undefined }), scopes: ['data:read'] },
  ];
  for (const child of ok) t.same(checkNarrowing(child, parent), { ok: true }, JSON.stringify(child.constraints).slice(0, 120));
});
