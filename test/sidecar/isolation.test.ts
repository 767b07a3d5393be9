/**
 * Account isolation over real HTTP: a second account gets the same 404 for
 * the first account's platform, connection, request and certificate as for
 * ids that do not exist, on every read and every state change, and nothing
 * of the first account changes.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { Client, expectError, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Res } from '../helpers/sidecar.js';



t.test('a second account cannot see or change the first account\'s resources', async (t) => {
  const sc = await startSidecar({}, { startWorkers: false });
  t.teardown(() => sc.close());
  const a = await specFlow(sc, 'iso-a@example.com');
  const b = await specFlow(sc, 'iso-b@example.com');
  // A also has a pending request, for approve / deny attempts.
  const pending = (await a.user.post('/v1/service/delegations/self-request', { connection_id: a.reg.connection_id })).body.request_id as string;
  const stateOfA = async () => JSON.stringify([
    (await a.user.get('/v1/service/platforms')).body,
    (await a.user.get('/v1/service/connections')).body,
    (await a.user.get('/v1/service/delegations/requests')).body,
    (await a.user.get('/v1/service/delegations')).body,
    (await a.user.get('/v1/service/agents')).body,
    (await a.user.get('/v1/service/webhooks/deliveries?limit=100')).body,
  ]);
  const before = await stateOfA();

  // Each call: [label, call with A's id, the same call with an id that does not exist, status, code].
  const A = a.reg;
  const cases: [string, (id: string) => Promise<Res>, string, string, number, string][] = [
    ['read platform', (id) => b.user.get(`/v1/service/platforms/${id}`), A.platform_id, randomUUID(), 404, 'platform_not_found'],
    ['read connection', (id) => b.user.get(`/v1/service/connections/${id}`), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['read request', (id) => b.user.get(`/v1/service/delegations/requests/${id}`), a.requestId, randomUUID(), 404, 'request_not_found'],
    ['read certificate', (id) => b.user.get(`/v1/service/delegations/${id}`), a.certId, `cert-${randomUUID()}`, 404, 'certificate_not_found'],
    ['approve', (id) => b.user.post(`/v1/service/delegations/requests/${id}/approve`, { approved_scope: ['data:read'] }), pending, randomUUID(), 404, 'request_not_found'],
    ['deny', (id) => b.user.post(`/v1/service/delegations/requests/${id}/deny`), pending, randomUUID(), 404, 'request_not_found'],
    ['approve decided', (id) => b.user.post(`/v1/service/delegations/requests/${id}/approve`, { approved_scope: ['data:read'] }), a.requestId, randomUUID(), 404, 'request_not_found'],
    ['revoke', (id) => b.user.post(`/v1/service/delegations/${id}/revoke`, { reason: 'x' }), a.certId, `cert-${randomUUID()}`, 404, 'certificate_not_found'],
    ['rotate', (id) => b.user.post(`/v1/service/connections/${id}/rotate-key`), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['remove', (id) => b.user.post(`/v1/service/connections/${id}/remove`), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['self-request', (id) => b.user.post('/v1/service/delegations/self-request', { connection_id: id }), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['self-request with A\'s agent', (id) => b.user.post('/v1/service/delegations/self-request', { connection_id: b.reg.connection_id, agent_id: id }), a.agentId, randomUUID(), 404, 'agent_not_found'],
    ['set callback', (id) => b.user.req('PUT', `/v1/service/platforms/${id}/callback`, { callback_url: null }), A.platform_id, randomUUID(), 404, 'platform_not_found'],
    // B's API key against A's connection and agent.
    ['create agent', (id) => b.platform.post(`/v1/service/connections/${id}/agents`, { name: 'x', agent_type: 'api_agent' }), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['list agents', (id) => b.platform.get(`/v1/service/connections/${id}/agents`), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['present on A\'s connection', (id) => b.platform.post(`/v1/service/connections/${id}/agents/${a.agentId}/present`, { challenge: 'x'.repeat(43) }), A.connection_id, randomUUID(), 404, 'connection_not_found'],
    ['present A\'s agent on B\'s connection', (id) => b.platform.post(`/v1/service/connections/${b.reg.connection_id}/agents/${id}/present`, { challenge: 'x'.repeat(43) }), a.agentId, randomUUID(), 404, 'agent_not_found'],
  ];
  for (const [label, call, foreignId, missingId, status, code] of cases) {
    const foreign = await call(foreignId);
    const missing = await call(missingId);
    expectError(t, foreign, status, code, `${label} (A's id)`);
    expectError(t, missing, status, code, `${label} (no such id)`);
    t.equal(foreign.body?.error?.message, missing.body?.error?.message, `${label}: the same message as for a missing id`);
    t.notOk(foreign.text.includes(foreignId) && !missing.text.includes(missingId), `${label}: nothing about A's resource is echoed`);
  }

  // Lists of B show only B's resources.
  const lists: [string, Res, string][] = [
    ['platforms', await b.user.get('/v1/service/platforms'), A.platform_id],
    ['connections', await b.user.get('/v1/service/connections'), A.connection_id],
    ['agents', await b.user.get('/v1/service/agents'), a.agentId],
    ['requests', await b.user.get('/v1/service/delegations/requests'), pending],
    ['certificates', await b.user.get('/v1/service/delegations'), a.certId],
    ['deliveries of A\'s platform', await b.user.get(`/v1/service/webhooks/deliveries?platform_id=${A.platform_id}`), A.platform_id],
    ['audit', await b.user.get('/v1/service/audit/personal?limit=25'), a.agentId],
  ];
  for (const [label, r, aId] of lists) {
    t.equal(r.status, 200, `${label}: 200`);
    t.notOk(r.text.includes(aId), `${label}: nothing of A`);
  }
  t.equal((await b.user.get(`/v1/service/webhooks/deliveries?platform_id=${A.platform_id}`)).body.deliveries.length, 0);

  // A is unchanged and still works.
  t.equal(await stateOfA(), before, 'A\'s state did not change');
  t.equal((await a.user.get(`/v1/service/delegations/${a.certId}`)).body.status, 'approved');
  t.equal((await a.user.get(`/v1/service/delegations/requests/${pending}`)).body.state, 'pending');
  t.equal((await a.platform.post('/v1/service/challenge')).status, 200, 'A\'s key was not rotated or removed');
  // A unauthenticated caller gets auth_required, not 404.
  expectError(t, await new Client(sc.url).get(`/v1/service/platforms/${A.platform_id}`), 401, 'auth_required');
});
