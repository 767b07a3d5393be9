/**
 * Challenge and present (spec endpoints 11 and 12) at the HTTP edge: the
 * challenge, the bundle present builds (and its header form), and present's
 * refusals. Presenting authorizes nothing and costs nothing.
 */
import t from 'tap';
import { Client, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, challenge, expectDecision, expectError, presentRaw, usage, verify } from '../decide/helpers.js';

let sc: TestSidecar;
let f: Flow;
let g: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'proofs@example.com', { approve: ['data:read'] });
  g = await specFlow(sc, 'proofs-other@example.com', { approve: ['data:read'] });
});
t.teardown(async () => { await sc.close(); });

t.test('challenge: single-use random values with an expiry', async (t) => {
  const r = await f.platform.post('/v1/service/challenge');
  t.equal(r.status, 200, r.text);
  t.match(r.body.challenge, /^[A-Za-z0-9_-]{43}$/, '256-bit base64url');
  t.equal(r.body.expires_at, new Date(sc.clock.now() + 300_000).toISOString(), 'expires after challengeTtlSeconds');
  const many = new Set<string>();
  for (let i = 0; i < 20; i++) many.add(await challenge(f.platform));
  t.equal(many.size, 20, 'distinct');
  expectError(t, await new Client(sc.url).post('/v1/service/challenge'), 401, 'invalid_api_key', 'no key');
  expectError(t, await f.platform.post('/v1/service/challenge', undefined, { apiKey: 'aak_000000000000_' + 'A'.repeat(43) }), 401, 'invalid_api_key', 'unknown key');
});

t.test('present: the bundle, its header form, and nothing authorized or billed', async (t) => {
  const before = await usage(f.user);
  const c = await challenge(f.platform);
  const r = await presentRaw(f, c);
  t.equal(r.status, 200, r.text);
  const b = r.body.proof_bundle;
  t.same(Object.keys(b).sort(), ['agent_id', 'aud', 'cert_id', 'cert_sha256', 'challenge', 'presented_at', 'sig', 'typ', 'v']);
  t.equal(b.v, 1);
  t.equal(b.typ, 'agent-authz.proof');
  t.equal(b.challenge, c);
  t.equal(b.aud, f.reg.connection_id);
  t.equal(b.agent_id, f.agentId);
  t.equal(b.cert_id, f.certId);
  t.equal(r.body.cert_id, f.certId);
  t.match(b.cert_sha256, /^[0-9a-f]{64}$/);
  t.equal(b.presented_at, new Date(sc.clock.now()).toISOString());
  t.same(Object.keys(b.sig).sort(), ['ed25519', 'ml_dsa_65']);
  t.equal(Buffer.from(b.sig.ed25519, 'base64url').length, 64);
  t.equal(Buffer.from(b.sig.ml_dsa_65, 'base64url').length, 3309);
  t.ok(JSON.stringify(b).length < 8192, 'under the 8 KiB bundle limit');
  t.same(JSON.parse(Buffer.from(r.body.proof_header, 'base64').toString('utf8')), b, 'proof_header is base64 of the bundle JSON');
  t.ok(r.body.proof_header.length < 8192, 'fits one header');

  const after = await usage(f.user);
  t.same(after, before, 'present is not metered');
  const ev = await auditAll(f.user);
  t.equal(ev[0]!.event_type, 'proof.presented');
  t.equal((await auditAll(f.user, 'event_type=proof.verified')).length, 0, 'present decides nothing');

  const fromHeader = JSON.parse(Buffer.from(r.body.proof_header, 'base64').toString('utf8'));
  expectDecision(t, await verify(f.platform, fromHeader, 'data:read'), 'allow', 'authorized', undefined, 'the header form verifies');
});

t.test('present refusals', async (t) => {
  const c = await challenge(f.platform);
  const base = `/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`;
  expectError(t, await new Client(sc.url).post(base, { challenge: c }), 401, 'invalid_api_key', 'no key');
  expectError(t, await g.platform.post(base, { challenge: c }), 404, 'connection_not_found', 'another platform\'s key');
  expectError(t, await f.platform.post(`/v1/service/connections/${g.reg.connection_id}/agents/${g.agentId}/present`, { challenge: c }), 404, 'connection_not_found', 'another connection in the path');
  expectError(t, await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${g.agentId}/present`, { challenge: c }), 404, 'agent_not_found', 'an agent of another connection');
  expectError(t, await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${crypto.randomUUID()}/present`, { challenge: c }), 404, 'agent_not_found', 'unknown agent');
  expectError(t, await f.platform.post(base, { challenge: c, scope: 'data:read' }), 400, 'invalid_request', 'unknown body member');
  expectError(t, await f.platform.post(base, {}), 400, 'invalid_request', 'no challenge');

  // A second agent on the connection, never delegated to.
  const a2 = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents`, { name: 'agent-2', agent_type: 'api_agent' });
  t.equal(a2.status, 200, a2.text);
  expectError(t, await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${a2.body.agent_id}/present`, { challenge: c }), 404, 'no_active_delegation', 'agent without a certificate');

  // None of the refusals used the challenge up.
  const ok = await presentRaw(f, c);
  t.equal(ok.status, 200, 'the challenge is still presentable');
});

t.test('present refuses a challenge issued to another connection', async (t) => {
  const c = await challenge(g.platform);
  const r = await presentRaw(f, c);
  expectError(t, r, 400, 'invalid_challenge', 'another connection\'s challenge');
  const fEvents = await auditAll(f.user, 'event_type=proof.presented');
  t.notOk(fEvents.some((e) => e.details.audience_connection_id === g.reg.connection_id), 'nothing presented for the foreign audience');
  const own = await presentRaw(f, await challenge(f.platform));
  t.equal(own.status, 200, 'the agent\'s own connection\'s challenge still works');
});
