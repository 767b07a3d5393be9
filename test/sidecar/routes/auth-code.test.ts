/**
 * Sign-in by e-mail code end to end over real HTTP on 127.0.0.1: codes sent
 * to a real SMTP receiver, the full flow to logout, every refusal of a code
 * (wrong, expired, locked, reused, replaced), the cookies' attributes, and no
 * token in any response body. Sessions and CSRF are in auth-session.test.ts;
 * routing, body and rate-limit refusals in auth-requests.test.ts.
 */
import t from 'tap';
import { Client, expectError, startSidecar } from '../../helpers/sidecar.js';
import type { Res, TestSidecar } from '../../helpers/sidecar.js';
import { emailMaker } from './fixtures/common.js';

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

const email = emailMaker('');

t.test('account plane: e-mail codes', async (t) => {
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
