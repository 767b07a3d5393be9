/**
 * Delegations over real HTTP on 127.0.0.1, issue to revoke: the spec flow
 * from login through self-request, approve, proofs and verify to revoke (with
 * the audit and outbox it leaves), and the list/read endpoints, which show no
 * secrets. Refusals of requests are in delegations-requests.test.ts; offline
 * verification of a certificate is in delegations-offline.test.ts.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { Client, expectError, present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Res } from '../../helpers/sidecar.js';
import { UUID_RE, outboxTypes } from './fixtures/common.js';
import { email, setup } from './fixtures/delegations.js';

const CERT_ID_RE = /^cert-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_UTC_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('delegations: issue, revoke, list', async (t) => {
  const sc = await startSidecar({}, { startWorkers: false });
  t.teardown(() => sc.close());

  t.test('the spec flow from login to revoke', async (t) => {
    const { user, platform, reg, agentIds } = await setup(sc, 'flow');
    const agentId = agentIds[0]!;
    const sr = await user.post('/v1/service/delegations/self-request', { connection_id: reg.connection_id });
    t.equal(sr.status, 200);
    t.match(sr.body.request_id, UUID_RE);
    t.equal(sr.body.state, 'pending');
    t.equal(sr.body.agent_id, agentId, 'the only agent is chosen');
    t.same(sr.body.requested_scope, ['data:read', 'data:write', 'payments:send'], 'asks for the full ceiling');

    const ap = await user.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`, { approved_scope: ['data:write', 'data:read'] });
    t.equal(ap.status, 200);
    t.same(ap.body.approved_scope, ['data:read', 'data:write'], 'a subset, sorted');
    t.match(ap.body.cert_id, CERT_ID_RE);
    t.equal(ap.body.expires_at, null, 'null when no expiry');
    t.match(ap.body.issued_at, ISO_UTC_RE);
    t.equal(Date.parse(ap.body.issued_at), sc.clock.now());
    t.equal(ap.body.status, 'approved');
    for (const k of Object.keys(ap.body)) t.notMatch(k, /secret|key$/, `no secret member ${k}`);

    // Prove and verify: allow for a granted scope, deny not_delegated for another.
    const bundle = await present({ user, platform, reg, agentId, requestId: sr.body.request_id, certId: ap.body.cert_id });
    const v1 = await platform.post('/v1/service/verify', { proof_bundle: bundle, required_scope: 'data:read' });
    t.equal(v1.status, 200);
    t.equal(v1.body.decision, 'allow');
    t.equal(v1.body.decision_reason, 'authorized');
    const bundle2 = await present({ user, platform, reg, agentId, requestId: sr.body.request_id, certId: ap.body.cert_id });
    const v2 = await platform.post('/v1/service/verify', { proof_bundle: bundle2, required_scope: 'payments:send' });
    t.equal(v2.body.decision, 'deny');
    t.equal(v2.body.decision_reason, 'not_delegated');
    const bundle3 = await present({ user, platform, reg, agentId, requestId: sr.body.request_id, certId: ap.body.cert_id });

    expectError(t, await user.post(`/v1/service/delegations/${ap.body.cert_id}/revoke`, { reason: 'done' }, { csrf: false }), 403, 'csrf_required');
    const rv = await user.post(`/v1/service/delegations/${ap.body.cert_id}/revoke`, { reason: 'done' });
    t.equal(rv.status, 200);
    t.equal(rv.body.cert_id, ap.body.cert_id);
    t.equal(rv.body.status, 'revoked');
    t.equal(rv.body.already_revoked, false);
    const rv2 = await user.post(`/v1/service/delegations/${ap.body.cert_id}/revoke`, { reason: 'again' });
    t.equal(rv2.status, 200, 'revoking twice is 200');
    t.equal(rv2.body.status, 'revoked');
    t.equal(rv2.body.already_revoked, true);
    t.equal(rv2.body.revoked_at, rv.body.revoked_at, 'the first revocation time is kept');
    const c = await user.get(`/v1/service/delegations/${ap.body.cert_id}`);
    t.equal(c.body.status, 'revoked');
    t.equal(c.body.revoke_reason, 'done');

    const v3 = await platform.post('/v1/service/verify', { proof_bundle: bundle3, required_scope: 'data:read' });
    t.equal(v3.body.decision, 'deny', 'a proof built before revocation is denied');
    t.equal(v3.body.decision_reason, 'delegation_revoked');
    const ch = await platform.post('/v1/service/challenge');
    expectError(t, await platform.post(`/v1/service/connections/${reg.connection_id}/agents/${agentId}/present`, { challenge: ch.body.challenge }), 404, 'no_active_delegation');

    const audit = await user.get('/v1/service/audit/personal?limit=25');
    t.same(audit.body.events.filter((e: { event_type: string }) => e.event_type !== 'proof.presented').map((e: { event_type: string }) => e.event_type),
      ['proof.rejected', 'proof.rejected', 'proof.verified', 'connection.created', 'platform.created'],
      'audit newest first (the registration\'s administrative events the oldest)');

    t.same(await outboxTypes(sc, user), ['connection.created', 'delegation.approved', 'delegation.revoked'], 'exactly these events');
    const api = await user.get('/v1/service/webhooks/deliveries?limit=100');
    t.same(api.body.deliveries.map((d: { event: string }) => d.event).reverse(), ['connection.created', 'delegation.approved', 'delegation.revoked'], 'same through the API');
  });

  t.test('list and read endpoints of delegations show no secrets', async (t) => {
    const f = await specFlow(sc, email('lists'));
    const sr2 = (await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id })).body;
    const secrets = [f.reg.api_key, f.reg.signing_secret, f.reg.webhook_signing_secret];
    const reads: [string, Res][] = [
      ['requests', await f.user.get('/v1/service/delegations/requests')],
      ['request', await f.user.get(`/v1/service/delegations/requests/${f.requestId}`)],
      ['certificates', await f.user.get('/v1/service/delegations')],
      ['certificate', await f.user.get(`/v1/service/delegations/${f.certId}`)],
      ['identity', await f.user.get('/v1/service/identity')],
    ];
    for (const [label, r] of reads) {
      t.equal(r.status, 200, label);
      for (const s of secrets) t.notOk(r.text.includes(s), `${label}: no secret value`);
      t.notMatch(r.text, /"(api_key|signing_secret|webhook_signing_secret|secret|secret_enc|root_secret|private_key|seed)"/, `${label}: no secret member`);
    }
    t.same(reads[0]![1].body.requests.map((r: { request_id: string }) => r.request_id), [sr2.request_id, f.requestId], 'newest first');
    const req = reads[1]![1].body;
    t.equal(req.state, 'approved');
    t.equal(req.cert_id, f.certId);
    t.equal(req.agent_id, f.agentId);
    t.same(reads[2]![1].body.certificates.map((c: { cert_id: string }) => c.cert_id), [f.certId]);
    const cert = reads[3]![1].body;
    t.same(reads[2]![1].body.certificates[0], cert, 'list entry = read');
    t.equal(cert.status, 'approved');
    t.same(cert.approved_scope, ['data:read']);
    t.match(cert.cert_sha256, /^[0-9a-f]{64}$/);
    t.ok(cert.cert_json.payload && cert.cert_json.signature);
    expectError(t, await f.user.get(`/v1/service/delegations/cert-${randomUUID()}`), 404, 'certificate_not_found');
    expectError(t, await f.user.get(`/v1/service/delegations/requests/${randomUUID()}`), 404, 'request_not_found');
    expectError(t, await f.user.post(`/v1/service/delegations/cert-${randomUUID()}/revoke`, { reason: 'x' }), 404, 'certificate_not_found');
    const noReason = await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, {});
    expectError(t, noReason, 400, 'invalid_request', 'revoke without reason');
    t.equal(noReason.body.error.field, 'body.reason');
    expectError(t, await new Client(sc.url).get('/v1/service/delegations'), 401, 'auth_required');
  });
});
