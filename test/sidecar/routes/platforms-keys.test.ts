/**
 * Agents, API keys and connections over real HTTP on 127.0.0.1: agent
 * creation (spec 2.2 / 4.7), key rotation with and without a grace period,
 * connection removal, the one 401 body for every bad key, and the list/read
 * endpoints, which show no secrets. Registration is in
 * platforms-registration.test.ts.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { Client, expectError, onboard, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Res } from '../../helpers/sidecar.js';
import { publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import { UUID_RE, outboxTypes } from './fixtures/common.js';
import { ISO_OFFSET_RE, email, reg, registered, secretsOf } from './fixtures/platforms.js';

const AGENT_FIELDS = ['agent_id', 'agent_type', 'custody_mode', 'name', 'public_key_json'];

t.test('platforms and agents: agents, keys, connections', async (t) => {
  const sc = await startSidecar({ webhookAllowInsecure: false }, { startWorkers: false });
  t.teardown(() => sc.close());

  t.test('agent creation returns exactly the flat fields of spec 2.2', async (t) => {
    const { r, api } = await registered(sc, 'agent');
    const a = await api.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'agent-1', agent_type: 'api_agent' });
    t.equal(a.status, 200);
    t.same(Object.keys(a.body).sort(), AGENT_FIELDS, 'exactly the 5 fields');
    t.match(a.body.agent_id, UUID_RE);
    t.equal(a.body.name, 'agent-1');
    t.equal(a.body.agent_type, 'api_agent');
    t.equal(a.body.custody_mode, 'custodial');
    t.same(Object.keys(a.body.public_key_json).sort(), ['alg', 'ed25519', 'ml_dsa_65']);
    t.equal(a.body.public_key_json.alg, 'hybrid-ed25519-mldsa65');
    t.ok(publicKeyFromJson(a.body.public_key_json), 'a well-formed hybrid public key');
    const b = await api.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'agent-2', agent_type: 'api_agent' });
    t.not(b.body.agent_id, a.body.agent_id);
    t.not(b.body.public_key_json.ed25519, a.body.public_key_json.ed25519, 'a fresh keypair per agent');

    const bad = await api.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'x', agent_type: 'chat_agent' });
    expectError(t, bad, 400, 'invalid_agent_type');
    t.equal(bad.body.error.field, 'body.agent_type');
    const noName = await api.post(`/v1/service/connections/${r.connection_id}/agents`, { agent_type: 'api_agent' });
    expectError(t, noName, 400, 'invalid_request');
    t.equal(noName.body.error.field, 'body.name');
    expectError(t, await api.post(`/v1/service/connections/${randomUUID()}/agents`, { name: 'x', agent_type: 'api_agent' }), 404, 'connection_not_found', 'unknown connection');

    // Another account's connection, with this account's key.
    const other = await registered(sc, 'agent-other');
    const foreign = await api.post(`/v1/service/connections/${other.r.connection_id}/agents`, { name: 'x', agent_type: 'api_agent' });
    expectError(t, foreign, 404, 'connection_not_found', 'foreign connection');
    t.equal((await other.api.get(`/v1/service/connections/${other.r.connection_id}/agents`)).body.agents.length, 0, 'no agent was created there');

    // The API key is required; a session is not a substitute.
    const anon = new Client(sc.url);
    expectError(t, await anon.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'x', agent_type: 'api_agent' }), 401, 'invalid_api_key', 'no key');
    const { user } = await registered(sc, 'agent-session');
    expectError(t, await user.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'x', agent_type: 'api_agent' }), 401, 'invalid_api_key', 'session cookie instead of a key');
  });

  t.test('key rotation: the old key stops at once, the new key works, event connection.key_rotated', async (t) => {
    const { user, r, api } = await registered(sc, 'rotate');
    t.equal((await api.get(`/v1/service/connections/${r.connection_id}/agents`)).status, 200);
    expectError(t, await user.post(`/v1/service/connections/${r.connection_id}/rotate-key`, undefined, { csrf: false }), 403, 'csrf_required');
    const rot = await user.post(`/v1/service/connections/${r.connection_id}/rotate-key`);
    t.equal(rot.status, 200);
    t.equal(rot.body.connection_id, r.connection_id);
    t.match(rot.body.api_key, /^aak_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    t.not(rot.body.api_key, r.api_key);
    t.equal(rot.body.api_key_prefix, rot.body.api_key.slice(0, 16));
    t.equal(rot.body.previous_prefix, r.api_key_prefix);
    t.equal(rot.body.previous_key_valid_until, null, 'no grace configured');
    expectError(t, await api.get(`/v1/service/connections/${r.connection_id}/agents`), 401, 'invalid_api_key', 'old key');
    expectError(t, await api.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'x', agent_type: 'api_agent' }), 401, 'invalid_api_key', 'old key, create agent');
    const next = new Client(sc.url);
    next.apiKey = rot.body.api_key;
    t.equal((await next.get(`/v1/service/connections/${r.connection_id}/agents`)).status, 200, 'new key works');
    t.equal((await next.post(`/v1/service/connections/${r.connection_id}/agents`, { name: 'x', agent_type: 'api_agent' })).status, 200);
    t.equal((await next.post('/v1/service/challenge')).status, 200);
    const rot2 = await user.post(`/v1/service/connections/${r.connection_id}/rotate-key`);
    t.equal(rot2.body.previous_prefix, rot.body.api_key_prefix);
    expectError(t, await next.get(`/v1/service/connections/${r.connection_id}/agents`), 401, 'invalid_api_key', 'second rotation retires the first rotated key');
    t.same(await outboxTypes(sc, user), ['connection.created', 'connection.key_rotated', 'connection.key_rotated']);
  });

  t.test('connection removal: keys stop working, active certificates are revoked, once', async (t) => {
    const f = await specFlow(sc, email('remove'));
    const c = f.reg.connection_id;
    const before = await f.user.get(`/v1/service/delegations/${f.certId}`);
    t.equal(before.body.status, 'approved');
    const pending = await f.user.post('/v1/service/delegations/self-request', { connection_id: c });
    t.equal(pending.status, 200, 'a pending request at removal time');
    expectError(t, await f.user.post(`/v1/service/connections/${c}/remove`, undefined, { csrf: false }), 403, 'csrf_required');
    const rm = await f.user.post(`/v1/service/connections/${c}/remove`);
    t.equal(rm.status, 200);
    t.equal(rm.body.connection_id, c);
    t.equal(rm.body.status, 'removed');
    t.match(rm.body.removed_at, ISO_OFFSET_RE);
    t.same(rm.body.revoked_cert_ids, [f.certId]);
    expectError(t, await f.platform.get(`/v1/service/connections/${c}/agents`), 401, 'invalid_api_key', 'key after removal');
    expectError(t, await f.platform.post('/v1/service/challenge'), 401, 'invalid_api_key', 'challenge after removal');
    const cert = await f.user.get(`/v1/service/delegations/${f.certId}`);
    t.equal(cert.body.status, 'revoked');
    t.equal(cert.body.revoke_reason, 'connection_removed');
    t.equal((await f.user.get(`/v1/service/connections/${c}`)).body.status, 'removed');
    const again = await f.user.post(`/v1/service/connections/${c}/remove`);
    t.equal(again.status, 200, 'removing twice is harmless');
    t.same(again.body.revoked_cert_ids, []);
    expectError(t, await f.user.post(`/v1/service/connections/${c}/rotate-key`), 404, 'connection_not_found', 'rotate after removal');
    expectError(t, await f.user.post('/v1/service/delegations/self-request', { connection_id: c }), 404, 'connection_not_found', 'self-request after removal');
    t.equal((await f.user.get(`/v1/service/delegations/requests/${pending.body.request_id}`)).body.state, 'denied', 'pending request denied');
    t.same(await outboxTypes(sc, f.user), ['connection.created', 'delegation.approved', 'delegation.revoked', 'delegation.denied', 'connection.removed']);
  });

  t.test('unknown, removed and rotated-out API keys get the same 401 body', async (t) => {
    const rotated = await registered(sc, 'same-rot');
    await rotated.user.post(`/v1/service/connections/${rotated.r.connection_id}/rotate-key`);
    const removed = await registered(sc, 'same-rm');
    await removed.user.post(`/v1/service/connections/${removed.r.connection_id}/remove`);
    const live = await registered(sc, 'same-live');
    const tamperedSecret = live.r.api_key.slice(0, -1) + (live.r.api_key.endsWith('A') ? 'B' : 'A');
    const keys: [string, string][] = [
      ['unknown well-formed', `aak_${'0'.repeat(12)}_${'A'.repeat(43)}`],
      ['malformed', 'hello'],
      ['rotated out', rotated.r.api_key],
      ['removed', removed.r.api_key],
      ['right prefix, wrong secret', tamperedSecret],
    ];
    const c = new Client(sc.url);
    const bodies: string[] = [];
    for (const [label, key] of keys) {
      const r = await c.post('/v1/service/challenge', undefined, { apiKey: key });
      expectError(t, r, 401, 'invalid_api_key', label);
      bodies.push(JSON.stringify(r.body));
    }
    const none = await c.post('/v1/service/challenge');
    expectError(t, none, 401, 'invalid_api_key', 'no key');
    bodies.push(JSON.stringify(none.body));
    t.equal(new Set(bodies).size, 1, 'all bodies identical');
    t.equal((await c.post('/v1/service/challenge', undefined, { apiKey: live.r.api_key })).status, 200, 'the live key works');
  });

  t.test('list and read endpoints show no secrets', async (t) => {
    const f = await specFlow(sc, email('lists'));
    const rot = await f.user.post(`/v1/service/connections/${f.reg.connection_id}/rotate-key`);
    f.platform.apiKey = rot.body.api_key;
    const secrets = [...secretsOf(f.reg), rot.body.api_key];
    const reads: [string, Res][] = [
      ['platforms', await f.user.get('/v1/service/platforms')],
      ['platform', await f.user.get(`/v1/service/platforms/${f.reg.platform_id}`)],
      ['connections', await f.user.get('/v1/service/connections')],
      ['connection', await f.user.get(`/v1/service/connections/${f.reg.connection_id}`)],
      ['agents', await f.user.get('/v1/service/agents')],
      ['connection agents', await f.platform.get(`/v1/service/connections/${f.reg.connection_id}/agents`)],
      ['deliveries', await f.user.get('/v1/service/webhooks/deliveries')],
      ['session', await f.user.get('/v1/auth/session')],
    ];
    for (const [label, r] of reads) {
      t.equal(r.status, 200, `${label}: 200`);
      for (const s of secrets) t.notOk(r.text.includes(s), `${label}: no secret value`);
      t.notMatch(r.text, /"(api_key|signing_secret|webhook_signing_secret|secret|secret_enc|private_key|seed|digest)"/, `${label}: no secret member`);
    }
    const [, platforms] = reads[0]!;
    t.equal(platforms.body.platforms.length, 1);
    const p = platforms.body.platforms[0];
    t.equal(p.platform_id, f.reg.platform_id);
    t.equal(p.connection_id, f.reg.connection_id);
    t.equal(p.publish_state, 'draft');
    t.same(p.default_allowed_scopes, ['data:read', 'data:write', 'payments:send']);
    t.same(reads[1]![1].body, p, 'read equals the list entry');
    const conns = reads[2]![1].body.connections;
    t.same(conns.map((x: { connection_id: string }) => x.connection_id), [f.reg.connection_id]);
    t.same(reads[3]![1].body, conns[0]);
    t.equal(conns[0].status, 'active');
    t.same(conns[0].allowed_scopes, ['data:read', 'data:write', 'payments:send']);
    const agents = reads[4]![1].body.agents;
    t.same(agents.map((a: { agent_id: string }) => a.agent_id), [f.agentId]);
    t.same(reads[5]![1].body.agents, agents, 'API-key listing equals the session listing');
    t.equal(agents[0].custody_mode, 'custodial');
    t.ok(publicKeyFromJson(agents[0].public_key_json));
    expectError(t, await f.user.get(`/v1/service/platforms/${randomUUID()}`), 404, 'platform_not_found');
    expectError(t, await f.user.get(`/v1/service/connections/${randomUUID()}`), 404, 'connection_not_found');
    expectError(t, await f.user.get('/v1/service/platforms/' + 'x'.repeat(150)), 400, 'invalid_request', 'overlong id');
    expectError(t, await new Client(sc.url).get('/v1/service/platforms'), 401, 'auth_required');
    expectError(t, await new Client(sc.url).get('/v1/service/agents'), 401, 'auth_required');
  });
});

t.test('rotation with a grace period: the old key works until the grace ends', async (t) => {
  const sc = await startSidecar({ apiKeyGraceSeconds: 60 }, { startWorkers: false });
  t.teardown(() => sc.close());
  const user = await onboard(sc, 'grace@example.com');
  const r = (await user.post('/v1/service/platforms/personal', reg())).body;
  const old = new Client(sc.url);
  old.apiKey = r.api_key;
  const rot = await user.post(`/v1/service/connections/${r.connection_id}/rotate-key`);
  t.equal(rot.status, 200);
  t.equal(Date.parse(rot.body.previous_key_valid_until), sc.clock.now() + 60_000, 'grace end is reported');
  const fresh = new Client(sc.url);
  fresh.apiKey = rot.body.api_key;
  t.equal((await old.get(`/v1/service/connections/${r.connection_id}/agents`)).status, 200, 'old key inside the grace');
  t.equal((await fresh.get(`/v1/service/connections/${r.connection_id}/agents`)).status, 200, 'new key');
  sc.clock.advance(59_000);
  t.equal((await old.post('/v1/service/challenge')).status, 200, 'old key at 59 s');
  sc.clock.advance(1_000);
  expectError(t, await old.post('/v1/service/challenge'), 401, 'invalid_api_key', 'old key at 60 s');
  sc.clock.advance(60_000);
  expectError(t, await old.get(`/v1/service/connections/${r.connection_id}/agents`), 401, 'invalid_api_key', 'old key after the grace');
  t.equal((await fresh.post('/v1/service/challenge')).status, 200, 'new key still works');

  // A second rotation inside the grace ends the first key's grace at once.
  const r2 = await user.post(`/v1/service/connections/${rot.body.connection_id}/rotate-key`);
  const third = await user.post(`/v1/service/connections/${rot.body.connection_id}/rotate-key`);
  t.equal(third.status, 200);
  expectError(t, await fresh.post('/v1/service/challenge'), 401, 'invalid_api_key', 'an older rotated key loses its grace');
  const k2 = new Client(sc.url);
  k2.apiKey = r2.body.api_key;
  t.equal((await k2.post('/v1/service/challenge')).status, 200, 'the newest previous key keeps its grace');

  // Removal ends every key, grace or not.
  await user.post(`/v1/service/connections/${r.connection_id}/remove`);
  expectError(t, await k2.post('/v1/service/challenge'), 401, 'invalid_api_key', 'grace key after removal');
});
