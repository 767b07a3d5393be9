/**
 * Platform registration over real HTTP on 127.0.0.1 (spec 2.1 / 4.6): the
 * exact fields returned, the one-platform limit (also under parallel calls),
 * and every refusal of a registration body by its code. Agents, API keys and
 * connections are in platforms-keys.test.ts.
 */
import t from 'tap';
import { Client, expectError, onboard, startSidecar } from '../../helpers/sidecar.js';
import { UUID_RE } from './fixtures/common.js';
import { ISO_OFFSET_RE, email, reg, registered, secretsOf } from './fixtures/platforms.js';

const REG_FIELDS = ['api_key', 'api_key_prefix', 'connection_id', 'description', 'expires_at', 'name', 'platform_id', 'publish_state', 'signing_secret', 'surface_type', 'webhook_signing_secret'];
const SCOPES_FIELD = 'body.default_allowed_scopes';

t.test('platforms: registration', async (t) => {
  const sc = await startSidecar({ webhookAllowInsecure: false }, { startWorkers: false });
  t.teardown(() => sc.close());

  t.test('registration returns exactly the 11 fields of spec 2.1; the second platform is refused', async (t) => {
    const user = await onboard(sc, email('reg'));
    const res = await user.post('/v1/service/platforms/personal', reg(['data:read', 'payments:send', 'custom:crm:contacts']));
    t.equal(res.status, 200);
    const r = res.body;
    t.same(Object.keys(r).sort(), REG_FIELDS, 'exactly the 11 fields');
    t.match(r.platform_id, UUID_RE);
    t.match(r.connection_id, UUID_RE);
    t.not(r.platform_id, r.connection_id);
    t.equal(r.name, 'My platform');
    t.equal(r.description, '', 'empty description when none');
    t.equal(r.surface_type, 'agentic_api');
    t.equal(r.publish_state, 'draft');
    t.match(r.api_key, /^aak_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    t.equal(r.api_key_prefix, r.api_key.slice(0, 16), 'the prefix is the start of the key');
    t.ok(!r.api_key_prefix.includes(r.api_key.slice(17)), 'the prefix is not the secret part');
    t.type(r.signing_secret, 'string');
    t.type(r.webhook_signing_secret, 'string');
    t.ok(r.signing_secret.length >= 32 && r.webhook_signing_secret.length >= 32, 'secrets are long');
    t.equal(new Set(secretsOf(r)).size, 3, 'three different secrets');
    t.match(r.expires_at, ISO_OFFSET_RE, 'expires_at is a timestamp with offset');
    t.ok(Date.parse(r.expires_at) > sc.clock.now(), 'in the future');

    const again = await user.post('/v1/service/platforms/personal', { ...reg(), name: 'Another' });
    expectError(t, again, 409, 'platform_limit_reached');
    t.equal((await user.get('/v1/service/platforms')).body.platforms.length, 1, 'still one platform');

    const withDesc = await user.post('/v1/service/platforms/personal', reg(['data:read'], { description: 'x' }));
    expectError(t, withDesc, 409, 'platform_limit_reached', 'limit applies whatever the body');
  });

  t.test('description is returned when given; name is trimmed', async (t) => {
    const { r } = await registered(sc, 'desc', reg(['data:read'], { description: 'Does things', name: '  Spaced  ' }));
    t.same(Object.keys(r).sort(), REG_FIELDS);
    t.equal(r.description, 'Does things');
    t.equal(r.name, 'Spaced');
  });

  t.test('parallel registrations: exactly one platform', async (t) => {
    const user = await onboard(sc, email('race'));
    const rs = await Promise.all(Array.from({ length: 4 }, (_, i) => user.post('/v1/service/platforms/personal', { ...reg(), name: `P${i}` })));
    t.equal(rs.filter((r) => r.status === 200).length, 1, 'one succeeds');
    for (const r of rs.filter((x) => x.status !== 200)) expectError(t, r, 409, 'platform_limit_reached');
    t.equal((await user.get('/v1/service/platforms')).body.platforms.length, 1);
  });

  t.test('invalid_scopes: every case names the offending scopes', async (t) => {
    const user = await onboard(sc, email('scopes'));
    const cases: [unknown[], string[]][] = [
      [['data:read', 'unknown:read'], ['unknown:read']],
      [['data:*'], ['data:*']],
      [['*'], ['*']],
      [['custom:*'], ['custom:*']],
      [[''], ['']],
      [[5], ['5']],
      [[null], ['null']],
      [[{ scope: 'data:read' }], ['(object)']],
      [[['data:read']], ['(array)']],
      [[true], ['true']],
      [['custom:Upper'], ['custom:Upper']],
      [['custom:' + 'a'.repeat(122)], ['custom:' + 'a'.repeat(122)]],
      [['custom:a:b:c:d:e:f:g:h:i'], ['custom:a:b:c:d:e:f:g:h:i']],
      [['custom:a::b'], ['custom:a::b']],
      [['custom:'], ['custom:']],
      [['custom:a:'], ['custom:a:']],
      [['custom:-a'], ['custom:-a']],
      [['custom:a b'], ['custom:a b']],
      [['custom'], ['custom']],
      [['DATA:READ'], ['DATA:READ']],
      [[' data:read'], [' data:read']],
      [['data:read '], ['data:read ']],
      [['data'], ['data']],
      [['data:read:extra'], ['data:read:extra']],
      [['__proto__'], ['__proto__']],
      [['constructor'], ['constructor']],
      [['data:read', 'x', 'payments:send', 'data:*', 7], ['x', 'data:*', '7']],
    ];
    for (const [scopes, bad] of cases) {
      const res = await user.post('/v1/service/platforms/personal', reg(scopes));
      expectError(t, res, 400, 'invalid_scopes', JSON.stringify(scopes).slice(0, 60));
      t.same(res.body?.error?.invalid_scopes, bad, `names ${JSON.stringify(bad).slice(0, 60)}`);
      t.equal(res.body?.error?.field, SCOPES_FIELD);
    }
    const empty = await user.post('/v1/service/platforms/personal', reg([]));
    expectError(t, empty, 400, 'invalid_scopes', 'empty list');
    t.same(empty.body.error.invalid_scopes, []);
    const tooMany = await user.post('/v1/service/platforms/personal', reg(Array.from({ length: 65 }, (_, i) => `custom:s${i}`)));
    expectError(t, tooMany, 400, 'invalid_request', 'more than 64 scopes');
    t.equal(tooMany.body.error.field, SCOPES_FIELD);
    const notArray = await user.post('/v1/service/platforms/personal', reg('data:read' as never));
    expectError(t, notArray, 400, 'invalid_request', 'not an array');
    t.equal(notArray.body.error.field, SCOPES_FIELD);
    t.equal((await user.get('/v1/service/platforms')).body.platforms.length, 0, 'nothing registered by refused calls');

    // The boundaries that are valid: 8 segments, 128 characters, digits and _.- inside.
    const ok = await user.post('/v1/service/platforms/personal', reg(['custom:a:b:c:d:e:f:g:h', 'custom:' + 'a'.repeat(63) + ':' + 'b'.repeat(57), 'custom:0x_y.z-1', 'execute:tool', 'data:read', 'data:read']));
    t.equal(ok.status, 200, 'valid custom scopes accepted after refused attempts');
    const p = await user.get(`/v1/service/platforms/${ok.body.platform_id}`);
    t.same(p.body.default_allowed_scopes, ['custom:a:b:c:d:e:f:g:h', 'custom:' + 'a'.repeat(63) + ':' + 'b'.repeat(57), 'custom:0x_y.z-1', 'execute:tool', 'data:read'], 'stored deduplicated');
  });

  t.test('other registration refusals', async (t) => {
    const user = await onboard(sc, email('refuse'));
    const st = await user.post('/v1/service/platforms/personal', { ...reg(), surface_type: 'web' });
    expectError(t, st, 400, 'invalid_request', 'unknown surface_type');
    t.equal(st.body.error.field, 'body.surface_type');
    const nm = await user.post('/v1/service/platforms/personal', { surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] });
    expectError(t, nm, 400, 'invalid_request', 'missing name');
    t.equal(nm.body.error.field, 'body.name');
    const extra = await user.post('/v1/service/platforms/personal', { ...reg(), api_key: 'mine' });
    expectError(t, extra, 400, 'invalid_request', 'unknown member');
    t.equal(extra.body.error.field, 'body.api_key');
    for (const url of ['http://example.com/hook', 'http://127.0.0.1:9/hook', 'https://127.0.0.1/hook', 'https://10.1.2.3/hook', 'https://[::1]/hook', 'https://169.254.169.254/latest', 'https://user:pw@example.com/hook', 'not a url', '', 'ftp://example.com/x', 'https://example.com/' + 'a'.repeat(2100)]) {
      const r = await user.post('/v1/service/platforms/personal', reg(['data:read'], { callback_url: url }));
      if (url.length > 2048) { expectError(t, r, 400, 'invalid_request', 'overlong callback_url'); continue; }
      expectError(t, r, 400, 'invalid_callback_url', url);
      t.equal(r.body.error.field, 'body.callback_url');
    }
    expectError(t, await user.post('/v1/service/platforms/personal', reg(), { csrf: false }), 403, 'csrf_required');
    expectError(t, await new Client(sc.url).post('/v1/service/platforms/personal', reg()), 401, 'auth_required');
    const ok = await user.post('/v1/service/platforms/personal', reg(['data:read'], { callback_url: 'https://hooks.example.com/agent-authz' }));
    t.equal(ok.status, 200, 'an https callback on a public name is accepted');
    t.same(Object.keys(ok.body).sort(), REG_FIELDS, 'still exactly the 11 fields');
    t.equal((await user.get(`/v1/service/platforms/${ok.body.platform_id}`)).body.callback_url, 'https://hooks.example.com/agent-authz');
  });
});
