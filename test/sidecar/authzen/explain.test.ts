/**
 * Explained decisions: a real decision for each kind of deny (and an allow),
 * its explanation read by `decision_id` — the stage, the certificate, the
 * scope asked and granted, each constraint with value and limit, approval,
 * counters — and, for a deny, its "would allow" applied for real (a new
 * delegation, a granted approval), after which the same evaluation allows.
 * Who may read it: the connection's API key and the account holder, nobody
 * else; never a proof or a key in it.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { bundleFor } from '../decide/helpers.js';
import { ANY, PATHS, action, agent, http, pdp } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
const SCOPES = ['data:read', 'data:write', 'payments:send', 'data:delete'];
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'explain@example.com', { scopes: SCOPES, approve: ['data:read', 'payments:send', 'data:write'],
    constraints: { methods: ['GET', 'POST'], budget: { amount: '10.00', currency: 'USD', period: 'day' },
      require_approval: { scopes: ['data:write'] } } });
});
t.teardown(async () => { await sc.close(); });

/** Approves a new delegation for the flow's agent (the agent's newest certificate from then on). */
async function redelegate(scopes: string[], constraints: unknown): Promise<void> {
  const sr = await f.user.post('/v1/service/delegations/self-request', { connection_id: f.reg.connection_id, agent_id: f.agentId });
  if (sr.status !== 200) throw new Error(`self-request: ${sr.text}`);
  const ap = await f.user.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`,
    { approved_scope: scopes, constraints });
  if (ap.status !== 200) throw new Error(`approve: ${ap.text}`);
}

/** Evaluates, then reads the explanation with the platform's key. */
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
async function explained(body: Record<string, unknown>): Promise<{ decision: boolean; x: Json }> {
  const r = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), ...body });
  if (r.status !== 200) throw new Error(`evaluation: ${r.text}`);
  const x = await f.platform.get(`/v1/service/decisions/${r.body.context.decision_id}`);
  if (x.status !== 200) throw new Error(`explanation: ${x.status} ${x.text}`);
  return { decision: r.body.decision, x: x.body };
}

t.test('an allow: stage, certificate, scope, constraints with values and limits, counters', async (t) => {
  const { decision, x } = await explained({ action: action('payments:send'), resource: http('POST', '/pay'),
    context: { amount: '4.00', currency: 'USD' } });
  t.equal(decision, true);
  t.equal(x.decision, 'allow');
  t.equal(x.reason, 'authorized');
  t.equal(x.mode, 'grant');
  t.equal(x.certificate.agent_id, f.agentId);
  t.same(x.scope, { asked: 'payments:send', granted: ['data:read', 'data:write', 'payments:send'], delegated: true });
  t.same(x.constraints, [{ name: 'methods', limit: ['GET', 'POST'], value: { method: 'POST' }, holds: true }]);
  t.same(x.counters.map((c: { kind: string; used: string; this_call: string; limit: string }) =>
    [c.kind, c.used, c.this_call, c.limit]), [['budget', '0.00', '4.00', '10.00']]);
  t.same(x.would_allow, []);
  t.notMatch(JSON.stringify(x), /public_key|"sig"|secret|proof_bundle/, 'no key, signature or proof');
});

t.test('a verify decision has an explanation too (decision_id = audit_event_id)', async (t) => {
  const v = await f.platform.post('/v1/service/verify', { proof_bundle: await bundleFor(f), required_scope: 'data:read',
    context: { method: 'GET', path: '/x' } });
  t.equal(v.body.decision_id, v.body.audit_event_id);
  const x = await f.platform.get(`/v1/service/decisions/${v.body.decision_id}`);
  t.equal(x.status, 200);
  t.equal(x.body.mode, 'verify');
  t.equal(x.body.stage, 'delegation');
  t.notMatch(x.text, /challenge|"sig"|public_key/, 'nothing of the proof');
});

t.test('deny, explained, and what would allow it does', async (t) => {
  // not_delegated: delegate the scope.
  let e = await explained({ action: action('data:delete'), resource: http('GET', '/x') });
  t.equal(e.x.reason, 'not_delegated');
  t.equal(e.x.stage, 'delegation');
  t.same(e.x.would_allow, [{ change: 'delegate_scope', scope: 'data:delete' }]);
  // constraint_denied (methods): add the method.
  e = await explained({ action: action('data:read'), resource: http('DELETE', '/x') });
  t.equal(e.x.reason, 'constraint_denied');
  t.same(e.x.constraints[0], { name: 'methods', limit: ['GET', 'POST'], value: { method: 'DELETE' }, holds: false,
    missing: false });
  t.same(e.x.would_allow, [{ change: 'add_to_constraint', constraint: 'methods', value: 'DELETE' }]);
  // budget_exceeded: raise the budget to what was used plus this call.
  e = await explained({ action: action('payments:send'), resource: http('POST', '/pay'),
    context: { amount: '25.00', currency: 'USD' } });
  t.equal(e.x.reason, 'budget_exceeded');
  t.equal(e.x.stage, 'limits');
  t.same(e.x.would_allow[0], { change: 'raise_limit', constraint: 'budget', to: '25.00' });
  // approval_required (a grant check: no approval exists yet): an approval.
  e = await explained({ action: action('data:write'), resource: http('POST', '/w') });
  t.equal(e.x.reason, 'approval_required');
  t.equal(e.x.stage, 'approval');
  t.same(e.x.approval, { rule: { scopes: ['data:write'] }, approval_id: null, state: 'none' });
  t.same(e.x.would_allow, [{ change: 'grant_approval' }]);

  // Apply the changes: one new delegation with the scope, the method and the budget.
  await redelegate([...SCOPES], { methods: ['GET', 'POST', 'DELETE'], budget: { amount: '25.00', currency: 'USD', period: 'day' },
    require_approval: { scopes: ['data:write'] } });
  for (const [name, body] of [
    ['delegate_scope', { action: action('data:delete'), resource: http('GET', '/x') }],
    ['add_to_constraint', { action: action('data:read'), resource: http('DELETE', '/x') }],
    ['raise_limit', { action: action('payments:send'), resource: http('POST', '/pay'), context: { amount: '25.00', currency: 'USD' } }],
  ] as const) {
    const r = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), ...body });
    t.equal(r.body.decision, true, `${name} applied: allowed (${r.text.slice(0, 150)})`);
  }

  // The approval: a proof verification requests it, the account holder grants it, the next proof is allowed.
  const op = { action: action('data:write'), resource: http('POST', '/w') };
  const first = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), ...op,
    context: { proof: await bundleFor(f) } });
  t.equal(first.body.context.reason, 'approval_required');
  const id = first.body.context.approval_id as string;
  const x = await f.platform.get(`/v1/service/decisions/${first.body.context.decision_id}`);
  t.same(x.body.would_allow, [{ change: 'grant_approval', approval_id: id }]);
  t.equal(x.body.approval.state, 'none', 'no approval existed before this decision');
  t.equal((await f.user.post(`/v1/service/approvals/${id}/approve`)).status, 200);
  const again = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), ...op,
    context: { proof: await bundleFor(f) } });
  t.equal(again.body.decision, true, 'grant_approval applied: allowed');

  // delegation_revoked: a new delegation.
  const certs = await f.user.get('/v1/service/delegations');
  for (const c of certs.body.certificates ?? certs.body.items ?? []) {
    if (c.status === 'approved') await f.user.post(`/v1/service/delegations/${c.cert_id}/revoke`, { reason: 'test' });
  }
  e = await explained({ action: action('data:read'), resource: http('GET', '/x') });
  t.equal(e.x.reason, 'delegation_revoked');
  t.same(e.x.would_allow, [{ change: 'new_delegation', scope: 'data:read' }]);
  await redelegate(['data:read'], undefined);
  const back = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), action: action('data:read'), resource: ANY });
  t.equal(back.body.decision, true, 'new_delegation applied: allowed');
});

t.test('who may read an explanation', async (t) => {
  const r = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), action: action('data:read'), resource: ANY });
  const id = r.body.context.decision_id as string;
  t.equal((await f.user.get(`/v1/service/decisions/personal/${id}`)).status, 200, 'the account holder');
  const other = await specFlow(sc, 'explain-other@example.com', {});
  const k = await other.platform.get(`/v1/service/decisions/${id}`);
  t.equal(k.status, 404, 'another connection\'s key');
  t.equal(k.body.error.code, 'decision_not_found');
  t.equal((await other.user.get(`/v1/service/decisions/personal/${id}`)).status, 404, 'another account');
  t.equal((await f.platform.get('/v1/service/decisions/no-such-id')).status, 404, 'unknown');
});
