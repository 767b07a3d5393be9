/**
 * Delegations over real HTTP on 127.0.0.1: the spec flow from login to
 * revoke, self-request / approve / deny / revoke and their refusals, offline
 * verification of an issued certificate with only the root public key (and
 * its failure after any single changed character), the outbox contents, and
 * the list/read endpoints.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { Client, expectError, onboard, present, specFlow, startSidecar } from '../../helpers/sidecar.ts';
import type { Res, TestSidecar } from '../../helpers/sidecar.ts';
import { canonicalize, tryCanonicalize } from '../../../src/canonical.ts';
import { verifyCertificate } from '../../../src/certificate.ts';
import { createVerifier, publicKeyFromJson } from '../../../src/crypto/hybrid.ts';



const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const CERT_ID_RE = /^cert-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_UTC_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let n = 0;
const email = (tag: string): string => `dlg-${tag}-${++n}@example.com`;

/** Event types in the outbox of the account behind `user`, oldest first. */
async function outboxTypes(sc: TestSidecar, user: Client): Promise<string[]> {
  const me = await user.get('/v1/auth/session');
  const ds = await sc.app.ctx.store.outbox.listDeliveries({ accountId: me.body.account_id, limit: 100 });
  return ds.map((d) => d.eventType).reverse();
}

/** A registered platform with `agents` agents, no request yet. */
async function setup(sc: TestSidecar, tag: string, agents = 1, scopes = ['data:read', 'data:write', 'payments:send']) {
  const user = await onboard(sc, email(tag));
  const reg = (await user.post('/v1/service/platforms/personal', { name: 'P', surface_type: 'agentic_api', default_allowed_scopes: scopes })).body;
  const platform = new Client(sc.url);
  platform.apiKey = reg.api_key;
  const agentIds: string[] = [];
  for (let i = 0; i < agents; i++) {
    agentIds.push((await platform.post(`/v1/service/connections/${reg.connection_id}/agents`, { name: `a${i}`, agent_type: 'api_agent' })).body.agent_id);
  }
  return { user, platform, reg, agentIds };
}

const CONSTRAINTS = {
  max_amount: { amount: '50.00', currency: 'USD' },
  methods: ['GET', 'POST'],
  path_prefixes: ['/v1/orders'],
  client_ips: ['10.0.0.0/8', '2001:db8::/32'],
  tenants: ['tenant-1'],
  time_window: { days: ['mon', 'fri'], start: '08:00', end: '18:00' },
};

t.test('delegations', async (t) => {
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
      ['proof.rejected', 'proof.rejected', 'proof.verified'], 'audit newest first');

    t.same(await outboxTypes(sc, user), ['connection.created', 'delegation.approved', 'delegation.revoked'], 'exactly these events');
    const api = await user.get('/v1/service/webhooks/deliveries?limit=100');
    t.same(api.body.deliveries.map((d: { event: string }) => d.event).reverse(), ['connection.created', 'delegation.approved', 'delegation.revoked'], 'same through the API');
  });

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

  t.test('a certificate verifies offline with only the root public key, and fails after any changed character', async (t) => {
    const exp = new Date(sc.clock.now() + 86_400_000).toISOString();
    const f = await specFlow(sc, email('offline'), { scopes: ['data:read', 'payments:send', 'custom:crm:contacts'], approve: ['payments:send', 'data:read', 'custom:crm:contacts'], constraints: CONSTRAINTS, expiresAt: exp });
    const id = await f.user.get('/v1/service/identity');
    t.equal(id.status, 200);
    const rootKey = publicKeyFromJson(id.body.root_public_key);
    t.ok(rootKey, 'root_public_key parses');
    const c = await f.user.get(`/v1/service/delegations/${f.certId}`);
    const cert = c.body.cert_json;
    const verifier = createVerifier(rootKey!);
    const ok = verifyCertificate(cert, rootKey!, sc.clock.now());
    t.equal(ok.ok, true, 'verifies with the root public key alone');
    if (ok.ok) t.equal(ok.expired, false);
    t.equal(verifyCertificate(cert, rootKey!, Date.parse(exp)).ok, true);
    const expired = verifyCertificate(cert, rootKey!, Date.parse(exp));
    t.equal(expired.ok && expired.expired, true, 'expired at expires_at');
    t.equal(cert.payload.cert_id, f.certId);
    t.same(cert.payload.scopes, ['custom:crm:contacts', 'data:read', 'payments:send']);
    t.same(cert.payload.constraints, CONSTRAINTS);
    t.equal(cert.payload.expires_at, exp);
    t.equal(cert.payload.connection_id, f.reg.connection_id);
    t.equal(cert.payload.subject.agent_id, f.agentId);
    const agents = (await f.user.get('/v1/service/agents')).body.agents;
    t.same(cert.payload.subject.public_key, agents[0].public_key_json, 'subject key = the agent key');
    t.same(cert.payload.issuer.public_key, id.body.root_public_key, 'issuer key = the root key');

    // Another account's root key does not verify it.
    const other = await onboard(sc, email('offline-other'));
    const otherKey = publicKeyFromJson((await other.get('/v1/service/identity')).body.root_public_key)!;
    t.same(verifyCertificate(cert, otherKey), { ok: false, reason: 'wrong_issuer' });
    const swapped = JSON.parse(JSON.stringify(cert));
    swapped.payload.issuer.public_key = (await other.get('/v1/service/identity')).body.root_public_key;
    t.equal(verifyCertificate(swapped, otherKey).ok, false, 'swapping in another issuer key breaks the signature');

    // Every single-character change.
    const text = canonicalize(cert);
    t.equal(JSON.stringify(JSON.parse(text)), text, 'the canonical text has no whitespace');
    const mlSig = cert.signature.ml_dsa_65 as string;
    const mlStart = text.indexOf(mlSig);
    t.ok(mlStart > 0);
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const other1 = (ch: string): string => {
      const i = B64.indexOf(ch);
      if (i >= 0) return B64[(i + 1) % B64.length]!;
      return ch === 'a' ? 'b' : 'a';
    };
    const other2 = (ch: string): string => String.fromCharCode(ch.charCodeAt(0) ^ 1);
    const positions: number[] = [];
    for (let i = 0; i < text.length; i++) {
      const inMl = i >= mlStart && i < mlStart + mlSig.length;
      // The ML-DSA-65 signature half costs ~4 ms per check: take its first and last 64 characters and every 11th between.
      if (!inMl || i - mlStart < 64 || mlStart + mlSig.length - i <= 64 || (i - mlStart) % 11 === 0) positions.push(i);
    }
    const payloadEnd = text.indexOf('"signature":');
    let checked = 0;
    let unparsable = 0;
    let equivalent = 0;
    let accepted = 0;
    const failures: string[] = [];
    const deadline = Date.now() + 25_000;
    for (const i of positions) {
      if (Date.now() > deadline) break;
      const ch = text[i]!;
      const variants = i < payloadEnd ? [other1(ch), other2(ch)] : [other1(ch)];
      for (const rep of new Set(variants)) {
        if (rep === ch) continue;
        const mutated = text.slice(0, i) + rep + text.slice(i + 1);
        let parsed: unknown;
        try { parsed = JSON.parse(mutated); } catch { unparsable++; continue; }
        if (tryCanonicalize(parsed) === text) { equivalent++; continue; }
        checked++;
        if (verifyCertificate(parsed, verifier).ok) {
          accepted++;
          if (failures.length < 5) failures.push(`position ${i} ${JSON.stringify(ch)}→${JSON.stringify(rep)}: ${text.slice(Math.max(0, i - 30), i + 30)}`);
        }
      }
    }
    t.equal(accepted, 0, `no changed certificate verifies${failures.length ? `: ${failures.join(' | ')}` : ''}`);
    t.equal(equivalent, 0, 'no single-character change gives an equivalent value');
    t.ok(Date.now() <= deadline, 'finished within the time bound');
    t.ok(checked >= 5_000, `checked ${checked} parsed variants (${unparsable} did not parse) over ${positions.length} of ${text.length} positions`);
    // Coverage of the parts that matter.
    for (const part of [f.certId, cert.payload.request_id, f.reg.connection_id, f.agentId, cert.payload.issued_at, exp, 'payments:send', 'custom:crm:contacts', '"50.00"', '"10.0.0.0/8"', '"08:00"', cert.signature.ed25519]) {
      const at = text.indexOf(part);
      t.ok(at >= 0 && positions.includes(at) && positions.includes(at + part.length - 1), `every position of ${part.slice(0, 24)} is checked`);
    }
    t.ok(positions.filter((i) => i >= mlStart && i < mlStart + mlSig.length).length >= 400, 'at least 400 positions of the ML-DSA signature half');
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
