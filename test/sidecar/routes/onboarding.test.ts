/**
 * Onboarding (spec endpoints 4 and 5) over real HTTP: profile, then account
 * type, which completes onboarding and creates the root identity.
 */
import t from 'tap';
import { Client, expectError, login, startSidecar } from '../../helpers/sidecar.js';
import { publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import { AAD } from '../../../sidecar/secrets.js';



let n = 0;
const email = (tag: string): string => `onb-${tag}-${++n}@example.com`;
const PROFILE = { first_name: 'Grace', last_name: 'Hopper' };
const platformBody = { name: 'P', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] };

t.test('onboarding', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  t.test('individual: profile → account-type completes, root identity created, alpha credits granted', async (t) => {
    const c = await login(sc, email('ind'));
    expectError(t, await c.get('/v1/service/identity'), 409, 'onboarding_incomplete', 'no identity before onboarding');
    expectError(t, await c.post('/v1/service/platforms/personal', platformBody), 409, 'onboarding_incomplete', 'no platform before onboarding');
    const p = await c.post('/v1/auth/onboarding/profile', PROFILE);
    t.equal(p.status, 200);
    t.same(p.body, { onboarding_step: 'account_type', first_name: 'Grace', last_name: 'Hopper' });
    const r = await c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' });
    t.equal(r.status, 200);
    t.equal(r.body.onboarding_step, 'complete');
    const me = await c.get('/v1/auth/session');
    t.equal(me.body.onboarding_step, 'complete');
    t.equal(me.body.account_type, 'individual');
    t.equal(me.body.first_name, 'Grace');
    const id = await c.get('/v1/service/identity');
    t.equal(id.status, 200);
    t.ok(publicKeyFromJson(id.body.root_public_key), 'root public key is a hybrid key');
    const acct = await sc.app.ctx.store.accounts.getAccount(me.body.account_id);
    t.equal(acct?.creditsMicros, sc.config.alphaCreditsMicros, 'alpha credits');
    t.ok(acct?.rootSecretEnc && acct.rootSecretEnc.length > 64, 'root secret stored sealed');
    t.equal(sc.app.ctx.box.open(acct!.rootSecretEnc!, AAD.rootSecret(acct!.id)).length, 64, 'the sealed value opens to a 64-byte seed');

    // Repeating the same type is idempotent; a different type is refused; the identity does not change.
    const again = await c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' });
    t.equal(again.status, 200);
    t.equal(again.body.onboarding_step, 'complete');
    expectError(t, await c.post('/v1/auth/onboarding/account-type', { account_type: 'organization' }), 409, 'onboarding_complete');
    t.same((await c.get('/v1/service/identity')).body, id.body, 'root identity unchanged');
    const acct2 = await sc.app.ctx.store.accounts.getAccount(me.body.account_id);
    t.equal(acct2?.creditsMicros, sc.config.alphaCreditsMicros, 'credits granted once');
    // Profile may be edited afterwards without leaving "complete".
    const p2 = await c.post('/v1/auth/onboarding/profile', { first_name: 'G', last_name: 'H' });
    t.equal(p2.body.onboarding_step, 'complete');
  });

  t.test('organization is accepted (no personal platform, no alpha credits)', async (t) => {
    const c = await login(sc, email('org'));
    await c.post('/v1/auth/onboarding/profile', PROFILE);
    const r = await c.post('/v1/auth/onboarding/account-type', { account_type: 'organization' });
    t.equal(r.status, 200);
    t.equal(r.body.onboarding_step, 'complete');
    t.equal(r.body.account_type, 'organization');
    expectError(t, await c.post('/v1/service/platforms/personal', platformBody), 403, 'account_type_not_supported');
    const me = await c.get('/v1/auth/session');
    t.equal((await sc.app.ctx.store.accounts.getAccount(me.body.account_id))?.creditsMicros, 0);
  });

  t.test('any other account type: invalid_account_type naming the field', async (t) => {
    const c = await login(sc, email('bad'));
    await c.post('/v1/auth/onboarding/profile', PROFILE);
    for (const v of ['', 'Individual', 'personal', 'team', 'individual ', 'org']) {
      const r = await c.post('/v1/auth/onboarding/account-type', { account_type: v });
      expectError(t, r, 400, 'invalid_account_type', JSON.stringify(v));
      t.equal(r.body.error.field, 'body.account_type');
    }
    const wrongType = await c.post('/v1/auth/onboarding/account-type', { account_type: 1 });
    expectError(t, wrongType, 400, 'invalid_request', 'non-string');
    t.equal(wrongType.body.error.field, 'body.account_type');
    const missing = await c.post('/v1/auth/onboarding/account-type', {});
    expectError(t, missing, 400, 'invalid_request', 'missing');
    t.equal(missing.body.error.field, 'body.account_type');
    t.equal((await c.get('/v1/auth/session')).body.onboarding_step, 'account_type', 'still not complete');
  });

  t.test('account-type before profile: onboarding_incomplete', async (t) => {
    const c = await login(sc, email('early'));
    expectError(t, await c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' }), 409, 'onboarding_incomplete');
    t.equal((await c.get('/v1/auth/session')).body.onboarding_step, 'profile');
    expectError(t, await c.get('/v1/service/identity'), 409, 'onboarding_incomplete', 'no identity was created');
  });

  t.test('profile validation: invalid_request naming the field', async (t) => {
    const c = await login(sc, email('prof'));
    const cases: [unknown, string][] = [
      [{ first_name: 'A' }, 'body.last_name'],
      [{ last_name: 'B' }, 'body.first_name'],
      [{ first_name: '', last_name: 'B' }, 'body.first_name'],
      [{ first_name: '   ', last_name: 'B' }, 'body.first_name'],
      [{ first_name: 'A', last_name: '\t' }, 'body.last_name'],
      [{ first_name: 'A', last_name: 'B', middle: 'C' }, 'body.middle'],
      [{ first_name: 'x'.repeat(101), last_name: 'B' }, 'body.first_name'],
      [{ first_name: 7, last_name: 'B' }, 'body.first_name'],
    ];
    for (const [body, field] of cases) {
      const r = await c.post('/v1/auth/onboarding/profile', body);
      expectError(t, r, 400, 'invalid_request', JSON.stringify(body).slice(0, 50));
      t.equal(r.body.error.field, field);
    }
    t.equal((await c.get('/v1/auth/session')).body.onboarding_step, 'profile', 'nothing was stored');
    const ok = await c.post('/v1/auth/onboarding/profile', { first_name: '  Ada ', last_name: ' L ' });
    t.same(ok.body, { onboarding_step: 'account_type', first_name: 'Ada', last_name: 'L' }, 'names are trimmed');
  });

  t.test('onboarding needs a session and CSRF', async (t) => {
    const anon = new Client(sc.url);
    expectError(t, await anon.post('/v1/auth/onboarding/profile', PROFILE), 401, 'auth_required');
    expectError(t, await anon.post('/v1/auth/onboarding/account-type', { account_type: 'individual' }), 401, 'auth_required');
    const c = await login(sc, email('csrf'));
    expectError(t, await c.post('/v1/auth/onboarding/profile', PROFILE, { csrf: false }), 403, 'csrf_required');
    expectError(t, await c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' }, { csrf: 'a.b' }), 403, 'csrf_invalid');
  });

  t.test('two concurrent account-type calls complete onboarding once', async (t) => {
    const c = await login(sc, email('race'));
    await c.post('/v1/auth/onboarding/profile', PROFILE);
    const rs = await Promise.all([
      c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' }),
      c.post('/v1/auth/onboarding/account-type', { account_type: 'individual' }),
    ]);
    t.same(rs.map((r) => r.status), [200, 200]);
    const me = await c.get('/v1/auth/session');
    t.equal((await sc.app.ctx.store.accounts.getAccount(me.body.account_id))?.creditsMicros, sc.config.alphaCreditsMicros, 'credits once');
  });
});
