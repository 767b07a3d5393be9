/**
 * Sessions over real HTTP on 127.0.0.1: the CSRF double-submit and each of its
 * refusals, parallel refreshes, idle expiry and the absolute lifetime a
 * refresh cannot pass, and garbage session cookies.
 */
import t from 'tap';
import { Client, expectError, login, startSidecar } from '../../helpers/sidecar.js';
import { emailMaker } from './fixtures/common.js';

const SIXTEEN_MIN = 16 * 60_000;

const email = emailMaker('');

t.test('account plane: sessions and CSRF', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

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
});
