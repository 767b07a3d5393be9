/**
 * Issue 23, "the OpenAPI document includes them": the served document's
 * `Constraints` schema accepts exactly what `validateConstraints` (the
 * approve route's validator) accepts — on a table of samples of every
 * constraint kind and on generated ones (fast-check) — except the one rule a
 * JSON Schema cannot state (a `time_window` that ends when it starts), which
 * is asserted as the known difference. Approvals and certificates, and the
 * approve body, refer to it; `decision_reason` is an enum equal to the reason
 * table of src/decisions.ts.
 */
import t from 'tap';
import fc from 'fast-check';
import { Ajv } from 'ajv';
import { startSidecar } from '../../helpers/sidecar.js';
import { DAYS, validateConstraints } from '../../../src/constraints.js';
import { BUDGET_PERIODS, CALL_PERIODS } from '../../../src/limits.js';
import { DECISION_REASONS } from '../../../src/decisions.js';
import { CONSTRAINT_SAMPLES, KNOWN_DIFFERENCES } from './openapi-constraint-samples.js';

type Doc = { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, any> } }; // eslint-disable-line @typescript-eslint/no-explicit-any

t.test('the served Constraints schema and the validator agree', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const doc = await (await fetch(`${sc.url}/openapi.json`)).json() as Doc;
  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
  const schemaAccepts = ajv.compile({ $ref: '#/components/schemas/Constraints' });
  const validatorAccepts = (c: unknown): boolean => validateConstraints(c) === null;

  // Where it is used: the approve body, approvals and certificates.
  const ref = { anyOf: [{ $ref: '#/components/schemas/Constraints' }, { type: 'null' }] };
  t.match(doc.paths['/v1/service/delegations/requests/{request_id}/approve']?.post?.requestBody?.content?.['application/json']?.schema?.properties?.constraints, ref, 'approve body');
  t.match(doc.components.schemas.Approval?.properties?.constraints, ref, 'Approval');
  t.match(doc.components.schemas.Certificate?.properties?.constraints, ref, 'Certificate');
  t.same(Object.keys(doc.components.schemas.Constraints.properties).sort(),
    ['budget', 'client_ips', 'max_amount', 'max_calls', 'methods', 'path_prefixes', 'require_approval', 'require_bound_operation', 'tenants', 'time_window'],
    'every constraint kind of docs/constraints.md');

  // The table: each sample as the validator judges it, and the known differences.
  let accepted = 0;
  for (const [label, value] of CONSTRAINT_SAMPLES) {
    const v = validatorAccepts(value);
    if (v) accepted += 1;
    t.equal(schemaAccepts(value), v, `${label}: ${v ? 'accepted' : `refused (${validateConstraints(value)})`} by both`);
  }
  t.ok(accepted >= 20 && CONSTRAINT_SAMPLES.length - accepted >= 40, `${accepted} accepted and ${CONSTRAINT_SAMPLES.length - accepted} refused samples`);
  for (const [label, value] of KNOWN_DIFFERENCES) {
    t.ok(schemaAccepts(value) && !validatorAccepts(value), `known difference, left to the validator: ${label}`);
  }

  // Generated samples: each member mostly valid (so that whole objects often are), else anything.
  const pick = <T = unknown>(...xs: T[]) => fc.constantFrom(...xs);
  const mostly = <T>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<unknown>) => fc.oneof({ weight: 8, arbitrary: good }, { weight: 1, arbitrary: bad });
  const goodAmount = fc.stringMatching(/^(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?$/);
  const amount = mostly(goodAmount, fc.oneof(pick<unknown>('0', '1.1234567', '01', '1.', '.5', '1000000000', '0.00', '-1', '1e3', 1), fc.stringMatching(/^[0-9.]{1,12}$/)));
  const currency = mostly(fc.stringMatching(/^[A-Z]{3}$/), fc.oneof(pick('usd', 'US', 'USDX'), fc.stringMatching(/^[A-Za-z]{2,4}$/)));
  const list = <T>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<unknown>) =>
    mostly(fc.array(good, { minLength: 1, maxLength: 3 }), fc.oneof(fc.constant([]), fc.array(fc.oneof(good, bad), { minLength: 1, maxLength: 3 }), fc.anything()));
  const hhmm = mostly(fc.stringMatching(/^([01][0-9]|2[0-3]):[0-5][0-9]$/), fc.oneof(pick('24:00', '8:00', '12:60'), fc.stringMatching(/^[0-9]{1,2}:[0-9]{1,2}$/)));
  const money = mostly(fc.record({ amount, currency }), fc.oneof(fc.record({ amount, currency, extra: fc.constant(1) }), fc.record({ amount }), fc.anything()));
  const octet = fc.integer({ min: 0, max: 255 });
  const scope = mostly(pick('data:read', 'payments:send', 'custom:a', 'custom:a:b', 'custom:a:b:c:d:e:f:g:h', `custom:${'a'.repeat(63)}`),
    pick('custom:A', 'custom:', 'data:*', 'nope', 'custom:a:b:c:d:e:f:g:h:i', `custom:${'a'.repeat(64)}`));
  const record = fc.record({
    max_amount: money,
    methods: list(fc.stringMatching(/^[A-Z]{1,16}$/), fc.oneof(pick('get', '', 'A'.repeat(17)), fc.stringMatching(/^[A-Za-z-]{0,17}$/))),
    path_prefixes: list(fc.oneof(pick('/', '/a/', '/.well-known', "/a!$&'()*+,=:@~b"), fc.stringMatching(/^(\/[a-z][a-z0-9._~-]{0,6}){1,3}\/?$/)),
      fc.oneof(pick('//a', '/a//b', '/./a', '/a/.', '/a/..', '/a..b', '/a%2f', '/a b', '/a;b', '/é', '/a?b', 'a', '/a\\b', '/a"b'), fc.stringMatching(/^\/[a-z./;%~]{0,8}$/))),
    client_ips: list(fc.oneof(
      pick('10.0.0.0/008', '::1', '::1/128', 'fe80::1%eth0', 'fe80::1%eth0/64', '::ffff:1.2.3.4', '2001:db8::/32'),
      fc.tuple(octet, octet, fc.option(fc.integer({ min: 0, max: 32 }))).map(([a, b, p]) => `${a}.0.0.${b}${p === null ? '' : `/${p}`}`),
    ), fc.oneof(
      pick('10.0.0.0/33', '01.2.3.4', '256.1.1.1', '::1/129', '1::2::3', '1.2.3.4/', '/8', '1.2.3.4/8/8', 'x'),
      fc.tuple(fc.integer({ min: 0, max: 300 }), fc.stringMatching(/^[0-9]{1,4}$/)).map(([a, p]) => `${a}.0.0.1/${p}`),
      fc.tuple(fc.stringMatching(/^[0-9a-f]{1,5}$/), fc.stringMatching(/^[0-9]{1,3}$/)).map(([h, p]) => `2001:db8::${h}/${p}`),
    )),
    tenants: list(fc.stringMatching(/^[A-Za-z0-9._:-]{1,12}$/), fc.oneof(pick('a b', '', 'x'.repeat(129)), fc.stringMatching(/^[A-Za-z0-9._:# -]{0,6}$/))),
    time_window: mostly(fc.record({ days: list(pick(...DAYS), pick('Mon', 'xyz')), start: hhmm, end: hhmm }, { requiredKeys: ['start', 'end'] })
      .filter((w) => w.start !== w.end), fc.anything()),
    require_bound_operation: mostly(fc.boolean(), pick<unknown>('true', 1, null)),
    require_approval: mostly(fc.record({ scopes: list(scope, fc.anything()), above: money }, { requiredKeys: ['scopes'] }), fc.anything()),
    budget: mostly(fc.record({ amount, currency, period: mostly(pick(...BUDGET_PERIODS), pick('year', 'Day', 'minute')) }),
      fc.record({ amount, currency, period: pick('day') }, { requiredKeys: [] })),
    max_calls: mostly(fc.record({ count: mostly(fc.integer({ min: 1, max: 1e9 }), pick<unknown>(0, -1, 1e9 + 1, 1.5, '3', 2 ** 53)), period: mostly(pick(...CALL_PERIODS), pick('week', 'Hour')) }),
      fc.record({ count: fc.integer(), period: pick('day') }, { requiredKeys: [] })),
  }, { requiredKeys: [] });
  // One in twenty also has a member that is no constraint kind.
  const constraints = fc.tuple(record, fc.integer({ min: 0, max: 19 })).map(([r, n]) => (n === 0 ? { ...r, unknown_kind: true } : r));
  let runs = 0;
  let valid = 0;
  fc.assert(fc.property(constraints, (c) => {
    runs += 1;
    if (validatorAccepts(c)) valid += 1;
    return schemaAccepts(c) === validatorAccepts(c);
  }), { numRuns: 4000, seed: 23 });
  t.ok(valid >= 200 && runs - valid >= 200, `generated samples: the schema and the validator agree on ${valid} accepted and ${runs - valid} refused`);
});

t.test('decision_reason is an enum of the reason table', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const doc = await (await fetch(`${sc.url}/openapi.json`)).json() as Doc;
  const reason = doc.components.schemas.VerifyResult?.properties?.decision_reason;
  t.equal(reason?.type, 'string');
  t.same(reason?.enum, Object.keys(DECISION_REASONS), 'the enum is the reason table, in its order');
});
