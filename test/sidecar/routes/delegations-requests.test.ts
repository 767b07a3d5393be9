/**
 * Delegation requests over real HTTP on 127.0.0.1: self-request, approve and
 * deny, and each of their refusals by its error code (scopes, constraints,
 * expiry, agent choice, state), with the outbox events each one leaves.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { expectError, startSidecar } from '../../helpers/sidecar.js';
import { outboxTypes } from './fixtures/common.js';
import { CONSTRAINTS, setup } from './fixtures/delegations.js';

t.test('delegations: requests and their refusals', async (t) => {
  const sc = await startSidecar({}, { startWorkers: false });
  t.teardown(() => sc.close());

  t.test('approve refusals: scope_not_requested, empty_scope, invalid_scopes, request_not_pending', async (t) => {
    const { user, reg } = await setup(sc, 'approve', 1, ['data:read', 'custom:crm']);
    const sr = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    const url = `/v1/service/delegations/requests/${sr.request_id}/approve`;
    const more = await user.post(url, { approved_scope: ['data:read', 'payments:send'] });
    expectError(t, more, 400, 'scope_not_requested');
    t.same(more.body.error.not_requested, ['payments:send']);
    t.equal(more.body.error.field, 'body.approved_scope');
    const more2 = await user.post(url, { approved_scope: ['custom:crm:write'] });
    expectError(t, more2, 400, 'scope_not_requested', 'a narrower-looking custom scope is still a different scope');
    const empty = await user.post(url, { approved_scope: [] });
    expectError(t, empty, 400, 'empty_scope');
    t.equal(empty.body.error.field, 'body.approved_scope');
    for (const bad of [['data:*'], ['*'], [''], [1], ['custom:A']]) {
      const r = await user.post(url, { approved_scope: bad });
      expectError(t, r, 400, 'invalid_scopes', JSON.stringify(bad));
      t.same(r.body.error.invalid_scopes, bad.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))));
    }
    const missing = await user.post(url, {});
    expectError(t, missing, 400, 'invalid_request', 'no approved_scope');
    t.equal(missing.body.error.field, 'body.approved_scope');
    t.equal((await user.get(`/v1/service/delegations/requests/${sr.request_id}`)).body.state, 'pending', 'still pending after refusals');
    const ok = await user.post(url, { approved_scope: ['custom:crm', 'custom:crm'] });
    t.equal(ok.status, 200);
    t.same(ok.body.approved_scope, ['custom:crm'], 'deduplicated');
    const twice = await user.post(url, { approved_scope: ['data:read'] });
    expectError(t, twice, 409, 'request_not_pending', 'approving twice');
    t.equal(twice.body.error.state, 'approved');
    expectError(t, await user.post(`/v1/service/delegations/requests/${sr.request_id}/deny`), 409, 'request_not_pending', 'deny after approve');
    expectError(t, await user.post(`/v1/service/delegations/requests/${randomUUID()}/approve`, { approved_scope: ['data:read'] }), 404, 'request_not_found');
    t.same(await outboxTypes(sc, user), ['connection.created', 'delegation.approved']);
  });

  t.test('parallel approvals of one request: one certificate', async (t) => {
    const { user, reg } = await setup(sc, 'parallel');
    const sr = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    const rs = await Promise.all(Array.from({ length: 3 }, () => user.post(`/v1/service/delegations/requests/${sr.request_id}/approve`, { approved_scope: ['data:read'] })));
    t.equal(rs.filter((r) => r.status === 200).length, 1);
    for (const r of rs.filter((x) => x.status !== 200)) expectError(t, r, 409, 'request_not_pending');
    t.equal((await user.get('/v1/service/delegations')).body.certificates.length, 1);
    t.same(await outboxTypes(sc, user), ['connection.created', 'delegation.approved']);
  });

  t.test('deny: state denied; approving afterwards is request_not_pending; event delegation.denied', async (t) => {
    const { user, reg } = await setup(sc, 'deny');
    const sr = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    expectError(t, await user.post(`/v1/service/delegations/requests/${sr.request_id}/deny`, undefined, { csrf: false }), 403, 'csrf_required');
    const bad = await user.post(`/v1/service/delegations/requests/${sr.request_id}/deny`, { reason: 'x', other: 1 });
    expectError(t, bad, 400, 'invalid_request', 'unknown member');
    const d = await user.post(`/v1/service/delegations/requests/${sr.request_id}/deny`, { reason: 'not now' });
    t.equal(d.status, 200);
    t.equal(d.body.request_id, sr.request_id);
    t.equal(d.body.state, 'denied');
    t.equal((await user.get(`/v1/service/delegations/requests/${sr.request_id}`)).body.state, 'denied');
    const ap = await user.post(`/v1/service/delegations/requests/${sr.request_id}/approve`, { approved_scope: ['data:read'] });
    expectError(t, ap, 409, 'request_not_pending', 'approve after deny');
    t.equal(ap.body.error.state, 'denied');
    expectError(t, await user.post(`/v1/service/delegations/requests/${sr.request_id}/deny`), 409, 'request_not_pending', 'deny twice');
    // Deny without a body also works.
    const sr2 = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    t.equal((await user.post(`/v1/service/delegations/requests/${sr2.request_id}/deny`)).status, 200, 'deny with no body');
    expectError(t, await user.post(`/v1/service/delegations/requests/${randomUUID()}/deny`), 404, 'request_not_found');
    t.equal((await user.get('/v1/service/delegations')).body.certificates.length, 0, 'no certificate');
    t.same(await outboxTypes(sc, user), ['connection.created', 'delegation.denied', 'delegation.denied']);
  });

  t.test('self-request: agent_required with 0 or 2 agents and no agent_id; agent_id picks', async (t) => {
    const none = await setup(sc, 'zero', 0);
    const r0 = await none.user.post('/v1/service/delegations/self-request', { connection_id: none.reg.connection_id });
    expectError(t, r0, 409, 'agent_required', '0 agents');
    const two = await setup(sc, 'two', 2);
    expectError(t, await two.user.post('/v1/service/delegations/self-request', { connection_id: two.reg.connection_id }), 409, 'agent_required', '2 agents');
    const pick = await two.user.post('/v1/service/delegations/self-request', { connection_id: two.reg.connection_id, agent_id: two.agentIds[1] });
    t.equal(pick.status, 200);
    t.equal(pick.body.agent_id, two.agentIds[1]);
    expectError(t, await two.user.post('/v1/service/delegations/self-request', { connection_id: two.reg.connection_id, agent_id: randomUUID() }), 404, 'agent_not_found', 'unknown agent');
    expectError(t, await two.user.post('/v1/service/delegations/self-request', { connection_id: two.reg.connection_id, agent_id: none.agentIds[0] ?? randomUUID() }), 404, 'agent_not_found');
    const other = await setup(sc, 'other-agent');
    expectError(t, await two.user.post('/v1/service/delegations/self-request', { connection_id: two.reg.connection_id, agent_id: other.agentIds[0] }), 404, 'agent_not_found', 'an agent of another connection');
    expectError(t, await two.user.post('/v1/service/delegations/self-request', { connection_id: randomUUID() }), 404, 'connection_not_found');
    const missing = await two.user.post('/v1/service/delegations/self-request', {});
    expectError(t, missing, 400, 'invalid_request');
    t.equal(missing.body.error.field, 'body.connection_id');
  });

  t.test('invalid_constraints and invalid_expiry', async (t) => {
    const { user, reg } = await setup(sc, 'constraints');
    const sr = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    const url = `/v1/service/delegations/requests/${sr.request_id}/approve`;
    const badConstraints: unknown[] = [
      { unknown_kind: 1 },
      { methods: [] },
      { methods: ['get'] },
      { methods: 'GET' },
      { max_amount: { amount: '-5', currency: 'USD' } },
      { max_amount: { amount: '1.5', currency: 'usd' } },
      { max_amount: { amount: 5, currency: 'USD' } },
      { path_prefixes: ['orders'] },
      { path_prefixes: ['/a/../b'] },
      { client_ips: ['10.0.0.0/33'] },
      { client_ips: ['not-an-ip'] },
      { tenants: ['has space'] },
      { time_window: { start: '25:00', end: '10:00' } },
      { time_window: { start: '10:00', end: '10:00' } },
      { time_window: { start: '08:00', end: '10:00', days: ['monday'] } },
    ];
    for (const c of badConstraints) {
      const r = await user.post(url, { approved_scope: ['data:read'], constraints: c });
      expectError(t, r, 400, 'invalid_constraints', JSON.stringify(c));
      t.equal(r.body.error.field, 'body.constraints');
    }
    expectError(t, await user.post(url, { approved_scope: ['data:read'], constraints: ['GET'] }), 400, 'invalid_request', 'constraints as an array');
    const now = sc.clock.now();
    const badExpiry = [
      new Date(now - 1_000).toISOString(),
      new Date(now).toISOString(),
      '2001-01-01T00:00:00Z',
      'tomorrow',
      '2099-13-01T00:00:00Z',
      '2099-02-30T00:00:00Z',
      '2099-01-01T25:00:00Z',
      '2099-01-01',
      '2099-01-01T00:00:00',
      String(now + 86_400_000),
      '9999-12-31T23:59:59-01:00', // year 10000 in UTC: not expressible in a certificate
      '2099-01-01T00:00:00+24:00',
      '2099-01-01T00:00:60Z',
      '2099-01-01T00:00:00.000z',
      ' 2099-01-01T00:00:00Z',
    ];
    for (const e of badExpiry) {
      const r = await user.post(url, { approved_scope: ['data:read'], expires_at: e });
      expectError(t, r, 400, 'invalid_expiry', e);
      t.equal(r.body.error.field, 'body.expires_at');
    }
    t.equal((await user.get(`/v1/service/delegations/requests/${sr.request_id}`)).body.state, 'pending');
    const exp = new Date(now + 3_600_000).toISOString();
    const ok = await user.post(url, { approved_scope: ['data:read'], constraints: CONSTRAINTS, expires_at: exp });
    t.equal(ok.status, 200);
    t.equal(ok.body.expires_at, exp);
    t.same(ok.body.constraints, CONSTRAINTS);
    const sr2 = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    const offset = await user.post(`/v1/service/delegations/requests/${sr2.request_id}/approve`, { approved_scope: ['data:read'], expires_at: '2099-06-01T12:00:00+02:00' });
    t.equal(offset.status, 200, 'an explicit offset is accepted');
    t.equal(offset.body.expires_at, '2099-06-01T10:00:00.000Z', 'and normalized to UTC');
    const sr3 = (await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id })).body;
    const last = await user.post(`/v1/service/delegations/requests/${sr3.request_id}/approve`, { approved_scope: ['data:read'], expires_at: '9999-12-31T23:59:59.999Z' });
    t.equal(last.status, 200, 'the last 4-digit-year instant is accepted');
    const lastCert = await user.get(`/v1/service/delegations/${last.body.cert_id}`);
    t.equal(lastCert.body.cert_json.payload.expires_at, '9999-12-31T23:59:59.999Z');
  });
});
