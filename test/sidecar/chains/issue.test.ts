/**
 * Sub-delegation, issuing (issue 33): the right to delegate is granted only
 * explicitly (`max_delegation_depth` on approve, never by a scope), a chain
 * goes from depth 1 to its limit and one past it is refused, and a
 * sub-delegation that widens scopes, expiry or any constraint is refused
 * with `delegation_widens` naming the member. The child certificate is
 * signed with the parent agent's key and names its parent; it verifies
 * offline against that parent (src/chain.ts) and not under the root key.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { certificateHash, verifyCertificate } from '../../../src/certificate.js';
import type { DelegationCertificate } from '../../../src/certificate.js';
import { checkLink } from '../../../src/chain.js';
import { publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import { startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import { expectDecision, expectError, verify } from '../decide/helpers.js';
import { chainOf, mustSubDelegate, newAgent, proofOf, rootFlow, subDelegate } from './helpers.js';

let sc: TestSidecar;
let n = 0;
t.before(async () => { sc = await startSidecar(); });
t.teardown(async () => { await sc.close(); });
const email = (): string => `chain-issue-${++n}@example.com`;

t.test('the right to delegate is explicit and bounded', async (t) => {
  const f = await rootFlow(sc, email());
  const to = await newAgent(f, 'helper');
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: to, scopes: ['data:read'] }), 403,
    'delegation_not_permitted', 'a certificate approved without max_delegation_depth grants no right');
  const cert = await f.user.get(`/v1/service/delegations/${f.certId}`);
  t.equal(cert.body.max_delegation_depth, 0, 'the certificate says so');
  t.notOk('max_delegation_depth' in cert.body.cert_json.payload, 'and its signed payload carries no right');
  for (const bad of [9, -1, 1.5, '2', true]) {
    const g = await rootFlow(sc, email(), { maxDepth: bad as number }).then(() => 'approved', (e: Error) => e.message);
    t.match(g, /approve: .*invalid_delegation_depth.*body\.max_delegation_depth/,
      `approve with ${JSON.stringify(bad)}`);
  }
});

t.test('depth 1 to the limit allowed, one past refused; the limit is the root\'s right', async (t) => {
  const f = await rootFlow(sc, email(), { approve: ['data:read', 'data:write'], maxDepth: 3 });
  const { agents, certs } = await chainOf(f, 3, 3, ['data:read']);
  for (let d = 1; d <= 3; d++) {
    const c = await f.user.get(`/v1/service/delegations/${certs[d]}`);
    t.equal(c.body.depth, d, `depth ${d}: recorded`);
    t.equal(c.body.parent_cert_id, certs[d - 1], `depth ${d}: names its parent`);
    t.equal(c.body.max_delegation_depth, 3 - d, `depth ${d}: a smaller right`);
    const r = await verify(f.platform, await proofOf(f, agents[d]!), 'data:read');
    expectDecision(t, r, 'allow', 'authorized', undefined, `depth ${d}: allowed`);
    expectDecision(t, await verify(f.platform, await proofOf(f, agents[d]!), 'data:write'), 'deny', 'not_delegated',
      undefined, `depth ${d}: a scope its parent has but it was not given`);
  }
  const past = await newAgent(f, 'too-deep');
  const r = await subDelegate(f, agents[3]!, { to_agent_id: past, scopes: ['data:read'] });
  expectError(t, r, 403, 'delegation_depth_exceeded', 'depth 4 under a root right of 3');
  t.equal(r.body.error.depth, 4);
  const wide = await subDelegate(f, agents[1]!, { to_agent_id: past, scopes: ['data:read'], max_delegation_depth: 2 });
  expectError(t, wide, 400, 'delegation_widens', 'a right as large as the parent\'s');
  t.equal(wide.body.error.member, 'max_delegation_depth');
});

t.test('the global maximum caps every chain', async (t) => {
  const small = await startSidecar({ maxDelegationDepth: 2 });
  t.teardown(() => small.close());
  const g = await rootFlow(small, 'global@example.com').then(() => null);
  t.equal(g, null);
  const f = await rootFlow(small, 'global2@example.com', { maxDepth: 2 });
  const over = await rootFlow(small, 'global3@example.com', { maxDepth: 3 })
    .then(() => 'approved', (e: Error) => e.message);
  t.match(over, /invalid_delegation_depth/, 'a right past SIDECAR_MAX_DELEGATION_DEPTH is not granted');
  const { agents } = await chainOf(f, 2, 2, ['data:read']);
  const past = await newAgent(f, 'past');
  expectError(t, await subDelegate(f, agents[2]!, { to_agent_id: past, scopes: ['data:read'] }), 403,
    'delegation_depth_exceeded', 'depth 3 under a service maximum of 2');
});

t.test('a sub-delegation never widens', async (t) => {
  const f = await rootFlow(sc, email(), {
    approve: ['data:read', 'payments:send'], maxDepth: 2, expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    constraints: { max_amount: { amount: '50.00', currency: 'USD' }, path_prefixes: ['/v1/reports'],
      client_ips: ['10.0.0.0/8'], tenants: ['acme'], time_window: { start: '08:00', end: '18:00' } },
  });
  const to = await newAgent(f, 'narrow');
  const base = { max_amount: { amount: '20.00', currency: 'USD' }, path_prefixes: ['/v1/reports/q1'],
    client_ips: ['10.1.0.0/16'], tenants: ['acme'], time_window: { start: '09:00', end: '17:00' } };
  const cases: [string, Record<string, unknown>][] = [
    ['scopes', { scopes: ['data:read', 'data:write'] }],
    ['expires_at', { expires_at: new Date(Date.now() + 7_200_000).toISOString() }],
    ['expires_at', { expires_at: null }],
    ['max_amount', { constraints: { ...base, max_amount: { amount: '50.01', currency: 'USD' } } }],
    ['path_prefixes', { constraints: { ...base, path_prefixes: ['/v1'] } }],
    ['client_ips', { constraints: { ...base, client_ips: ['0.0.0.0/0'] } }],
    ['tenants', { constraints: { ...base, tenants: ['acme', 'globex'] } }],
    ['time_window', { constraints: { ...base, time_window: { start: '07:00', end: '17:00' } } }],
    ['max_amount', { constraints: { ...base, max_amount: undefined } }],
  ];
  for (const [member, change] of cases) {
    const r = await subDelegate(f, f.agentId,
      { to_agent_id: to, scopes: ['payments:send'], constraints: base, ...change });
    expectError(t, r, 400, 'delegation_widens', `${member}: ${JSON.stringify(change).slice(0, 80)}`);
    t.equal(r.body.error.member, member, `names ${member}`);
  }
  const bad = await subDelegate(f, f.agentId,
    { to_agent_id: to, scopes: ['payments:send'], constraints: { ...base, tenants: 'acme' } });
  expectError(t, bad, 400, 'invalid_constraints', 'malformed constraints: refused before narrowing is judged');
  t.equal(bad.body.error.field, 'body.constraints', 'naming the member');
  const ok = await subDelegate(f, f.agentId, { to_agent_id: to, scopes: ['payments:send'], constraints: base });
  t.equal(ok.status, 200, `narrower in every member: issued (${ok.text.slice(0, 200)})`);
  t.equal(ok.body.expires_at, new Date(Date.parse((await f.user.get(`/v1/service/delegations/${f.certId}`)).body
    .expires_at)).toISOString(), 'no expires_at given: the parent\'s');
});

t.test('the child certificate: signed by the parent agent, naming its parent', async (t) => {
  const f = await rootFlow(sc, email(), { maxDepth: 1 });
  const to = await newAgent(f, 'child');
  const id = await mustSubDelegate(f, f.agentId, { to_agent_id: to, scopes: ['data:read'] });
  const parent = (await f.user.get(`/v1/service/delegations/${f.certId}`)).body.cert_json as DelegationCertificate;
  const child = (await f.user.get(`/v1/service/delegations/${id}`)).body.cert_json as DelegationCertificate;
  t.same(child.payload.parent, { cert_id: f.certId, cert_sha256: certificateHash(parent), depth: 1 });
  t.equal(child.payload.issuer.agent_id, f.agentId, 'issued by the parent agent');
  t.same(child.payload.issuer.public_key, parent.payload.subject.public_key, 'with its key');
  t.equal(child.payload.subject.agent_id, to);
  t.ok(checkLink(child, parent).ok, 'the link verifies offline against its parent');
  const root = (await f.user.get('/v1/service/identity')).body.root_public_key;
  t.same(verifyCertificate(child, publicKeyFromJson(root)!), { ok: false, reason: 'wrong_issuer' },
    'and not under the account\'s root key');
  const tampered = structuredClone(child);
  tampered.payload.scopes = ['data:read', 'data:write'];
  t.equal((checkLink(tampered, parent) as { fault?: string }).fault, 'bad_signature', 'a changed child fails');
});

t.test('only within the connection, only with its own key', async (t) => {
  const f = await rootFlow(sc, email(), { maxDepth: 1 });
  const other = await rootFlow(sc, email(), { maxDepth: 1 });
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: other.agentId, scopes: ['data:read'] }), 404,
    'agent_not_found', 'another account\'s agent is not found');
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: f.agentId, scopes: ['data:read'] }), 400,
    'invalid_request', 'not to itself');
  const to = await newAgent(f, 'x');
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: to, scopes: ['data:read'] }, other.platform), 404,
    'connection_not_found', 'another platform\'s key');
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: to, scopes: [] }), 400, 'empty_scope');
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: to, scopes: ['data:*'] }), 400, 'invalid_scopes');
  expectError(t, await subDelegate(f, f.agentId, { to_agent_id: to, scopes: ['data:read'], max_delegation_depth: 'x' }),
    400, 'invalid_delegation_depth');
});

t.test('an agent of another connection of the same account: refused, nothing issued', async (t) => {
  const f = await rootFlow(sc, email(), { maxDepth: 1 });
  // A second platform and connection of the same account (an organization's; the API registers one
  // personal platform, so the store writes it as the route would).
  const s = sc.app.ctx.store;
  const now = sc.clock.now();
  const owner = (await s.platforms.getConnection(f.reg.connection_id))!.accountId;
  const platformId = randomUUID();
  const connectionId = randomUUID();
  const sealed = sc.app.ctx.box.seal(Buffer.from('x'), 'test');
  t.ok(await s.platforms.createPlatform(
    { id: platformId, accountId: owner, name: 'second', description: '', surfaceType: 'agentic_api',
      publishState: 'draft', defaultAllowedScopes: ['data:read'], callbackUrl: null, callbackDisabledAt: null,
      signingSecretEnc: sealed, webhookSecretEnc: sealed, expiresAt: now + 86_400_000, createdAt: now },
    { id: connectionId, platformId, accountId: owner, allowedScopes: ['data:read'], status: 'active', removedAt: null,
      createdAt: now },
    { id: randomUUID(), connectionId, prefix: `aak_${randomUUID().slice(0, 8)}`, digest: randomUUID(), status: 'active',
      validUntil: now + 86_400_000, createdAt: now },
    null, 10, []), 'a second connection');
  const elsewhere = randomUUID();
  await s.platforms.createAgent({ id: elsewhere, connectionId, accountId: owner, name: 'elsewhere',
    agentType: 'api_agent', custodyMode: 'custodial', publicKey: '{}', secretEnc: sealed, createdAt: now });
  const r = await subDelegate(f, f.agentId, { to_agent_id: elsewhere, scopes: ['data:read'] });
  expectError(t, r, 403, 'delegation_cross_connection', 'another connection: refused');
  t.equal((await s.delegations.listCertificates(owner)).length, 1, 'nothing issued');
});

t.test('the tree: each certificate lists its sub-delegations', async (t) => {
  const f = await rootFlow(sc, email(), { maxDepth: 2 });
  const { agents, certs } = await chainOf(f, 2, 2, ['data:read']);
  const sibling = await newAgent(f, 'sibling');
  const s2 = await mustSubDelegate(f, agents[0]!, { to_agent_id: sibling, scopes: ['data:read'] });
  const kids = await f.user.get(`/v1/service/delegations/${certs[0]}/children`);
  t.equal(kids.status, 200, kids.text.slice(0, 200));
  t.same(kids.body.certificates.map((c: { cert_id: string }) => c.cert_id), [certs[1], s2], 'the root\'s two children');
  const deeper = await f.user.get(`/v1/service/delegations/${certs[1]}/children`);
  t.same(deeper.body.certificates.map((c: { cert_id: string; depth: number }) => [c.cert_id, c.depth]), [[certs[2], 2]]);
  const leaf = await f.user.get(`/v1/service/delegations/${certs[2]}/children`);
  t.same(leaf.body.certificates, [], 'a leaf has none');
  const other = await rootFlow(sc, email());
  expectError(t, await other.user.get(`/v1/service/delegations/${certs[0]}/children`), 404, 'certificate_not_found',
    'another account: not found');
});
