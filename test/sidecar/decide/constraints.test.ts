/**
 * Each constraint kind through the real server, allowed and denied:
 * max_amount, methods, path_prefixes, client_ips, tenants, time_window
 * (driven by the sidecar clock, including a window spanning midnight and
 * day lists). A missing context denies and never allows.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, verify } from './helpers.js';

/** Thursday 2030-01-03 08:00 UTC (2030-01-01 is a Tuesday). */
const T0 = Date.UTC(2030, 0, 3, 8, 0, 0);

let sc: TestSidecar;
t.before(async () => {
  sc = await startSidecar();
  sc.clock.t = T0;
});
t.teardown(async () => { await sc.close(); });

/** Verifies a fresh bundle with `context` (undefined = no context member). */
async function check(f: Flow, scope: string, context: Record<string, string> | undefined) {
  return verify(f.platform, await bundleFor(f), scope, context);
}

t.test('max_amount: payments scopes only, amount at/over/under the limit, currency', async (t) => {
  const f = await specFlow(sc, 'pay@example.com', {
    scopes: ['payments:send', 'payments:refund', 'data:read'], approve: ['payments:send', 'payments:refund', 'data:read'],
    constraints: { max_amount: { amount: '50.00', currency: 'USD' } },
  });
  const allowed: [string, string][] = [['0', 'USD'], ['49.99', 'USD'], ['50', 'USD'], ['50.00', 'USD'], ['50.000000', 'USD'], ['0.000001', 'USD']];
  for (const [amount, currency] of allowed) {
    expectDecision(t, await check(f, 'payments:send', { amount, currency }), 'allow', 'authorized', undefined, `${amount} ${currency}`);
  }
  const denied: [Record<string, string> | undefined, string][] = [
    [{ amount: '50.000001', currency: 'USD' }, 'one micro over'],
    [{ amount: '51', currency: 'USD' }, 'over'],
    [{ amount: '999999999999999', currency: 'USD' }, 'far over'],
    [{ amount: '10.00', currency: 'EUR' }, 'wrong currency'],
    [{ amount: '10.00', currency: 'usd' }, 'lowercase currency'],
    [{ amount: '-1', currency: 'USD' }, 'negative'],
    [{ amount: '1e1', currency: 'USD' }, 'exponent'],
    [{ amount: '10.0000001', currency: 'USD' }, 'too many decimals'],
    [{ amount: ' 10', currency: 'USD' }, 'whitespace'],
    [{ amount: '010', currency: 'USD' }, 'leading zero'],
    [{ amount: '10.00' }, 'currency missing'],
    [{ currency: 'USD' }, 'amount missing'],
    [{}, 'empty context'],
    [undefined, 'no context'],
  ];
  for (const [ctx, msg] of denied) {
    expectDecision(t, await check(f, 'payments:send', ctx), 'deny', 'constraint_denied', 'max_amount', msg);
  }
  expectDecision(t, await check(f, 'payments:refund', { amount: '60', currency: 'USD' }), 'deny', 'constraint_denied', 'max_amount', 'every payments:* scope');
  expectDecision(t, await check(f, 'data:read', undefined), 'allow', 'authorized', undefined, 'max_amount does not apply to data:read');

  const denies = await auditAll(f.user, 'event_type=proof.rejected');
  t.ok(denies.length >= denied.length + 1);
  t.same(denies[0]!.details, { decision: 'deny', decision_reason: 'constraint_denied', constraint: 'max_amount',
    decision_id: denies[0]!.event_id }, 'the audit names the constraint');
});

t.test('methods, path_prefixes, client_ips, tenants', async (t) => {
  const f = await specFlow(sc, 'req@example.com', {
    approve: ['data:read'],
    constraints: {
      methods: ['GET', 'POST'], path_prefixes: ['/api/v1', '/static/'],
      client_ips: ['10.0.0.0/8', '2001:db8::/32', '192.168.1.7'], tenants: ['acme', 'acme-eu'],
    },
  });
  const base = { method: 'GET', path: '/api/v1/items', client_ip: '10.1.2.3', tenant: 'acme' };
  const allow = async (over: Record<string, string>, msg: string) =>
    expectDecision(t, await check(f, 'data:read', { ...base, ...over }), 'allow', 'authorized', undefined, msg);
  const deny = async (over: Record<string, string | undefined>, constraint: string, msg: string) => {
    const ctx = Object.fromEntries(Object.entries({ ...base, ...over }).filter(([, v]) => v !== undefined)) as Record<string, string>;
    expectDecision(t, await check(f, 'data:read', ctx), 'deny', 'constraint_denied', constraint, msg);
  };

  await allow({}, 'all satisfied');
  // methods
  await allow({ method: 'POST' }, 'POST listed');
  await deny({ method: 'DELETE' }, 'methods', 'DELETE not listed');
  await deny({ method: 'PUT' }, 'methods', 'PUT not listed');
  await deny({ method: 'GET ' }, 'methods', 'trailing space');
  await deny({ method: 'po\u017Ft' }, 'methods', 'non-ASCII letter that upper-cases to S');
  await deny({ method: undefined }, 'methods', 'method missing');
  // path_prefixes, on segment boundaries
  await allow({ path: '/api/v1' }, 'the prefix itself');
  await allow({ path: '/api/v1/' }, 'prefix with slash');
  await allow({ path: '/api/v1/a/b/c' }, 'deep below');
  await allow({ path: '/static/app.js' }, 'trailing-slash prefix');
  await deny({ path: '/api/v10' }, 'path_prefixes', 'not a segment boundary');
  await deny({ path: '/api/v1x/items' }, 'path_prefixes', 'not a segment boundary 2');
  await deny({ path: '/api' }, 'path_prefixes', 'parent');
  await deny({ path: '/static' }, 'path_prefixes', 'prefix /static/ does not cover /static');
  await deny({ path: '/API/v1/items' }, 'path_prefixes', 'case-sensitive');
  await deny({ path: '/other' }, 'path_prefixes', 'elsewhere');
  await deny({ path: '/api/v1/../admin' }, 'path_prefixes', 'dot-dot segment escapes the prefix');
  await deny({ path: '/api/v1/%2e%2e/admin' }, 'path_prefixes', 'encoded dot-dot segment');
  await deny({ path: '/api/v1/..%2fadmin' }, 'path_prefixes', 'encoded slash');
  // The gateway's normalization and refusal rules (src/path.ts): what it would refuse as
  // ambiguous_path matches no prefix here either (issue 20 §5, the exact paths of the report).
  await deny({ path: '/api/v1/%252e%252e/admin' }, 'path_prefixes', 'double-encoded dot-dot');
  await deny({ path: '/api/v1/\uFF0E\uFF0E/admin' }, 'path_prefixes', 'fullwidth dots');
  await deny({ path: '/api/v1//admin' }, 'path_prefixes', 'doubled slash');
  await deny({ path: '/api/v1/items;x=1' }, 'path_prefixes', 'a path parameter');
  await deny({ path: '/api/v1/%61dmin' }, 'path_prefixes', 'an encoded unreserved character (not the normalized form)');
  await deny({ path: '' }, 'path_prefixes', 'empty path');
  await deny({ path: undefined }, 'path_prefixes', 'path missing');
  // client_ips
  await allow({ client_ip: '10.255.255.255' }, 'in 10/8');
  await allow({ client_ip: '::ffff:10.1.2.3' }, 'IPv4-mapped IPv6 in 10/8');
  await allow({ client_ip: '2001:db8::1' }, 'in 2001:db8::/32');
  await allow({ client_ip: '2001:DB8:0:0:0:0:0:ffff' }, 'uncompressed, uppercase');
  await allow({ client_ip: '192.168.1.7' }, 'single address');
  await deny({ client_ip: '11.0.0.1' }, 'client_ips', 'outside');
  await deny({ client_ip: '::ffff:11.0.0.1' }, 'client_ips', 'mapped, outside');
  await deny({ client_ip: '2001:db9::1' }, 'client_ips', 'IPv6 outside');
  await deny({ client_ip: '192.168.1.8' }, 'client_ips', 'neighbour of the single address');
  await deny({ client_ip: '::1' }, 'client_ips', 'loopback v6');
  await deny({ client_ip: '010.1.2.3' }, 'client_ips', 'octal-looking');
  await deny({ client_ip: 'not-an-ip' }, 'client_ips', 'garbage');
  await deny({ client_ip: '' }, 'client_ips', 'empty');
  await deny({ client_ip: undefined }, 'client_ips', 'client_ip missing');
  // tenants
  await allow({ tenant: 'acme-eu' }, 'second tenant');
  await deny({ tenant: 'ACME' }, 'tenants', 'case-sensitive');
  await deny({ tenant: 'acme2' }, 'tenants', 'other tenant');
  await deny({ tenant: '' }, 'tenants', 'empty');
  await deny({ tenant: undefined }, 'tenants', 'tenant missing');
  // no context at all: the first constraint in evaluation order
  expectDecision(t, await check(f, 'data:read', undefined), 'deny', 'constraint_denied', 'methods', 'no context');
  expectDecision(t, await check(f, 'data:read', {}), 'deny', 'constraint_denied', 'methods', 'empty context');
  // scope is checked before constraints
  expectDecision(t, await check(f, 'data:write', base), 'deny', 'not_delegated', undefined, 'scope first');
});

t.test('time_window: hours, days, and a window spanning midnight', async (t) => {
  const day = await specFlow(sc, 'day@example.com', {
    approve: ['data:read'], constraints: { time_window: { start: '09:00', end: '17:00', days: ['mon', 'tue', 'wed', 'thu', 'fri'] } },
  });
  const night = await specFlow(sc, 'night@example.com', {
    approve: ['data:read'], constraints: { time_window: { start: '22:00', end: '02:00', days: ['fri'] } },
  });
  const any = await specFlow(sc, 'anyday@example.com', {
    approve: ['data:read'], constraints: { time_window: { start: '23:30', end: '00:30' } },
  });
  // [time, day window allows, night window allows, any-day window allows]
  const points: [string, boolean, boolean, boolean][] = [
    ['2030-01-03T09:00:00.000Z', true, false, false], // Thu, in hours
    ['2030-01-03T23:00:00.000Z', false, false, false], // Thu night: not a Friday window
    ['2030-01-03T23:30:00.000Z', false, false, true],
    ['2030-01-04T00:29:59.999Z', false, false, true], // Fri 00:29, still Thursday's window
    ['2030-01-04T01:00:00.000Z', false, false, false], // Fri 01:00 belongs to Thursday's night window
    ['2030-01-04T08:59:59.999Z', false, false, false],
    ['2030-01-04T09:00:00.000Z', true, false, false], // start inclusive
    ['2030-01-04T16:59:59.999Z', true, false, false],
    ['2030-01-04T17:00:00.000Z', false, false, false], // end exclusive
    ['2030-01-04T21:59:59.999Z', false, false, false],
    ['2030-01-04T22:00:00.000Z', false, true, false], // Friday's night window opens
    ['2030-01-04T23:59:59.999Z', false, true, true],
    ['2030-01-05T00:00:00.000Z', false, true, true], // Sat 00:00, Friday's window
    ['2030-01-05T01:59:59.999Z', false, true, false],
    ['2030-01-05T02:00:00.000Z', false, false, false],
    ['2030-01-05T10:00:00.000Z', false, false, false], // Saturday: not a weekday
    ['2030-01-05T22:30:00.000Z', false, false, false], // Saturday night: not Friday
    ['2030-01-06T01:00:00.000Z', false, false, false],
    ['2030-01-07T09:30:00.000Z', true, false, false], // Monday
  ];
  for (const [at, d, n, a] of points) {
    const ms = Date.parse(at);
    t.ok(ms >= sc.clock.now(), `clock only moves forward (${at})`);
    sc.clock.t = ms;
    for (const [f, want, name] of [[day, d, 'weekday 09-17'], [night, n, 'fri 22-02'], [any, a, 'daily 23:30-00:30']] as const) {
      const r = await check(f, 'data:read', undefined);
      if (want) expectDecision(t, r, 'allow', 'authorized', undefined, `${name} at ${at}`);
      else expectDecision(t, r, 'deny', 'constraint_denied', 'time_window', `${name} at ${at}`);
    }
  }
});
