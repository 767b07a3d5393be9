/**
 * What an approval may do with the constraints a platform proposed (sidecar/routes/proposals.ts;
 * docs/organisations.md, "Requests from the platform"): absent keeps the proposal; given ones must
 * be at least as strict in every member the proposal constrains, kind by kind; anything looser,
 * dropping the proposal included, is 400 `constraints_loosened` naming the member. Without a
 * proposal the approver sets any valid constraints. Malformed constraints are 400
 * `invalid_constraints` with the field.
 */
import t from 'tap';
import { ServiceError } from '../../../src/errors.js';
import type { Constraints } from '../../../src/constraints.js';
import { approvedConstraints, constraintsFrom } from '../../../sidecar/routes/proposals.js';

/** The refusal `f` throws, as `{code, status, member, detail, field}`; or 'no error'. */
function refusal(f: () => unknown): Record<string, unknown> | string {
  try {
    f();
    return 'no error';
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return { code: err.code, status: err.status, message: err.message, ...err.extra };
  }
}

t.test('constraintsFrom: none, valid, malformed', async (t) => {
  for (const none of [undefined, null, {}]) {
    t.equal(constraintsFrom(none, 'body.constraints'), null, `${JSON.stringify(none)}: none`);
  }
  t.same(constraintsFrom({ tenants: ['a'] }, 'body.constraints'), { tenants: ['a'] });
  t.match(refusal(() => constraintsFrom({ methods: ['get'] }, 'body.constraints')),
    { code: 'invalid_constraints', status: 400, field: 'body.constraints',
      message: /constraints\.methods has an invalid entry "get"/ });
  t.match(refusal(() => constraintsFrom({ speed: 1 }, 'body.constraints')),
    { code: 'invalid_constraints', message: /constraints\.speed is not a known constraint/ });
  t.match(refusal(() => constraintsFrom([], 'body.constraints')), { code: 'invalid_constraints' });
});

t.test('without a proposal the approver sets any valid constraints', async (t) => {
  t.equal(approvedConstraints(undefined, null, ['data:read']), null);
  t.equal(approvedConstraints(null, null, ['data:read']), null);
  t.same(approvedConstraints({ methods: ['GET'] }, null, ['data:read']), { methods: ['GET'] });
  t.match(refusal(() => approvedConstraints({ methods: 'GET' }, null, ['data:read'])), { code: 'invalid_constraints' });
});

t.test('absent keeps the proposal; the same or an added member is fine; null or {} loosens it', async (t) => {
  const p: Constraints = { methods: ['GET', 'POST'] };
  t.equal(approvedConstraints(undefined, p, ['data:read']), p, 'absent: kept as proposed');
  t.same(approvedConstraints({ methods: ['POST', 'GET'] }, p, ['data:read']), { methods: ['POST', 'GET'] }, 'the same');
  const fewer = { methods: ['GET'], tenants: ['t1'] };
  t.same(approvedConstraints(fewer, p, ['data:read']), fewer, 'fewer methods and a member the proposal left out');
  for (const none of [null, {}]) {
    t.match(refusal(() => approvedConstraints(none, p, ['data:read'])),
      { code: 'constraints_loosened', status: 400, field: 'body.constraints', member: 'methods',
        detail: 'any method is not allowed by the proposal' },
      `${JSON.stringify(none)} drops the proposal`);
  }
  t.match(refusal(() => approvedConstraints({ methods: ['gEt'] }, p, ['data:read'])), { code: 'invalid_constraints' },
    'malformed before compared');
});

t.test('stricter and looser, kind by kind', async (t) => {
  const read = ['data:read'];
  const pay = ['payments:send'];
  const cases: [string, Constraints, Constraints, Constraints, readonly string[]][] = [
    // [member, proposal, stricter, looser, granted scopes]
    ['methods', { methods: ['GET', 'POST'] }, { methods: ['GET'] }, { methods: ['GET', 'DELETE'] }, read],
    ['tenants', { tenants: ['a', 'b'] }, { tenants: ['b'] }, { tenants: ['c'] }, read],
    ['path_prefixes', { path_prefixes: ['/trips'] }, { path_prefixes: ['/trips/paris', '/trips'] },
      { path_prefixes: ['/tripsx'] }, read],
    ['client_ips', { client_ips: ['10.0.0.0/8'] }, { client_ips: ['10.1.0.0/16', '10.2.3.4'] },
      { client_ips: ['10.0.0.0/7'] }, read],
    ['time_window', { time_window: { start: '08:00', end: '18:00' } },
      { time_window: { start: '09:00', end: '17:00', days: ['mon'] } },
      { time_window: { start: '07:59', end: '18:00' } }, read],
    ['max_amount', { max_amount: { amount: '100.00', currency: 'EUR' } },
      { max_amount: { amount: '99.99', currency: 'EUR' } },
      { max_amount: { amount: '100.000001', currency: 'EUR' } }, pay],
    ['budget', { budget: { amount: '500.00', currency: 'EUR', period: 'month' } },
      { budget: { amount: '400.00', currency: 'EUR', period: 'month' } },
      { budget: { amount: '400.00', currency: 'EUR', period: 'week' } }, pay],
    ['max_calls', { max_calls: { count: 100, period: 'day' } }, { max_calls: { count: 10, period: 'day' } },
      { max_calls: { count: 101, period: 'day' } }, read],
    ['require_bound_operation', { require_bound_operation: true }, { require_bound_operation: true },
      { require_bound_operation: false }, read],
    ['require_approval',
      { require_approval: { scopes: ['payments:send'], above: { amount: '50.00', currency: 'EUR' } } },
      { require_approval: { scopes: ['payments:send'] } },
      { require_approval: { scopes: ['payments:send'], above: { amount: '60.00', currency: 'EUR' } } }, pay],
  ];
  for (const [member, proposal, stricter, looser, scopes] of cases) {
    t.same(approvedConstraints(stricter, proposal, scopes), stricter, `${member}: stricter is approved`);
    const r = refusal(() => approvedConstraints(looser, proposal, scopes));
    t.match(r, { code: 'constraints_loosened', member, detail: /proposal/ },
      `${member}: looser is refused (${JSON.stringify(r)})`);
    t.notMatch(JSON.stringify(r), /parent/, `${member}: the refusal speaks of the proposal`);
  }
  // max_amount and budget bind payments:* scopes only: without one granted, they are not compared.
  t.same(approvedConstraints({}, { max_amount: { amount: '1.00', currency: 'EUR' } }, ['data:read']), null,
    'an amount limit of a grant without payments scopes binds nothing, so dropping it is not looser');
});
