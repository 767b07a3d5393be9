/**
 * The spec's end-to-end decision flow through the real server: allow,
 * not_delegated, single-use challenges, revocation (verify and present),
 * the audit trail it leaves, and the audience (cross-platform) model.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, challenge, expectDecision, expectError, presentRaw, usage, verify } from './helpers.js';
import { createSigner } from '../../../src/crypto/hybrid.js';
import { PROOF_TYPE, signProof } from '../../../src/proof.js';
import { AAD } from '../../../sidecar/secrets.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let sc: TestSidecar;
t.before(async () => { sc = await startSidecar(); });
t.teardown(async () => { await sc.close(); });

t.test('spec flow: allow, not_delegated, reuse, revoke, present after revoke, audit', async (t) => {
  const f = await specFlow(sc, 'flow@example.com', { scopes: ['data:read', 'data:write', 'payments:send'], approve: ['data:read'] });
  const before = await usage(f.user);

  const b1 = await bundleFor(f);
  const allow = await verify(f.platform, b1, 'data:read');
  expectDecision(t, allow, 'allow', 'authorized', undefined, 'approved scope');
  t.equal(allow.body.agent_id, f.agentId);
  t.equal(allow.body.cert_id, f.certId);
  t.equal(allow.body.scope, 'data:read');

  expectError(t, await verify(f.platform, b1, 'data:read'), 400, 'invalid_challenge', 'second verify of the same bundle');
  expectError(t, await verify(f.platform, b1, 'data:write'), 400, 'invalid_challenge', 'reuse with another scope');

  const b2 = await bundleFor(f);
  expectDecision(t, await verify(f.platform, b2, 'data:write'), 'deny', 'not_delegated', undefined, 'scope requested but not approved');

  const b3 = await bundleFor(f);
  const b4 = await bundleFor(f);
  const rv = await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'test' });
  t.equal(rv.status, 200, rv.text);
  t.equal(rv.body.cert_id, f.certId);
  t.equal(rv.body.status, 'revoked');

  expectDecision(t, await verify(f.platform, b3, 'data:read'), 'deny', 'delegation_revoked', undefined, 'bundle built before revoke');
  expectDecision(t, await verify(f.platform, b4, 'data:write'), 'deny', 'delegation_revoked', undefined, 'revocation is reported before scope');

  const c = await challenge(f.platform);
  expectError(t, await presentRaw(f, c), 404, 'no_active_delegation', 'present after revoke');

  // The audit trail, newest first; the oldest two are the registration's (platform.created, connection.created).
  const trail = await auditAll(f.user);
  t.same(trail.slice(-2).map((e) => e.event_type), ['connection.created', 'platform.created'], 'the registration\'s');
  const events = trail.slice(0, -2);
  t.same(events.map((e) => [e.event_type, e.details.decision ?? null, e.details.decision_reason ?? null, e.required_scope]), [
    ['proof.rejected', 'deny', 'delegation_revoked', 'data:write'],
    ['proof.rejected', 'deny', 'delegation_revoked', 'data:read'],
    ['proof.presented', null, null, null],
    ['proof.presented', null, null, null],
    ['proof.rejected', 'deny', 'not_delegated', 'data:write'],
    ['proof.presented', null, null, null],
    ['proof.verified', 'allow', 'authorized', 'data:read'],
    ['proof.presented', null, null, null],
  ], 'events in order, newest first; 400s and the failed present leave no row');
  const ids = new Set<string>();
  for (const e of events) {
    t.match(e.event_id, UUID, 'event_id');
    ids.add(e.event_id);
    t.match(e.occurred_at, ISO, 'occurred_at');
    t.equal(e.connection_id, f.reg.connection_id);
    t.equal(e.agent_id, f.agentId);
    t.equal(e.cert_id, f.certId);
    if (e.event_type === 'proof.presented') {
      t.notOk('decision' in e.details, 'presented has no decision');
      t.notOk('decision_reason' in e.details, 'presented has no decision_reason');
    }
  }
  t.equal(ids.size, events.length, 'event ids are unique');
  t.equal(events[events.length - 2]!.event_id, allow.body.audit_event_id, 'verify names its audit event');

  const after = await usage(f.user);
  t.equal(after.verify_calls - before.verify_calls, 4, 'the 4 decisions are metered; the 2 replays of spent challenges are not');
  t.equal(after.allows - before.allows, 1);
  t.equal(after.denies - before.denies, 3);
  t.equal(before.balance_micros - after.balance_micros, 4 * after.price_per_verify_micros);
});

t.test('audience: a challenge is bound to the connection whose API key issued it', async (t) => {
  const a = await specFlow(sc, 'aud-a@example.com', { approve: ['data:read'] });
  const b = await specFlow(sc, 'aud-b@example.com', { approve: ['data:read'] });

  // A's challenge, verified with B's key: foreign audience.
  const forA = await bundleFor(a);
  expectError(t, await verify(b.platform, forA, 'data:read'), 400, 'invalid_challenge', 'A-audience bundle at B');
  expectDecision(t, await verify(a.platform, forA, 'data:read'), 'allow', 'authorized', undefined, 'a foreign verify does not spend the challenge');

  // Reverse: B issues the challenge; A's agent may not present for it (it is not A's audience).
  const chB = await challenge(b.platform);
  expectError(t, await presentRaw(a, chB), 400, 'invalid_challenge', 'present for another connection\'s challenge');

  // Even a correctly signed proof of A's agent built for B's challenge authorizes nothing at B:
  // A's certificate was issued for A's connection. (Built with the agent's key taken from the
  // service's own store, as a compromised platform could.)
  const agent = (await sc.app.ctx.store.platforms.getAgent(a.agentId))!;
  const cert = (await sc.app.ctx.store.delegations.getCertificate(a.certId))!;
  const signer = createSigner(sc.app.ctx.box.open(agent.secretEnc, AAD.agentSecret(agent.id)));
  const chB2 = await challenge(b.platform);
  const forged = signProof({
    v: 1, typ: PROOF_TYPE, challenge: chB2, aud: b.reg.connection_id, agent_id: a.agentId, cert_id: a.certId,
    cert_sha256: cert.certSha256, presented_at: new Date(sc.clock.now()).toISOString(),
  }, signer);
  const beforeB = await usage(b.user);
  expectError(t, await verify(b.platform, forged, 'data:read'), 400, 'invalid_proof', 'A\'s certificate at B');
  t.equal((await auditAll(b.user, 'event_type=proof.verified')).length, 0, 'no allow recorded at B');
  t.equal((await usage(b.user)).verify_calls - beforeB.verify_calls, 1, 'the spent challenge is billed to B');
  expectError(t, await verify(b.platform, forged, 'data:read'), 400, 'invalid_challenge', 'and B\'s challenge is spent');
});

t.test('revocation takes effect at once with warm caches', async (t) => {
  const f = await specFlow(sc, 'warm@example.com', { approve: ['data:read'] });
  // Warm the certificate-verification, verifier and status caches.
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized', undefined, 'warm-up');
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized', undefined, 'cached');
  const early = await bundleFor(f);
  const rv = await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'compromised' });
  t.equal(rv.status, 200, rv.text);
  expectDecision(t, await verify(f.platform, early, 'data:read'), 'deny', 'delegation_revoked', undefined, 'next verify after revoke');
  const again = await f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'again' });
  t.equal(again.status, 200);
  t.equal(again.body.status, 'revoked');
});

t.test('an expired delegation denies delegation_expired', async (t) => {
  const f = await specFlow(sc, 'expiry@example.com', { approve: ['data:read'], expiresAt: new Date(sc.clock.now() + 60_000).toISOString() });
  const b = await bundleFor(f);
  sc.clock.advance(61_000);
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'deny', 'delegation_expired', undefined, 'expired certificate');
  expectError(t, await presentRaw(f, await challenge(f.platform)), 404, 'no_active_delegation', 'present after expiry');
});
