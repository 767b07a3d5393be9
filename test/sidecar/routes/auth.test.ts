/**
 * The account plane end to end over real HTTP on 127.0.0.1: e-mail codes sent
 * to a real SMTP receiver, the session cookie + CSRF double-submit, refresh,
 * logout, and every refusal of spec sections 5 and 7 by its error code.
 */
import t from 'tap';
import { Client, expectError, login, startSidecar } from '../../helpers/sidecar.ts';
import type { Res, TestSidecar } from '../../helpers/sidecar.ts';

type Asserts = Pick<typeof t, 'equal' | 'ok' | 'match' | 'notMatch' | 'type'>;

const SIXTEEN_MIN = 16 * 60_000;

/** Asserts the error shape `{error:{code,message,status}}`, the code, the status, JSON, and no internals. */

/** A code for `email` that differs from the one e-mailed. */
const wrongCode = (right: string): string => String((Number(right) + 1) % 1_000_000).padStart(6, '0');

/** Parses the Set-Cookie headers into name → attribute text (lowercase). */
function setCookies(res: Res): Map<string, { value: string; attrs: string }> {
  const out = new Map<string, { value: string; attrs: string }>();
  for (const c of res.headers.getSetCookie()) {
    const [pair, ...rest] = c.split(';');
    const i = pair!.indexOf('=');
    out.set(pair!.slice(0, i).trim(), { value: pair!.slice(i + 1), attrs: rest.map((s) => s.trim().toLowerCase()).join('; ') });
  }
  return out;
}

/** Sends a code and returns the code read from the SMTP receiver plus the send-code response. */
async function sendCode(sc: TestSidecar, c: Client, email: string): Promise<{ res: Res; code: string }> {
  const before = sc.mail.messages.length;
  const res = await c.post('/v1/auth/email/send-code', { email });
  if (res.status !== 200) return { res, code: '' };
  // Wait (bounded) for this message to arrive, then read the newest code.
  const deadline = Date.now() + 5000;
  while (sc.mail.messages.length <= before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return { res, code: await sc.mail.codeFor(email) };
}

let n = 0;
const email = (tag: string): string => `${tag}-${++n}@example.com`;

t.test('account plane', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const seen: Res[] = [];
  const tokens = new Set<string>();
  /** A client that records every response and every cookie value it was given. */
  const recorded = (): Client => {
    const c = new Client(sc.url);
    const orig = c.req.bind(c);
    c.req = async (...a: Parameters<Client['req']>) => {
      const r = await orig(...a);
      seen.push(r);
      for (const v of setCookies(r).values()) if (v.value.length >= 16) tokens.add(decodeURIComponent(v.value));
      return r;
    };
    return c;
  };

  t.test('the full flow: send-code → SMTP → verify-code → CSRF → onboard → refresh → logout', async (t) => {
    const addr = email('flow');
    const c = recorded();
    const { res: s, code } = await sendCode(sc, c, addr);
    t.equal(s.status, 200);
    t.same(s.body, { resent: false, status: 'code_sent' });
    const msg = sc.mail.messages.filter((m) => m.to === addr);
    t.equal(msg.length, 1, 'exactly one e-mail to the address');
    t.match(msg[0]!.raw, new RegExp(`sign-in code is ${code}`), 'the code is in the received message');
    t.match(code, /^\d{6}$/);

    const v = await c.post('/v1/auth/email/verify-code', { email: addr, code });
    t.equal(v.status, 200);
    t.equal(v.body.status, 'authenticated');
    t.equal(v.body.onboarding_step, 'profile');
    const ck = setCookies(v);
    t.ok(ck.has('service_session') && ck.has('service_csrf'), 'both cookies set');
    t.match(ck.get('service_session')!.attrs, /httponly/, 'session cookie is HttpOnly');
    t.notMatch(ck.get('service_csrf')!.attrs, /httponly/, 'CSRF cookie is readable by the page');
    for (const [name, v2] of ck) {
      t.match(v2.attrs, /samesite=strict/, `${name}: SameSite=Strict`);
      t.notMatch(v2.attrs, /secure/, `${name}: no Secure with insecureCookies`);
      t.match(v2.attrs, /path=\//, `${name}: Path=/`);
    }

    const me = await c.get('/v1/auth/session');
    t.equal(me.status, 200);
    t.equal(me.body.email, addr);
    t.equal(me.body.onboarding_step, 'profile');

    const p = await c.post('/v1/auth/onboarding/profile', { first_name: 'Ada', last_name: 'Lovelace' });
    t.equal(p.status, 200);
    t.equal(p.body.onboarding_step, 'account_type');
    const at = await c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' });
    t.equal(at.status, 200);
    t.equal(at.body.onboarding_step, 'complete');

    // Refresh: both cookies rotate; the old session token stops working.
    const oldSession = c.jar.get('service_session')!;
    const oldCsrf = c.jar.get('service_csrf')!;
    const r = await c.post('/v1/auth/refresh');
    t.equal(r.status, 200);
    t.equal(r.body.status, 'refreshed');
    t.not(c.jar.get('service_session'), oldSession, 'session cookie rotated');
    t.not(c.jar.get('service_csrf'), oldCsrf, 'CSRF cookie rotated');
    const stale = new Client(sc.url);
    stale.jar.set('service_session', oldSession);
    stale.jar.set('service_csrf', oldCsrf);
    expectError(t, await stale.get('/v1/auth/session'), 401, 'auth_required', 'old session after refresh');
    expectError(t, await stale.post('/v1/auth/refresh'), 401, 'auth_required', 'refresh with the old session');
    // The old CSRF token does not fit the new session.
    expectError(t, await c.post('/v1/auth/refresh', undefined, { csrf: oldCsrf }), 403, 'csrf_invalid', 'old CSRF header with the new session');
    t.equal((await c.get('/v1/auth/session')).status, 200, 'the new session works');

    // Logout ends the session.
    const before = c.jar.get('service_session')!;
    const beforeCsrf = c.jar.get('service_csrf')!;
    const out = await c.post('/v1/auth/logout');
    t.equal(out.status, 200);
    t.equal(out.body.status, 'logged_out');
    t.notOk(c.jar.has('service_session'), 'session cookie cleared');
    t.notOk(c.jar.has('service_csrf'), 'CSRF cookie cleared');
    expectError(t, await c.get('/v1/auth/session'), 401, 'auth_required', 'after logout, no cookie');
    const replay = new Client(sc.url);
    replay.jar.set('service_session', before);
    replay.jar.set('service_csrf', beforeCsrf);
    expectError(t, await replay.get('/v1/auth/session'), 401, 'auth_required', 'replayed cookie after logout');
    expectError(t, await replay.post('/v1/auth/refresh'), 401, 'auth_required', 'refresh after logout');
  });

  t.test('a wrong code: invalid_code with tries_left', async (t) => {
    const addr = email('wrong');
    const c = recorded();
    const { code } = await sendCode(sc, c, addr);
    const r = await c.post('/v1/auth/email/verify-code', { email: addr, code: wrongCode(code) });
    expectError(t, r, 400, 'invalid_code');
    t.equal(r.body.error.tries_left, 4);
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: addr, code: 'abcdef' }), 400, 'invalid_code', 'non-digit code');
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: email('nocode'), code }), 400, 'invalid_code', 'no code was sent to the address');
    t.notOk(c.jar.has('service_session'), 'no session cookie');
    t.equal((await c.post('/v1/auth/email/verify-code', { email: addr, code })).status, 200, 'the right code still works after 2 wrong tries');
  });

  t.test('an expired code: code_expired after 10 minutes', async (t) => {
    const addr = email('expired');
    const c = recorded();
    const { code } = await sendCode(sc, c, addr);
    sc.clock.advance(10 * 60_000 + 1_000);
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: addr, code }), 400, 'code_expired');
    t.notOk(c.jar.has('service_session'));
  });

  t.test('a code just inside its 10 minutes still works', async (t) => {
    const addr = email('fresh');
    const c = recorded();
    const { code } = await sendCode(sc, c, addr);
    sc.clock.advance(10 * 60_000 - 1_000);
    t.equal((await c.post('/v1/auth/email/verify-code', { email: addr, code })).status, 200);
  });

  t.test('five wrong tries are allowed; the sixth is code_locked even with the right code', async (t) => {
    const addr = email('locked');
    const c = recorded();
    const { code } = await sendCode(sc, c, addr);
    for (let i = 0; i < 5; i++) {
      const r = await c.post('/v1/auth/email/verify-code', { email: addr, code: wrongCode(code) });
      expectError(t, r, 400, 'invalid_code', `wrong try ${i + 1}`);
      t.equal(r.body.error.tries_left, 4 - i);
    }
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: addr, code }), 400, 'code_locked', 'sixth try, right code');
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: addr, code }), 400, 'code_locked', 'seventh try');
    t.notOk(c.jar.has('service_session'));
    // A new code unlocks.
    const again = await sendCode(sc, c, addr);
    t.equal((await c.post('/v1/auth/email/verify-code', { email: addr, code: again.code })).status, 200, 'a new code works');
  });

  t.test('wrong tries made in parallel cannot exceed the limit', async (t) => {
    const addr = email('parallel');
    const c = recorded();
    const { code } = await sendCode(sc, c, addr);
    const all = await Promise.all(Array.from({ length: 8 }, () => c.post('/v1/auth/email/verify-code', { email: addr, code: wrongCode(code) })));
    t.equal(all.filter((r) => r.body?.error?.code === 'invalid_code').length, 5);
    t.equal(all.filter((r) => r.body?.error?.code === 'code_locked').length, 3);
    expectError(t, await c.post('/v1/auth/email/verify-code', { email: addr, code }), 400, 'code_locked');
  });

  t.test('a reused code: code_used', async (t) => {
    const addr = email('reuse');
    const c = recorded();
    const { code } = await sendCode(sc, c, addr);
    t.equal((await c.post('/v1/auth/email/verify-code', { email: addr, code })).status, 200);
    const other = recorded();
    expectError(t, await other.post('/v1/auth/email/verify-code', { email: addr, code }), 400, 'code_used');
    t.notOk(other.jar.has('service_session'));
  });

  t.test('send-code again: resent true; only the newest code works; e-mail is normalized', async (t) => {
    const addr = email('resend');
    const c = recorded();
    const first = await sendCode(sc, c, addr);
    t.same(first.res.body, { resent: false, status: 'code_sent' });
    const second = await sendCode(sc, c, addr);
    t.same(second.res.body, { resent: true, status: 'code_sent' });
    if (first.code !== second.code) {
      expectError(t, await c.post('/v1/auth/email/verify-code', { email: addr, code: first.code }), 400, 'invalid_code', 'the replaced code');
    }
    t.equal((await c.post('/v1/auth/email/verify-code', { email: `  ${addr.toUpperCase()} `, code: second.code })).status, 200, 'same address in other case');
    const third = await sendCode(sc, c, addr);
    t.same(third.res.body, { resent: false, status: 'code_sent' }, 'after a login the next code is not a resend');
  });

  t.test('CSRF: missing, forged, mismatched, and from another session', async (t) => {
    const a = await login(sc, email('csrf-a'));
    const b = await login(sc, email('csrf-b'));
    const body = { first_name: 'A', last_name: 'B' };
    expectError(t, await a.post('/v1/auth/onboarding/profile', body, { csrf: false }), 403, 'csrf_required', 'no header');
    const noCookie = new Client(sc.url);
    noCookie.jar.set('service_session', a.jar.get('service_session')!);
    expectError(t, await noCookie.post('/v1/auth/onboarding/profile', body, { csrf: a.jar.get('service_csrf')! }), 403, 'csrf_required', 'header without the cookie');
    expectError(t, await a.post('/v1/auth/onboarding/profile', body, { headers: { 'x-service-csrf': '' }, csrf: false }), 403, 'csrf_required', 'empty header');

    expectError(t, await a.post('/v1/auth/onboarding/profile', body, { csrf: 'forged.token' }), 403, 'csrf_invalid', 'header differs from the cookie');
    const forged = new Client(sc.url);
    forged.jar.set('service_session', a.jar.get('service_session')!);
    forged.jar.set('service_csrf', 'AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
    expectError(t, await forged.post('/v1/auth/onboarding/profile', body), 403, 'csrf_invalid', 'forged token in header and cookie');
    forged.jar.set('service_csrf', 'no-dot-at-all');
    expectError(t, await forged.post('/v1/auth/onboarding/profile', body), 403, 'csrf_invalid', 'token without a MAC');
    forged.jar.set('service_csrf', 'x'.repeat(300));
    expectError(t, await forged.post('/v1/auth/onboarding/profile', body), 403, 'csrf_invalid', 'overlong token');

    // B's valid token, in both header and cookie, on A's session.
    const crossed = new Client(sc.url);
    crossed.jar.set('service_session', a.jar.get('service_session')!);
    crossed.jar.set('service_csrf', b.jar.get('service_csrf')!);
    expectError(t, await crossed.post('/v1/auth/onboarding/profile', body), 403, 'csrf_invalid', 'token of another session');
    expectError(t, await crossed.post('/v1/auth/refresh'), 403, 'csrf_invalid', 'refresh with a token of another session');

    // CSRF does not apply to GET; the session does.
    t.equal((await a.get('/v1/auth/session', { csrf: false })).status, 200);
    t.equal((await a.post('/v1/auth/onboarding/profile', body)).status, 200, 'the right token passes');
    // The session is checked before CSRF: no session at all is auth_required.
    expectError(t, await new Client(sc.url).post('/v1/auth/refresh', undefined, { csrf: 'x.y' }), 401, 'auth_required', 'no session');
  });

  t.test('two parallel refreshes of one session: only one new session', async (t) => {
    const c = await login(sc, email('par-refresh'));
    const twin = new Client(sc.url);
    for (const [k, v] of c.jar) twin.jar.set(k, v);
    const rs = await Promise.all([c.post('/v1/auth/refresh'), twin.post('/v1/auth/refresh')]);
    t.equal(rs.filter((r) => r.status === 200).length, 1, 'one refresh succeeds');
    for (const r of rs.filter((x) => x.status !== 200)) expectError(t, r, 401, 'auth_required');
    const alive = [await c.get('/v1/auth/session'), await twin.get('/v1/auth/session')].filter((r) => r.status === 200);
    t.equal(alive.length, 1, 'one live session');
  });

  t.test('an expired session: auth_required after 15 minutes; refresh in time extends it', async (t) => {
    const c = await login(sc, email('expiry'));
    sc.clock.advance(14 * 60_000);
    t.equal((await c.get('/v1/auth/session')).status, 200, 'alive at 14 min');
    const r = await c.post('/v1/auth/refresh');
    t.equal(r.status, 200);
    sc.clock.advance(14 * 60_000);
    t.equal((await c.get('/v1/auth/session')).status, 200, 'alive 14 min after the refresh');
    sc.clock.advance(60_000 + 1_000);
    const e = await c.get('/v1/auth/session');
    expectError(t, e, 401, 'auth_required', 'expired');
    expectError(t, await c.post('/v1/auth/refresh'), 401, 'auth_required', 'refresh of an expired session');
    expectError(t, await c.post('/v1/auth/onboarding/profile', { first_name: 'a', last_name: 'b' }), 401, 'auth_required', 'state change with an expired session');
    const other = await login(sc, email('expiry2'));
    sc.clock.advance(SIXTEEN_MIN);
    expectError(t, await other.get('/v1/auth/session'), 401, 'auth_required', 'no refresh: expired after 15 min');
  });

  t.test('refresh cannot extend a login beyond its absolute lifetime (12 h)', async (t) => {
    const c = await login(sc, email('absolute'));
    const start = sc.clock.now();
    let refreshed = 0;
    // Refresh every 14 minutes; bounded by count (60 × 14 min > 12 h).
    for (let i = 0; i < 60; i++) {
      sc.clock.advance(14 * 60_000);
      const r = await c.post('/v1/auth/refresh');
      if (r.status !== 200) {
        expectError(t, r, 401, 'auth_required', 'refresh past the absolute lifetime');
        break;
      }
      refreshed++;
      const exp = Date.parse(r.body.session_expires_at);
      t.ok(exp <= start + 12 * 3600_000, 'session expiry never passes the absolute limit');
    }
    t.ok(refreshed >= 50 && refreshed < 60, `refreshed ${refreshed} times, then refused`);
    t.ok(sc.clock.now() - start <= 12 * 3600_000 + 14 * 60_000, 'refused within one refresh interval after 12 h');
  });

  t.test('garbage session cookies: auth_required', async (t) => {
    const c = new Client(sc.url);
    expectError(t, await c.get('/v1/auth/session'), 401, 'auth_required', 'no cookie');
    c.jar.set('service_session', 'not-a-session');
    expectError(t, await c.get('/v1/auth/session'), 401, 'auth_required', 'unknown token');
    c.jar.set('service_session', 'x'.repeat(500));
    expectError(t, await c.get('/v1/auth/session'), 401, 'auth_required', 'overlong token');
  });

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

  t.test('no token in any response body; no stack trace in any error body', async (t) => {
    t.ok(seen.length > 40, `checked ${seen.length} responses`);
    t.ok(tokens.size >= 4, `${tokens.size} cookie values`);
    for (const r of seen) {
      for (const tok of tokens) if (r.text.includes(tok)) t.fail(`a response body contains a cookie value: ${r.text.slice(0, 80)}`);
      t.notMatch(r.text, /"(token|session_token|access_token|csrf|csrf_token|refresh_token)"/, 'no token member');
      if (r.status >= 400) t.notMatch(r.text, /\n\s+at |\.ts:\d+|node_modules/, 'no stack trace');
    }
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

t.test('cookies are Secure unless insecureCookies', async (t) => {
  const sc = await startSidecar({ insecureCookies: false });
  t.teardown(() => sc.close());
  const c = new Client(sc.url);
  await c.post('/v1/auth/email/send-code', { email: 'secure@example.com' });
  const code = await sc.mail.codeFor('secure@example.com');
  const v = await c.post('/v1/auth/email/verify-code', { email: 'secure@example.com', code });
  t.equal(v.status, 200);
  const ck = setCookies(v);
  t.equal(ck.size, 2);
  for (const [name, x] of ck) {
    t.match(x.attrs, /(^|; )secure(;|$)/, `${name}: Secure`);
    t.match(x.attrs, /samesite=strict/, `${name}: SameSite=Strict`);
  }
  t.match(ck.get('service_session')!.attrs, /httponly/);
  const out = await c.post('/v1/auth/logout');
  t.equal(out.status, 200);
  for (const [name, x] of setCookies(out)) t.match(x.attrs, /(^|; )secure(;|$)/, `cleared ${name}: Secure`);
});
