/**
 * AuthZEN 1.0, written from its text: discovery (the metadata document and
 * its `policy_decision_point`), the access evaluation (allow, deny, the
 * decision context), a malformed request ("Bad Request"), an unknown subject,
 * authentication, a proof verification and its replay (false), the request
 * id echo, and fields the PDP does not know (ignored).
 */
import t from 'tap';
import { Client, delegateAgent, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { bundleFor } from '../decide/helpers.js';
import { ANY, PATHS, action, agent, expectDecision, http, pdp } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'authzen@example.com', { approve: ['data:read', 'payments:send'],
    constraints: { methods: ['GET', 'POST'] } });
});
t.teardown(async () => { await sc.close(); });

t.test('discovery: the metadata document names the endpoints under the PDP identifier', async (t) => {
  const r = await new Client(sc.url).get(PATHS.metadata);
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^application\/json/);
  t.equal(r.body.policy_decision_point, sc.url, 'the URL the document was fetched under');
  t.equal(r.body.access_evaluation_endpoint, sc.url + PATHS.evaluation);
  t.equal(r.body.access_evaluations_endpoint, sc.url + PATHS.evaluations);
  t.equal(r.body.search_action_endpoint, sc.url + PATHS.searchAction);
  t.notOk('search_subject_endpoint' in r.body, 'absent: not served');
  t.notOk('search_resource_endpoint' in r.body, 'absent: not served');
  const s = await f.platform.post(PATHS.searchSubject, { resource: ANY, action: action('data:read') });
  t.equal(s.status, 404, 'an endpoint the metadata omits is not served');
});

t.test('discovery behind a public URL: SIDECAR_PUBLIC_URL is the identifier', async (t) => {
  const other = await startSidecar({ publicUrl: 'https://pdp.example.com/authz' });
  t.teardown(() => other.close());
  const r = await new Client(other.url).get(PATHS.metadata);
  t.equal(r.body.policy_decision_point, 'https://pdp.example.com/authz');
  t.equal(r.body.access_evaluation_endpoint, 'https://pdp.example.com/authz/access/v1/evaluation');
});

t.test('evaluation: allow is decision true, with a decision id', async (t) => {
  const c = expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: agent(f.agentId), action: action('data:read'), resource: http('GET', '/v1/data'),
  }), true, 'authorized');
  t.match(c.decision_id, /^[0-9a-f-]{36}$/);
});

t.test('evaluation: denies are decision false with the reason in the context', async (t) => {
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: agent(f.agentId), action: action('data:write'), resource: http('GET', '/v1/data'),
  }), false, 'not_delegated', 'a scope not delegated');
  const c = expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: agent(f.agentId), action: action('data:read'), resource: http('DELETE', '/v1/data'),
  }), false, 'constraint_denied', 'a method the constraint does not allow');
  t.equal(c.constraint, 'methods');
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: agent(f.agentId), action: action('data:read'), resource: ANY,
  }), false, 'constraint_denied', 'no method for a method constraint: closed');
});

t.test('unknown fields are ignored; properties are accepted', async (t) => {
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: { ...agent(f.agentId), properties: { department: 'Sales' } }, action: { name: 'data:read', properties: { x: 1 } },
    resource: { ...http('GET', '/v1/data'), properties: {} }, context: { time: '1985-10-26T01:22-07:00' }, extra: true,
  }), true, 'authorized');
});

t.test('a malformed request is 400 in the error shape, naming the member', async (t) => {
  const cases: [unknown, string][] = [
    [{ action: action('data:read'), resource: ANY }, 'subject'],
    [{ subject: agent(f.agentId), resource: ANY }, 'action'],
    [{ subject: agent(f.agentId), action: action('data:read') }, 'resource'],
    [{ subject: { type: 'agent' }, action: action('data:read'), resource: ANY }, 'subject.id'],
    [{ subject: agent(f.agentId), action: { name: 7 }, resource: ANY }, 'action.name'],
    [{ subject: agent(f.agentId), action: action('data:read'), resource: ANY, context: [] }, 'context'],
    [[], 'body'],
  ];
  for (const [body, field] of cases) {
    const r = await pdp(f.platform, PATHS.evaluation, body);
    t.equal(r.status, 400, `${field}: 400`);
    t.equal(r.body?.error?.code, 'invalid_request', `${field}: invalid_request`);
    t.equal(r.body?.error?.field, field, `${field}: named`);
    t.equal(r.body?.decision, undefined, `${field}: no decision`);
  }
  const raw = await f.platform.post(PATHS.evaluation, undefined, { raw: '{"subject":', headers: { 'content-type': 'application/json' } });
  t.equal(raw.status, 400, 'not JSON: 400');
  t.equal(raw.body?.error?.code, 'invalid_request');
});

t.test('authentication: no or a wrong API key is 401, never a decision', async (t) => {
  const body = { subject: agent(f.agentId), action: action('data:read'), resource: http('GET', '/v1/data') };
  for (const apiKey of [null, 'sk_live_wrong']) {
    const r = await pdp(f.platform, PATHS.evaluation, body, { apiKey });
    t.equal(r.status, 401);
    t.equal(r.body?.error?.code, 'invalid_api_key');
    t.equal(r.body?.decision, undefined);
  }
});

t.test('an unknown subject (or another connection\'s agent) is false with an error', async (t) => {
  const r = await pdp(f.platform, PATHS.evaluation, {
    subject: agent('agt_does_not_exist'), action: action('data:read'), resource: ANY });
  const c = expectDecision(t, r, false);
  t.equal((c.error as { code?: string }).code, 'agent_not_found');
  t.equal((c.error as { status?: number }).status, 404);
  const stranger = await specFlow(sc, 'stranger@example.com', { approve: ['data:read'] });
  const s = expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: agent(stranger.agentId), action: action('data:read'), resource: ANY }), false);
  t.equal((s.error as { code?: string }).code, 'agent_not_found', 'a stranger\'s agent is not told apart');
  const wrongType = expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: { type: 'user', id: 'alice@example.com' }, action: action('data:read'), resource: ANY }), false);
  t.equal((wrongType.error as { field?: string }).field, 'subject.type');
});

t.test('an agent with no delegation is not_delegated', async (t) => {
  const a = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents`, { name: 'bare', agent_type: 'api_agent' });
  t.equal(a.status, 200);
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, {
    subject: agent(a.body.agent_id), action: action('data:read'), resource: ANY }), false, 'not_delegated');
});

t.test('a revoked delegation is delegation_revoked', async (t) => {
  const g = await delegateAgent(f, 'to-revoke', { approve: ['data:read'] });
  const body = { subject: agent(g.agentId), action: action('data:read'), resource: ANY };
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, body), true, 'authorized', 'before');
  const rv = await f.user.post(`/v1/service/delegations/${g.certId}/revoke`, { reason: 'test' });
  t.equal(rv.status, 200, `revoke ${rv.text}`);
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, body), false, 'delegation_revoked', 'after');
});

t.test('proof verification: a proof in the context is verify; its replay is false', async (t) => {
  const bundle = await bundleFor(f);
  const body = { subject: agent(f.agentId), action: action('data:read'), resource: http('GET', '/v1/data'),
    context: { proof: bundle } };
  const first = expectDecision(t, await pdp(f.platform, PATHS.evaluation, body), true, 'authorized', 'first use');
  t.match(first.decision_id, /^[0-9a-f-]{36}$/);
  const replay = expectDecision(t, await pdp(f.platform, PATHS.evaluation, body), false, undefined, 'replay');
  t.equal((replay.error as { code?: string }).code, 'invalid_challenge', 'the spent challenge');
  const header = Buffer.from(JSON.stringify(await bundleFor(f))).toString('base64');
  expectDecision(t, await pdp(f.platform, PATHS.evaluation, { ...body, context: { proof: header } }), true, 'authorized',
    'the header form (base64)');
  const other = await delegateAgent(f, 'other', { approve: ['data:read'] });
  const theirs = await bundleFor(other);
  const c = expectDecision(t, await pdp(f.platform, PATHS.evaluation, { ...body, context: { proof: theirs } }), false,
    undefined, 'a proof of another agent than the subject');
  t.equal((c.error as { code?: string }).code, 'invalid_proof');
});

t.test('request identification: X-Request-ID is echoed', async (t) => {
  const r = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), action: action('data:read'),
    resource: http('GET', '/v1/data') }, { headers: { 'x-request-id': 'bfe9eb29-ab87-4ca3-be83-a1d5d8305716' } });
  t.equal(r.headers.get('x-request-id'), 'bfe9eb29-ab87-4ca3-be83-a1d5d8305716');
});
