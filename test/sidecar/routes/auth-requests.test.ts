/**
 * Refused requests on the account plane over real HTTP on 127.0.0.1: unknown
 * routes and methods, invalid and malformed bodies by their error codes, and
 * the send-code / verify-code rate limits per IP, per /64 and per address.
 */
import t from 'tap';
import { Client, expectError, startSidecar } from '../../helpers/sidecar.js';

t.test('account plane: refused requests', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  t.test('unknown routes and methods: JSON 404 route_not_found', async (t) => {
    const c = new Client(sc.url);
    const r = await c.get('/v1/nope');
    expectError(t, r, 404, 'route_not_found');
    expectError(t, await c.post('/v1/auth/email/nope', { email: 'x@example.com' }), 404, 'route_not_found', 'POST unknown');
    expectError(t, await c.get('/v1/auth/email/send-code'), 404, 'route_not_found', 'GET of a POST route');
    expectError(t, await c.get('/'), 404, 'route_not_found', 'root');
  });

  t.test('invalid bodies: 400 invalid_request naming the field', async (t) => {
    const c = new Client(sc.url);
    const cases: [unknown, string][] = [
      [{}, 'body.email'],
      [{ email: 5 }, 'body.email'],
      [{ email: 'x@example.com', extra: 1 }, 'body.extra'],
      [{ email: 'not-an-address' }, 'body.email'],
      [{ email: 'a@b' }, 'body.email'],
      [{ email: 'x'.repeat(300) + '@example.com' }, 'body.email'],
      [[], 'body'],
      ['just a string', 'body'],
    ];
    for (const [body, field] of cases) {
      const r = await c.post('/v1/auth/email/send-code', body);
      expectError(t, r, 400, 'invalid_request', JSON.stringify(body).slice(0, 40));
      t.equal(r.body.error.field, field, `field ${field}`);
    }
    const noBody = await c.post('/v1/auth/email/send-code', undefined, { headers: { 'content-type': 'application/json' }, raw: '' });
    expectError(t, noBody, 400, 'invalid_request', 'empty body');
    t.equal(noBody.body.error.field, 'body');
    const v = await c.post('/v1/auth/email/verify-code', { email: 'x@example.com' });
    expectError(t, v, 400, 'invalid_request', 'verify-code without code');
    t.equal(v.body.error.field, 'body.code');
    const v2 = await c.post('/v1/auth/email/verify-code', { email: 'x@example.com', code: 123456 });
    expectError(t, v2, 400, 'invalid_request', 'numeric code');
    t.equal(v2.body.error.field, 'body.code');
  });

  t.test('malformed JSON: 400 invalid_request; too large: 413 body_too_large; wrong type: 415', async (t) => {
    const c = new Client(sc.url);
    for (const raw of ['{"email":', '{email: "x@example.com"}', '{"email":"x@example.com"}}', '\u0000']) {
      const r = await c.post('/v1/auth/email/send-code', undefined, { raw });
      expectError(t, r, 400, 'invalid_request', `malformed ${JSON.stringify(raw)}`);
      t.equal(r.body.error.field, 'body');
    }
    for (const raw of ['{"email":"x@example.com","__proto__":{"admin":true}}', '{"email":"x@example.com","constructor":{"prototype":{"admin":true}}}']) {
      const r = await c.post('/v1/auth/email/send-code', undefined, { raw });
      expectError(t, r, 400, 'invalid_request', 'prototype poisoning');
      t.equal(({} as Record<string, unknown>).admin, undefined, 'Object.prototype untouched');
    }
    const big = JSON.stringify({ email: 'x@example.com', pad: 'x'.repeat(sc.config.bodyLimitBytes + 10) });
    expectError(t, await c.post('/v1/auth/email/send-code', undefined, { raw: big }), 413, 'body_too_large');
    expectError(t, await c.post('/v1/auth/email/send-code', undefined, { raw: 'email=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'unsupported_media_type');
  });
});

t.test('send-code rate limit: 429 rate_limited with Retry-After', async (t) => {
  const sc = await startSidecar({ sendCodePerMinute: 2 });
  t.teardown(() => sc.close());
  const c = new Client(sc.url);
  t.equal((await c.post('/v1/auth/email/send-code', { email: 'r1@example.com' })).status, 200);
  t.equal((await c.post('/v1/auth/email/send-code', { email: 'r2@example.com' })).status, 200);
  const r = await c.post('/v1/auth/email/send-code', { email: 'r3@example.com' });
  expectError(t, r, 429, 'rate_limited');
  const ra = r.headers.get('retry-after');
  t.match(ra ?? '', /^\d+$/, 'Retry-After is a number of seconds');
  t.ok(Number(ra) >= 1 && Number(ra) <= 60, `Retry-After ${ra} within the minute`);
  t.equal(r.body.error.retry_after, Number(ra), 'body retry_after equals the header');
  t.equal(sc.mail.messages.filter((m) => m.to === 'r3@example.com').length, 0, 'no e-mail for a refused request');
  expectError(t, await c.post('/v1/auth/email/send-code', { email: 'r1@example.com' }), 429, 'rate_limited', 'any address');
  sc.clock.advance(30_000);
  expectError(t, await c.post('/v1/auth/email/send-code', { email: 'r1@example.com' }), 429, 'rate_limited', 'same window');
  sc.clock.advance(31_000);
  t.equal((await c.post('/v1/auth/email/send-code', { email: 'r1@example.com' })).status, 200, 'a new window');
});

t.test('per-address and verify-code limits: many IPs cannot brute-force one address', async (t) => {
  // N = 2: send-code 2/min per IP and 4/hour per address; verify-code 12/min per IP.
  const sc = await startSidecar({ sendCodePerMinute: 2, trustProxy: ['127.0.0.1'] });
  t.teardown(() => sc.close());
  const c = new Client(sc.url);
  const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
  for (let i = 0; i < 4; i++) {
    t.equal((await c.post('/v1/auth/email/send-code', { email: 'victim@example.com' }, from(`198.51.100.${i}`))).status, 200, `send ${i + 1} from its own IP`);
  }
  expectError(t, await c.post('/v1/auth/email/send-code', { email: 'victim@example.com' }, from('198.51.100.99')), 429, 'rate_limited', 'the 5th code for the address in the hour, from a fresh IP');
  t.equal((await c.post('/v1/auth/email/send-code', { email: 'other@example.com' }, from('198.51.100.99'))).status, 200, 'other addresses are not affected');
  sc.clock.advance(3600_000);
  t.equal((await c.post('/v1/auth/email/send-code', { email: 'victim@example.com' }, from('198.51.100.98'))).status, 200, 'a new hour');

  for (let i = 0; i < 12; i++) {
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: `nobody${i}@example.com`, code: '000000' }, from('203.0.113.5')), 400, 'invalid_code', `guess ${i + 1}`);
  }
  expectError(t, await c.post('/v1/auth/email/verify-code', { email: 'nobody@example.com', code: '000000' }, from('203.0.113.5')), 429, 'rate_limited', 'the 13th verify-code in the minute');
  // IPv6 addresses count per /64.
  for (let i = 0; i < 2; i++) t.equal((await c.post('/v1/auth/email/send-code', { email: `v6-${i}@example.com` }, from(`2001:db8:1:2::${i + 1}`))).status, 200);
  expectError(t, await c.post('/v1/auth/email/send-code', { email: 'v6-x@example.com' }, from('2001:db8:1:2:ffff::9')), 429, 'rate_limited', 'same /64');
  t.equal((await c.post('/v1/auth/email/send-code', { email: 'v6-y@example.com' }, from('2001:db8:1:3::1'))).status, 200, 'another /64');
});
