/**
 * Sub-delegation, deciding (issue 33): verify checks the whole chain and a
 * deny names the link it failed at; the audit row and the explanation of a
 * decision under a chain record the chain, leaf to root; budgets count
 * against every ancestor exactly (a parent budget of N payments, two
 * children each allowed N: of 3N concurrent verifies exactly N are allowed);
 * revoking any link denies every descendant at once with one
 * `delegation.revoked` per certificate revoked, and leaves its parent and
 * siblings untouched (at each depth). SQLite; test/sidecar/postgres/chains.test.ts
 * runs the exactness across replicas.
 */
import t from 'tap';
import path from 'node:path';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { openDatabase } from '../../../sidecar/store/sqlite/driver.js';
import type { Test } from 'tap';
import { startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, expectDecision, verify } from '../decide/helpers.js';
import { ANY, PATHS, action, agent as authzenAgent, expectDecision as authzenDecision, pdp }
  from '../authzen/helpers.js';
import { startHookReceiver, waitFor } from '../webhooks/fixtures/hooks.js';
import type { HookReceiver } from '../webhooks/fixtures/hooks.js';
import { chainOf, mustSubDelegate, newAgent, proofOf, rootFlow } from './helpers.js';

let sc: TestSidecar;
let rx: HookReceiver;
let n = 0;
t.before(async () => {
  rx = await startHookReceiver();
  sc = await startSidecar({}, { webhook: { pollIntervalMs: 50 } });
});
t.teardown(async () => { await sc.close(); await rx.close(); });
const email = (): string => `chain-verify-${++n}@example.com`;

t.test('an allow under a chain records the chain; a deny names the link', async (t) => {
  const f = await rootFlow(sc, email(), { approve: ['data:read', 'data:write'], maxDepth: 3 });
  const { agents, certs } = await chainOf(f, 3, 3, ['data:read']);
  const r = await verify(f.platform, await proofOf(f, agents[3]!), 'data:read');
  expectDecision(t, r, 'allow', 'authorized');
  const row = (await auditAll(f.user)).find((e) => e.event_id === r.body.audit_event_id)!;
  t.same(row.details.chain, [...certs].reverse(), 'the audit row: certificate ids, leaf to root');
  const x = await f.platform.get(`/v1/service/decisions/${r.body.decision_id}`);
  t.same(x.body.chain, [...certs].reverse(), 'the explanation too');

  const deny = await verify(f.platform, await proofOf(f, agents[2]!), 'data:write');
  expectDecision(t, deny, 'deny', 'not_delegated');
  const drow = (await auditAll(f.user)).find((e) => e.event_id === deny.body.audit_event_id)!;
  t.same(drow.details.link, { depth: 2, cert_id: certs[2] }, 'the leaf is the failing link');
  t.same(deny.body.link, { depth: 2, cert_id: certs[2] }, 'the answer names it');
  t.notOk('link' in r.body, 'an allow names no link');

  // An ancestor revoked alone (as a store fault or an older replica could leave it): the chain stage still denies.
  await sc.app.ctx.store.delegations.revokeCertificate(certs[1]!, 'test: alone', sc.clock.now(), null);
  sc.app.ctx.caches.markRevoked(certs[1]!);
  const up = await verify(f.platform, await proofOf(f, agents[3]!), 'data:read');
  expectDecision(t, up, 'deny', 'delegation_revoked', undefined, 'an ancestor revoked: deny');
  const urow = (await auditAll(f.user)).find((e) => e.event_id === up.body.audit_event_id)!;
  t.same(urow.details.link, { depth: 1, cert_id: certs[1] }, 'naming the ancestor (depth and certificate)');
  t.same(up.body.link, { depth: 1, cert_id: certs[1] }, 'in the answer too');
  const ux = await f.platform.get(`/v1/service/decisions/${up.body.decision_id}`);
  t.same(ux.body.link, { depth: 1, cert_id: certs[1] }, 'the explanation names it too');
  t.equal(ux.body.certificate.cert_id, certs[1], 'and explains that link');
});

t.test('a parent budget of N payments: of 3N concurrent verifies across two children, exactly N allowed', async (t) => {
  const N = 8;
  const budget = (amount: number) => ({ budget: { amount: `${amount}.00`, currency: 'USD', period: 'total' } });
  const f = await rootFlow(sc, email(), { approve: ['payments:send'], maxDepth: 1, constraints: budget(N) });
  const kids = [await newAgent(f, 'kid-a'), await newAgent(f, 'kid-b')];
  for (const kid of kids) await mustSubDelegate(f, f.agentId, { to_agent_id: kid, scopes: ['payments:send'],
    constraints: budget(N) });
  const proofs = [];
  for (let i = 0; i < 3 * N; i++) proofs.push(await proofOf(f, kids[i % 2]!));
  const ctx = { amount: '1.00', currency: 'USD' };
  const answers = await Promise.all(proofs.map((p) => verify(f.platform, p, 'payments:send', ctx)));
  const allows = answers.filter((r) => r.body?.decision === 'allow').length;
  t.equal(allows, N, `exactly ${N} of ${3 * N} allowed`);
  for (const r of answers.filter((x) => x.body?.decision !== 'allow')) {
    t.equal(r.body?.decision_reason, 'budget_exceeded', 'every other one: budget_exceeded');
  }
  const used = await f.user.get(`/v1/service/delegations/${f.certId}/usage`);
  t.equal(used.status, 200, used.text.slice(0, 200));
  t.match(JSON.stringify(used.body), /"8\.00"/, 'the parent\'s counter holds exactly N');
});

t.test('call limits too: a parent max_calls of N over two children allowed N each', async (t) => {
  const N = 6;
  const calls = (count: number) => ({ max_calls: { count, period: 'total' } });
  const f = await rootFlow(sc, email(), { approve: ['data:read'], maxDepth: 1, constraints: calls(N) });
  const kids = [await newAgent(f, 'calls-a'), await newAgent(f, 'calls-b')];
  const kidCerts: string[] = [];
  for (const kid of kids) {
    kidCerts.push(await mustSubDelegate(f, f.agentId,
      { to_agent_id: kid, scopes: ['data:read'], constraints: calls(N) }));
  }
  const proofs = [];
  for (let i = 0; i < 3 * N; i++) proofs.push(await proofOf(f, kids[i % 2]!));
  const answers = await Promise.all(proofs.map((p) => verify(f.platform, p, 'data:read')));
  t.equal(answers.filter((r) => r.body?.decision === 'allow').length, N, `exactly ${N} of ${3 * N} allowed`);
  t.same([...new Set(answers.filter((r) => r.body?.decision !== 'allow').map((r) => r.body?.decision_reason))],
    ['rate_exceeded'], 'the others: rate_exceeded');
  const late = await verify(f.platform, await proofOf(f, kids[0]!), 'data:read');
  expectDecision(t, late, 'deny', 'rate_exceeded', undefined, 'one more later');
  t.same(late.body.link, { depth: 0, cert_id: f.certId }, 'naming the parent, whose limit is reached');
  const x = await f.platform.get(`/v1/service/decisions/${late.body.decision_id}`);
  t.equal(x.body.certificate.cert_id, f.certId, 'the explanation explains the parent');
  t.same(x.body.counters.map((c: { used: number; limit: number }) => [c.used, c.limit]), [[N, N]],
    'with the parent\'s counter');
});

/** A chain of depth 3 with a sibling beside the node at `at` (at ≥ 1), a proof-backed verify of each. */
async function cascadeAt(t: Test, at: number): Promise<void> {
  const f = await rootFlow(sc, email(), { maxDepth: 3 });
  const put = await f.user.req('PUT', `/v1/service/platforms/${f.reg.platform_id}/callback`, { callback_url: rx.url });
  t.equal(put.status, 200, put.text.slice(0, 200));
  const { agents, certs } = await chainOf(f, 3, 3, ['data:read']);
  let sibling: string | undefined;
  if (at >= 1) {
    sibling = await newAgent(f, `sibling-${at}`);
    await mustSubDelegate(f, agents[at - 1]!, { to_agent_id: sibling, scopes: ['data:read'] });
  }
  // Proofs made before the revocation (spec: a later verify of a proof built earlier is denied).
  const proofs = await Promise.all([...agents, ...(sibling ? [sibling] : [])].map((a) => proofOf(f, a)));
  const rev = await f.user.post(`/v1/service/delegations/${certs[at]}/revoke`, { reason: `test at ${at}` });
  t.equal(rev.status, 200, rev.text.slice(0, 200));
  t.same([...rev.body.descendants_revoked].sort(), certs.slice(at + 1).sort(), 'the answer lists the descendants');
  for (let d = 0; d <= 3; d++) {
    const r = await verify(f.platform, proofs[d], 'data:read');
    if (d < at) expectDecision(t, r, 'allow', 'authorized', undefined,
      `revoked at ${at}: depth ${d} (an ancestor) allowed`);
    else expectDecision(t, r, 'deny', 'delegation_revoked', undefined, `revoked at ${at}: depth ${d} denied`);
  }
  if (sibling) {
    expectDecision(t, await verify(f.platform, proofs[4], 'data:read'), 'allow', 'authorized', undefined,
      `revoked at ${at}: the sibling allowed`);
    t.ok(await proofOf(f, sibling), 'the sibling still presents');
  }
  const gone = await f.platform.post('/v1/service/challenge');
  const pr = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${agents[3]}/present`,
    { challenge: gone.body.challenge });
  t.equal(pr.body?.error?.code, 'no_active_delegation', 'the leaf presents no more');
  const revoked = certs.slice(at);
  const hits = await waitFor(`${revoked.length} delegation.revoked`, 10_000, () => {
    const h = rx.hits.filter((x) => x.body.event === 'delegation.revoked'
      && x.body.connection_id === f.reg.connection_id);
    return h.length >= revoked.length ? h : null;
  });
  await new Promise((r) => setTimeout(r, 300));
  const ids = rx.hits.filter((x) => x.body.event === 'delegation.revoked'
    && x.body.connection_id === f.reg.connection_id)
    .map((h) => h.body.cert_id as string);
  t.same([...ids].sort(), [...revoked].sort(), `one delegation.revoked per certificate revoked (${hits.length})`);
  if (at === 0) {
    const approvedHits = rx.hits.filter((x) => x.body.event === 'delegation.approved'
      && x.body.connection_id === f.reg.connection_id);
    const parents = approvedHits.map((h) => (h.body.cert_json as { payload: { parent?: { cert_id: string } } })
      .payload.parent?.cert_id).filter((p) => p !== undefined);
    t.same(parents.sort(), [certs[0], certs[1], certs[2]].sort(),
      'each sub-delegation sent delegation.approved, its cert_json naming the parent');
    t.ok(approvedHits.some((h) => /sub-delegates \(under /.test(String(h.body.delegation_key_statement))),
      'the key statement says an agent sub-delegates');
  }
  const again = await f.user.post(`/v1/service/delegations/${certs[at]}/revoke`, { reason: 'again' });
  t.equal(again.body.already_revoked, true, 'repeating it changes nothing');
}

for (const at of [0, 1, 2, 3]) t.test(`revoking the link at depth ${at}`, (t) => cascadeAt(t, at));

t.test('an AuthZEN grant check under a chain decides every link too', async (t) => {
  const f = await rootFlow(sc, email(), { approve: ['data:read', 'data:write'], maxDepth: 2 });
  const { agents, certs } = await chainOf(f, 2, 2, ['data:read']);
  const ask = (agent: string, scope: string) => pdp(f.platform, PATHS.evaluation,
    { subject: authzenAgent(agent), action: action(scope), resource: ANY });
  authzenDecision(t, await ask(agents[2]!, 'data:read'), true, 'authorized', 'depth 2: granted');
  authzenDecision(t, await ask(agents[2]!, 'data:write'), false, 'not_delegated', 'a scope only the root has');
  await sc.app.ctx.store.delegations.revokeCertificate(certs[1]!, 'test: alone', sc.clock.now(), null);
  sc.app.ctx.caches.markRevoked(certs[1]!);
  authzenDecision(t, await ask(agents[2]!, 'data:read'), false, 'delegation_revoked', 'its parent revoked alone');
  authzenDecision(t, await ask(agents[0]!, 'data:read'), true, 'authorized', 'the root still granted');
});

t.test('a stored link that does not verify: refused, naming the link', async (t) => {
  const f = await rootFlow(sc, email(), { maxDepth: 2 });
  const { agents, certs } = await chainOf(f, 2, 2, ['data:read']);
  const proof = await proofOf(f, agents[2]!);
  // Another connection to the sidecar's file (WAL), as a tampered database would look. The leaf: nothing has loaded
  // it yet (issuing a child caches its parent's chain, verified, as a verify does).
  const db = openDatabase(path.join(sc.dataDir, DB_FILE_NAME));
  t.teardown(() => db.close());
  const row = db.prepare('SELECT cert_json FROM certificates WHERE id = ?').get(certs[2]) as { cert_json: string };
  const tampered = JSON.parse(row.cert_json) as { payload: { scopes: string[] } };
  tampered.payload.scopes = ['data:read', 'data:write'];
  db.prepare('UPDATE certificates SET cert_json = ? WHERE id = ?').run(JSON.stringify(tampered), certs[2]);
  const r = await verify(f.platform, proof, 'data:read');
  t.equal(r.status, 400, r.text.slice(0, 200));
  t.equal(r.body?.error?.code, 'invalid_signature', 'the depth-2 link no longer verifies');
  t.same(r.body?.error?.link, { depth: 2, cert_id: certs[2] }, 'the refusal names it');
  t.equal(r.body?.error?.fault, 'bad_signature');
  t.notOk(r.body?.decision, 'never an allow');
});
