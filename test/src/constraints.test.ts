/**
 * src/constraints.ts: validateConstraints (exact messages naming the
 * member), evaluateConstraints (a table per kind: allowed, denied, missing),
 * and properties checked against independent reference implementations
 * (amount comparison, IPv4 CIDR membership, time windows over the week,
 * dot segments never matching a prefix).
 */
import t from 'tap';
import fc from 'fast-check';
import { AMOUNT_RE, DAYS, amountMicros, evaluateConstraints, validateConstraints } from '../../src/constraints.js';
import type { ConstraintContext, Constraints } from '../../src/constraints.js';

const DAYS_LIST = 'sun, mon, tue, wed, thu, fri, sat';

t.test('validateConstraints: valid inputs', async (t) => {
  const valid: unknown[] = [
    {},
    { max_amount: { amount: '50.00', currency: 'USD' } },
    { max_amount: { amount: '0', currency: 'EUR' } },
    { max_amount: { amount: '999999999999999.999999', currency: 'JPY' } },
    { methods: ['GET', 'POST', 'PROPFIND'] },
    { path_prefixes: ['/', '/api/v1', '/static/'] },
    { client_ips: ['10.0.0.0/8', '192.168.1.7', '2001:db8::/32', '::1', '::ffff:10.0.0.0/104', '0.0.0.0/0'] },
    { tenants: ['acme', 'acme-eu', 'a.b:c_d'] },
    { time_window: { start: '09:00', end: '17:00' } },
    { time_window: { start: '22:00', end: '02:00', days: ['fri', 'sat'] } },
    { time_window: { start: '00:00', end: '23:59', days: [...DAYS] } },
    {
      max_amount: { amount: '1', currency: 'USD' }, methods: ['GET'], path_prefixes: ['/a'], client_ips: ['10.0.0.1'],
      tenants: ['t'], time_window: { start: '01:00', end: '02:00' },
    },
  ];
  for (const c of valid) t.equal(validateConstraints(c), null, JSON.stringify(c));
});

t.test('validateConstraints: messages name the member', async (t) => {
  const table: [unknown, string][] = [
    [null, 'constraints must be an object'],
    [[], 'constraints must be an object'],
    ['methods', 'constraints must be an object'],
    [1, 'constraints must be an object'],
    [{ method: ['GET'] }, 'constraints.method is not a known constraint'],
    [{ methods: ['GET'], body_sha256: 'x' }, 'constraints.body_sha256 is not a known constraint'],
    [{ max_amount: '50' }, 'constraints.max_amount must be {amount, currency}'],
    [{ max_amount: null }, 'constraints.max_amount must be {amount, currency}'],
    [{ max_amount: ['50', 'USD'] }, 'constraints.max_amount must be {amount, currency}'],
    [{ max_amount: { amount: '5', currency: 'USD', per: 'day' } }, 'constraints.max_amount must be {amount, currency}'],
    [{ max_amount: { amount: 5, currency: 'USD' } }, 'constraints.max_amount.amount must be a decimal string like "50.00"'],
    [{ max_amount: { amount: '-5', currency: 'USD' } }, 'constraints.max_amount.amount must be a decimal string like "50.00"'],
    [{ max_amount: { amount: '5.1234567', currency: 'USD' } }, 'constraints.max_amount.amount must be a decimal string like "50.00"'],
    [{ max_amount: { amount: '05', currency: 'USD' } }, 'constraints.max_amount.amount must be a decimal string like "50.00"'],
    [{ max_amount: { amount: '1e3', currency: 'USD' } }, 'constraints.max_amount.amount must be a decimal string like "50.00"'],
    [{ max_amount: { currency: 'USD' } }, 'constraints.max_amount.amount must be a decimal string like "50.00"'],
    [{ max_amount: { amount: '5', currency: 'usd' } }, 'constraints.max_amount.currency must be a 3-letter uppercase code'],
    [{ max_amount: { amount: '5', currency: 'US' } }, 'constraints.max_amount.currency must be a 3-letter uppercase code'],
    [{ max_amount: { amount: '5' } }, 'constraints.max_amount.currency must be a 3-letter uppercase code'],
    [{ methods: [] }, 'constraints.methods must be a non-empty array of at most 64 entries'],
    [{ methods: 'GET' }, 'constraints.methods must be a non-empty array of at most 64 entries'],
    [{ methods: null }, 'constraints.methods must be a non-empty array of at most 64 entries'],
    [{ methods: Array(65).fill('GET') }, 'constraints.methods must be a non-empty array of at most 64 entries'],
    [{ methods: ['get'] }, 'constraints.methods has an invalid entry "get"'],
    [{ methods: ['GET', 1] }, 'constraints.methods has an invalid entry 1'],
    [{ methods: ['GET POST'] }, 'constraints.methods has an invalid entry "GET POST"'],
    [{ path_prefixes: ['api'] }, 'constraints.path_prefixes has an invalid entry "api"'],
    [{ path_prefixes: ['/a/../b'] }, 'constraints.path_prefixes has an invalid entry "/a/../b"'],
    [{ path_prefixes: ['/a b'] }, 'constraints.path_prefixes has an invalid entry "/a b"'],
    [{ path_prefixes: ['/a?x=1'] }, 'constraints.path_prefixes has an invalid entry "/a?x=1"'],
    [{ path_prefixes: ['/a#x'] }, 'constraints.path_prefixes has an invalid entry "/a#x"'],
    [{ path_prefixes: ['/a%2fb'] }, 'constraints.path_prefixes has an invalid entry "/a%2fb"'],
    [{ path_prefixes: ['/a\\b'] }, 'constraints.path_prefixes has an invalid entry "/a\\\\b"'],
    [{ path_prefixes: ['/' + 'a'.repeat(512)] }, `constraints.path_prefixes has an invalid entry "/${'a'.repeat(139)}"`],
    [{ client_ips: ['10.0.0.0/33'] }, 'constraints.client_ips has an invalid entry "10.0.0.0/33"'],
    [{ client_ips: ['::1/129'] }, 'constraints.client_ips has an invalid entry "::1/129"'],
    [{ client_ips: ['1.2.3'] }, 'constraints.client_ips has an invalid entry "1.2.3"'],
    [{ client_ips: ['10.0.0.0/8/8'] }, 'constraints.client_ips has an invalid entry "10.0.0.0/8/8"'],
    [{ client_ips: ['10.0.0.0/'] }, 'constraints.client_ips has an invalid entry "10.0.0.0/"'],
    [{ client_ips: ['example.com'] }, 'constraints.client_ips has an invalid entry "example.com"'],
    [{ client_ips: [''] }, 'constraints.client_ips has an invalid entry ""'],
    [{ tenants: [''] }, 'constraints.tenants has an invalid entry ""'],
    [{ tenants: ['a b'] }, 'constraints.tenants has an invalid entry "a b"'],
    [{ tenants: ['t'.repeat(129)] }, `constraints.tenants has an invalid entry "${'t'.repeat(129)}"`],
    [{ time_window: '09:00-17:00' }, 'constraints.time_window must be an object'],
    [{ time_window: null }, 'constraints.time_window must be an object'],
    [{ time_window: { start: '09:00', end: '17:00', tz: 'UTC' } }, 'constraints.time_window allows only days, start, end'],
    [{ time_window: { start: '9:00', end: '17:00' } }, 'constraints.time_window.start must be HH:MM (UTC)'],
    [{ time_window: { end: '17:00' } }, 'constraints.time_window.start must be HH:MM (UTC)'],
    [{ time_window: { start: '09:00', end: '24:00' } }, 'constraints.time_window.end must be HH:MM (UTC)'],
    [{ time_window: { start: '09:00', end: '17:60' } }, 'constraints.time_window.end must be HH:MM (UTC)'],
    [{ time_window: { start: '09:00', end: '09:00' } }, 'constraints.time_window must not be empty'],
    [{ time_window: { start: '09:00', end: '17:00', days: [] } }, `constraints.time_window.days must be a non-empty array of ${DAYS_LIST}`],
    [{ time_window: { start: '09:00', end: '17:00', days: ['monday'] } }, `constraints.time_window.days must be a non-empty array of ${DAYS_LIST}`],
    [{ time_window: { start: '09:00', end: '17:00', days: 'mon' } }, `constraints.time_window.days must be a non-empty array of ${DAYS_LIST}`],
    [{ time_window: { start: '09:00', end: '17:00', days: ['MON'] } }, `constraints.time_window.days must be a non-empty array of ${DAYS_LIST}`],
  ];
  for (const [c, msg] of table) t.equal(validateConstraints(c), msg, JSON.stringify(c)?.slice(0, 80));
  t.equal(validateConstraints(JSON.parse('{"__proto__": {"methods": ["GET"]}}')), 'constraints.__proto__ is not a known constraint');
});

const ev = (c: Constraints | null | undefined, ctx: ConstraintContext | undefined, scope = 'data:read', now = Date.UTC(2030, 0, 4, 10)) =>
  evaluateConstraints(c, ctx, scope, now);
const OK = { ok: true };
const denied = (constraint: string, missing = false) => ({ ok: false, constraint, missing });

t.test('evaluateConstraints: table', async (t) => {
  const m = { max_amount: { amount: '50.00', currency: 'USD' } };
  const rows: [Constraints | null | undefined, ConstraintContext | undefined, string, object, string][] = [
    [null, undefined, 'data:read', OK, 'no constraints'],
    [undefined, { method: 'DELETE' }, 'data:read', OK, 'no constraints, any context'],
    [{}, undefined, 'data:read', OK, 'empty constraints'],
    // max_amount
    [m, { amount: '50.00', currency: 'USD' }, 'payments:send', OK, 'equal'],
    [m, { amount: '50', currency: 'USD' }, 'payments:send', OK, 'equal, other spelling'],
    [m, { amount: '49.999999', currency: 'USD' }, 'payments:send', OK, 'under'],
    [m, { amount: '50.000001', currency: 'USD' }, 'payments:send', denied('max_amount'), 'over by one micro'],
    [m, { amount: '50.00', currency: 'EUR' }, 'payments:send', denied('max_amount'), 'wrong currency'],
    [m, { amount: 'abc', currency: 'USD' }, 'payments:send', denied('max_amount'), 'not an amount'],
    [m, { currency: 'USD' }, 'payments:send', denied('max_amount', true), 'amount missing'],
    [m, { amount: '1' }, 'payments:refund', denied('max_amount', true), 'currency missing'],
    [m, undefined, 'payments:read', denied('max_amount', true), 'no context, payments scope'],
    [m, undefined, 'data:read', OK, 'max_amount ignores other scopes'],
    [m, undefined, 'custom:payments', OK, 'custom:payments is not payments:*'],
    // methods
    [{ methods: ['GET'] }, { method: 'GET' }, 'data:read', OK, 'listed'],
    [{ methods: ['GET'] }, { method: 'get' }, 'data:read', OK, 'ASCII case-insensitive'],
    [{ methods: ['GET'] }, { method: 'POST' }, 'data:read', denied('methods'), 'not listed'],
    [{ methods: ['POST'] }, { method: 'po\u017Ft' }, 'data:read', denied('methods'), 'long s does not upper-case into POST'],
    [{ methods: ['GET'] }, { method: '' }, 'data:read', denied('methods'), 'empty'],
    [{ methods: ['GET'] }, {}, 'data:read', denied('methods', true), 'missing'],
    // path_prefixes
    [{ path_prefixes: ['/a'] }, { path: '/a' }, 'data:read', OK, 'exact'],
    [{ path_prefixes: ['/a'] }, { path: '/a/' }, 'data:read', OK, 'with slash'],
    [{ path_prefixes: ['/a'] }, { path: '/a/b/c.txt' }, 'data:read', OK, 'below'],
    [{ path_prefixes: ['/a/'] }, { path: '/a/b' }, 'data:read', OK, 'slash-terminated prefix'],
    [{ path_prefixes: ['/'] }, { path: '/anything' }, 'data:read', OK, 'root prefix'],
    [{ path_prefixes: ['/a'] }, { path: '/ab' }, 'data:read', denied('path_prefixes'), 'segment boundary'],
    [{ path_prefixes: ['/a/'] }, { path: '/a' }, 'data:read', denied('path_prefixes'), '/a/ does not cover /a'],
    [{ path_prefixes: ['/a'] }, { path: '/a/../b' }, 'data:read', denied('path_prefixes'), 'dot-dot'],
    [{ path_prefixes: ['/a'] }, { path: '/a/..' }, 'data:read', denied('path_prefixes'), 'trailing dot-dot'],
    [{ path_prefixes: ['/a'] }, { path: '/a/./b' }, 'data:read', denied('path_prefixes'), 'dot segment'],
    [{ path_prefixes: ['/a'] }, { path: '/a/%2E%2e/b' }, 'data:read', denied('path_prefixes'), 'encoded dot-dot'],
    [{ path_prefixes: ['/a'] }, { path: '/a/.%2e/b' }, 'data:read', denied('path_prefixes'), 'half-encoded dot-dot'],
    [{ path_prefixes: ['/a'] }, { path: '/a/..;/b' }, 'data:read', denied('path_prefixes'), 'dot-dot with params'],
    [{ path_prefixes: ['/a'] }, { path: '/a/x%2F..%2Fb' }, 'data:read', denied('path_prefixes'), 'encoded slash'],
    [{ path_prefixes: ['/a'] }, { path: '/a/x\\..\\b' }, 'data:read', denied('path_prefixes'), 'backslash'],
    [{ path_prefixes: ['/a'] }, { path: '/a/...' }, 'data:read', denied('path_prefixes'), 'a segment of three dots, which the gateway refuses too'],
    [{ path_prefixes: ['/a'] }, { path: '/a/.well-known' }, 'data:read', OK, 'dot-prefixed name'],
    [{ path_prefixes: ['/a'] }, { path: '/a/b..c' }, 'data:read', OK, 'dots inside a name'],
    [{ path_prefixes: ['/a'] }, { path: '' }, 'data:read', denied('path_prefixes'), 'empty'],
    [{ path_prefixes: ['/a'] }, {}, 'data:read', denied('path_prefixes', true), 'missing'],
    // client_ips
    [{ client_ips: ['10.0.0.0/8'] }, { client_ip: '10.9.8.7' }, 'data:read', OK, 'IPv4 CIDR'],
    [{ client_ips: ['10.0.0.0/8'] }, { client_ip: '::ffff:10.9.8.7' }, 'data:read', OK, 'mapped'],
    [{ client_ips: ['10.0.0.0/8'] }, { client_ip: '::FFFF:10.9.8.7' }, 'data:read', OK, 'mapped, uppercase'],
    [{ client_ips: ['10.0.0.0/8'] }, { client_ip: '11.0.0.0' }, 'data:read', denied('client_ips'), 'outside'],
    [{ client_ips: ['10.0.0.0/8'] }, { client_ip: '::ffff:11.0.0.0' }, 'data:read', denied('client_ips'), 'mapped outside'],
    [{ client_ips: ['10.0.0.0/8'] }, { client_ip: '10.0.0' }, 'data:read', denied('client_ips'), 'malformed'],
    [{ client_ips: ['2001:db8::/32'] }, { client_ip: '2001:db8:ffff::1' }, 'data:read', OK, 'IPv6 CIDR'],
    [{ client_ips: ['2001:db8::/32'] }, { client_ip: '2001:db9::1' }, 'data:read', denied('client_ips'), 'IPv6 outside'],
    [{ client_ips: ['0.0.0.0/0'] }, { client_ip: '::1' }, 'data:read', denied('client_ips'), 'IPv4 any excludes IPv6'],
    [{ client_ips: ['192.168.1.7'] }, { client_ip: '192.168.1.7' }, 'data:read', OK, 'single'],
    [{ client_ips: ['192.168.1.7'] }, { client_ip: '192.168.1.70' }, 'data:read', denied('client_ips'), 'single, other'],
    [{ client_ips: ['10.0.0.0/8'] }, {}, 'data:read', denied('client_ips', true), 'missing'],
    // tenants
    [{ tenants: ['acme'] }, { tenant: 'acme' }, 'data:read', OK, 'listed'],
    [{ tenants: ['acme'] }, { tenant: 'Acme' }, 'data:read', denied('tenants'), 'case-sensitive'],
    [{ tenants: ['acme'] }, { tenant: 'acme ' }, 'data:read', denied('tenants'), 'whitespace'],
    [{ tenants: ['acme'] }, {}, 'data:read', denied('tenants', true), 'missing'],
    // order: the first failing constraint is reported
    [{ ...m, methods: ['GET'], tenants: ['t'] }, undefined, 'payments:send', denied('max_amount', true), 'order 1'],
    [{ ...m, methods: ['GET'], tenants: ['t'] }, { amount: '1', currency: 'USD' }, 'payments:send', denied('methods', true), 'order 2'],
    [{ ...m, methods: ['GET'], tenants: ['t'] }, { amount: '1', currency: 'USD', method: 'GET' }, 'payments:send', denied('tenants', true), 'order 3'],
    [{ ...m, methods: ['GET'], tenants: ['t'] }, { amount: '1', currency: 'USD', method: 'GET', tenant: 't' }, 'payments:send', OK, 'all satisfied'],
  ];
  for (const [c, ctx, scope, want, msg] of rows) t.same(ev(c, ctx, scope), want, msg);
});

t.test('evaluateConstraints: time_window', async (t) => {
  // 2030-01-04 is a Friday.
  const at = (iso: string) => Date.parse(iso);
  const w = (x: object) => ({ time_window: x }) as Constraints;
  const rows: [Constraints, string, boolean][] = [
    [w({ start: '09:00', end: '17:00' }), '2030-01-04T09:00:00.000Z', true],
    [w({ start: '09:00', end: '17:00' }), '2030-01-04T08:59:59.999Z', false],
    [w({ start: '09:00', end: '17:00' }), '2030-01-04T16:59:59.999Z', true],
    [w({ start: '09:00', end: '17:00' }), '2030-01-04T17:00:00.000Z', false],
    [w({ start: '09:00', end: '17:00', days: ['fri'] }), '2030-01-04T12:00:00.000Z', true],
    [w({ start: '09:00', end: '17:00', days: ['thu', 'sat'] }), '2030-01-04T12:00:00.000Z', false],
    [w({ start: '22:00', end: '02:00' }), '2030-01-04T23:00:00.000Z', true],
    [w({ start: '22:00', end: '02:00' }), '2030-01-04T01:59:00.000Z', true],
    [w({ start: '22:00', end: '02:00' }), '2030-01-04T02:00:00.000Z', false],
    [w({ start: '22:00', end: '02:00' }), '2030-01-04T12:00:00.000Z', false],
    [w({ start: '22:00', end: '02:00', days: ['fri'] }), '2030-01-04T23:00:00.000Z', true],
    [w({ start: '22:00', end: '02:00', days: ['fri'] }), '2030-01-05T01:00:00.000Z', true],
    [w({ start: '22:00', end: '02:00', days: ['fri'] }), '2030-01-04T01:00:00.000Z', false],
    [w({ start: '22:00', end: '02:00', days: ['thu'] }), '2030-01-04T01:00:00.000Z', true],
    [w({ start: '00:00', end: '00:01' }), '2030-01-04T00:00:59.999Z', true],
    [w({ start: '23:59', end: '00:00' }), '2030-01-04T23:59:30.000Z', true],
    [w({ start: '23:59', end: '00:00' }), '2030-01-04T00:00:00.000Z', false],
  ];
  for (const [c, iso, ok] of rows) t.same(evaluateConstraints(c, undefined, 'data:read', at(iso)), ok ? OK : denied('time_window'), `${JSON.stringify(c.time_window)} at ${iso}`);
});

t.test('property: amount comparison matches a string-based reference', async (t) => {
  const amount = fc.tuple(fc.bigInt({ min: 0n, max: 10n ** 15n - 1n }), fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }))
    .map(([i, f]) => (f === undefined ? `${i}` : `${i}.${f}`));
  const cmp = (a: string, b: string): number => { // independent: compare integer parts by length, then digits; then padded fractions
    const [ai = '', af = ''] = a.split('.');
    const [bi = '', bf = ''] = b.split('.');
    if (ai.length !== bi.length) return ai.length - bi.length;
    if (ai !== bi) return ai < bi ? -1 : 1;
    const x = af.padEnd(6, '0');
    const y = bf.padEnd(6, '0');
    return x === y ? 0 : x < y ? -1 : 1;
  };
  fc.assert(fc.property(amount, amount, (a, max) => {
    if (!AMOUNT_RE.test(a) || !AMOUNT_RE.test(max)) return true;
    const r = evaluateConstraints({ max_amount: { amount: max, currency: 'USD' } }, { amount: a, currency: 'USD' }, 'payments:send', 0);
    return r.ok === (cmp(a, max) <= 0) && (amountMicros(a) <= amountMicros(max)) === r.ok;
  }), { numRuns: 2000 });
  t.pass('amount comparison');
});

t.test('property: IPv4 CIDR membership matches integer arithmetic, mapped or not', async (t) => {
  const ip = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255));
  const int = (x: number[]): number => ((x[0]! << 24) >>> 0) + (x[1]! << 16) + (x[2]! << 8) + x[3]!;
  fc.assert(fc.property(ip, ip, fc.nat(32), (a, net, bits) => {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    const inside = ((int(a) & mask) >>> 0) === ((int(net) & mask) >>> 0);
    const c: Constraints = { client_ips: [`${net.join('.')}/${bits}`] };
    const plain = evaluateConstraints(c, { client_ip: a.join('.') }, 'data:read', 0).ok;
    const mapped = evaluateConstraints(c, { client_ip: `::ffff:${a.join('.')}` }, 'data:read', 0).ok;
    return plain === inside && mapped === inside;
  }), { numRuns: 2000 });
  t.pass('CIDR membership');
});

t.test('property: time windows match a week-minute reference', async (t) => {
  const hhmm = fc.tuple(fc.nat(23), fc.nat(59)).map(([h, m]) => `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`);
  const WEEK = 7 * 1440;
  const mins = (s: string): number => Number(s.slice(0, 2)) * 60 + Number(s.slice(3));
  const sunday = Date.UTC(2030, 0, 6); // a Sunday, 00:00 UTC
  fc.assert(fc.property(hhmm, hhmm, fc.subarray([...DAYS], { minLength: 1 }), fc.boolean(), fc.nat(WEEK * 60_000 - 1), (start, end, days, allDays, offset) => {
    if (start === end) return true;
    const len = (mins(end) - mins(start) + 1440) % 1440;
    const now = sunday + 7 * 86_400_000 * 3 + offset;
    const tWeek = Math.floor(offset / 60_000);
    // The window opening on day d covers [d*1440 + start, d*1440 + start + len) minutes of the week (wrapping).
    const open = (allDays ? [...DAYS] : days).some((d) => ((tWeek - (DAYS.indexOf(d) * 1440 + mins(start))) % WEEK + WEEK) % WEEK < len);
    const tw = allDays ? { start, end } : { start, end, days };
    return evaluateConstraints({ time_window: tw }, undefined, 'data:read', now).ok === open;
  }), { numRuns: 3000 });
  t.pass('time windows');
});

t.test('property: a path with a dot segment never matches, a clean path below the prefix always does', async (t) => {
  // Clean segments as the gateway passes them: no segment begins or ends with `..` (src/path.ts).
  const seg = fc.stringMatching(/^[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,11}$/).filter((s) => !s.startsWith('..') && !s.endsWith('..'));
  const dot = fc.constantFrom('..', '.', '%2e%2e', '%2E.', '.%2e', '..;x');
  fc.assert(fc.property(fc.array(seg, { maxLength: 4 }), dot, fc.array(seg, { maxLength: 4 }), (before, d, after) => {
    const path = ['/api', ...before, d, ...after].join('/');
    const clean = ['/api', ...before, ...after].join('/');
    const c: Constraints = { path_prefixes: ['/api'] };
    const r = evaluateConstraints(c, { path }, 'data:read', 0);
    return !r.ok && evaluateConstraints(c, { path: clean }, 'data:read', 0).ok;
  }), { numRuns: 1000 });
  t.pass('dot segments');
});

t.test('property: arbitrary context strings never throw; a constrained certificate never allows a missing member', async (t) => {
  const full: Constraints = {
    max_amount: { amount: '10', currency: 'USD' }, methods: ['GET'], path_prefixes: ['/a'], client_ips: ['10.0.0.0/8', '::1'], tenants: ['t'],
  };
  const str = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('GET', '/a/b', '10.1.1.1', '::1', 't', '5', 'USD', 'fe80::1%eth0', '::ffff:10.0.0.1'));
  const key = fc.constantFrom('method', 'path', 'client_ip', 'tenant', 'amount', 'currency');
  fc.assert(fc.property(fc.dictionary(key, str), (ctx) => {
    const r = evaluateConstraints(full, ctx as ConstraintContext, 'payments:send', 0);
    const complete = ['method', 'path', 'client_ip', 'tenant', 'amount', 'currency'].every((k) => k in ctx);
    return complete || !r.ok;
  }), { numRuns: 2000 });
  t.pass('no throw, no allow with missing context');
});
