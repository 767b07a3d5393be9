/**
 * AuthZEN 1.0 action search, from its text ("any result ... when subsequently
 * used in an Access Evaluation API call, SHOULD result in a decision true"):
 * the results are exactly the scopes an evaluation with the same subject,
 * resource and context allows, for several resources and contexts; a revoked
 * delegation has none; pagination (`page.limit`, `next_token`); an unknown
 * subject; a malformed request. Searching records no audit event.
 */
import t from 'tap';
import { delegateAgent, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll } from '../decide/helpers.js';
import { ANY, PATHS, agent, http, pdp } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
const SCOPES = ['data:read', 'data:write', 'payments:send', 'data:delete'];
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'search@example.com', { scopes: SCOPES, approve: ['data:read', 'data:write', 'payments:send'],
    constraints: { methods: ['GET'], max_amount: { amount: '10.00', currency: 'USD' },
      require_approval: { scopes: ['data:write'] } } });
});
t.teardown(async () => { await sc.close(); });

const names = (b: { results: { name: string }[] }): string[] => b.results.map((r) => r.name);

t.test('the results are exactly what evaluation allows', async (t) => {
  const cases: { resource: { type: string; id: string }; context?: Record<string, string> }[] = [
    { resource: http('GET', '/a') },
    { resource: http('POST', '/a') },
    { resource: http('GET', '/pay'), context: { amount: '5.00', currency: 'USD' } },
    { resource: http('GET', '/pay'), context: { amount: '50.00', currency: 'USD' } },
    { resource: ANY },
  ];
  const audited = (await auditAll(f.user)).length;
  for (const c of cases) {
    const s = await pdp(f.platform, PATHS.searchAction, { subject: agent(f.agentId), ...c });
    t.equal(s.status, 200, s.text.slice(0, 200));
    const allowed: string[] = [];
    for (const scope of SCOPES) {
      const e = await pdp(f.platform, PATHS.evaluation, { subject: agent(f.agentId), action: { name: scope }, ...c });
      if (e.body.decision === true) allowed.push(scope);
    }
    t.same(names(s.body), allowed, `${c.resource.id} ${JSON.stringify(c.context ?? {})}: ${allowed.join(', ')}`);
    t.same(s.body.page, { next_token: '', count: allowed.length, total: allowed.length });
  }
  const get = await pdp(f.platform, PATHS.searchAction, { subject: agent(f.agentId), resource: http('GET', '/a') });
  t.same(names(get.body), ['data:read'], 'data:write needs an approval; payments:send an amount');
  const pay = await pdp(f.platform, PATHS.searchAction, { subject: agent(f.agentId), resource: http('GET', '/pay'),
    context: { amount: '5.00', currency: 'USD' } });
  t.same(names(pay.body), ['data:read', 'payments:send']);
  const searchesAudited = (await auditAll(f.user)).length - audited;
  t.equal(searchesAudited, cases.length * SCOPES.length, 'only the evaluations were audited, not the searches');
});

t.test('pagination: page.limit and next_token', async (t) => {
  const body = { subject: agent(f.agentId), resource: http('GET', '/pay'), context: { amount: '5.00', currency: 'USD' } };
  const p1 = await pdp(f.platform, PATHS.searchAction, { ...body, page: { limit: 1 } });
  t.same(names(p1.body), ['data:read']);
  t.equal(p1.body.page.count, 1);
  t.equal(p1.body.page.total, 2);
  t.not(p1.body.page.next_token, '', 'more results: a token');
  const p2 = await pdp(f.platform, PATHS.searchAction, { ...body, page: { limit: 1, token: p1.body.page.next_token } });
  t.same(names(p2.body), ['payments:send']);
  t.equal(p2.body.page.next_token, '', 'the end');
  for (const page of [{ limit: -1 }, { limit: 1.5 }, { token: 'forged' }, 'x']) {
    const r = await pdp(f.platform, PATHS.searchAction, { ...body, page });
    t.equal(r.status, 400, `${JSON.stringify(page)}: 400`);
    t.equal(r.body?.error?.code, 'invalid_request');
  }
});

t.test('a revoked delegation allows nothing', async (t) => {
  const g = await delegateAgent(f, 'revoked', { approve: ['data:read'] });
  const before = await pdp(f.platform, PATHS.searchAction, { subject: agent(g.agentId), resource: ANY });
  t.same(names(before.body), ['data:read']);
  t.equal((await f.user.post(`/v1/service/delegations/${g.certId}/revoke`, { reason: 'test' })).status, 200);
  const after = await pdp(f.platform, PATHS.searchAction, { subject: agent(g.agentId), resource: ANY });
  t.same(names(after.body), []);
});

t.test('an unknown subject is 404; a malformed request 400; a proof is refused', async (t) => {
  const u = await pdp(f.platform, PATHS.searchAction, { subject: agent('agt_nobody'), resource: ANY });
  t.equal(u.status, 404);
  t.equal(u.body?.error?.code, 'agent_not_found');
  for (const [body, field] of [[{ resource: ANY }, 'subject'], [{ subject: agent(f.agentId) }, 'resource'],
    [{ subject: agent(f.agentId), resource: { type: 'book', id: '1' } }, 'resource.type']] as const) {
    const r = await pdp(f.platform, PATHS.searchAction, body);
    t.equal(r.status, 400, `${field}: 400`);
    t.equal(r.body?.error?.field, field);
  }
  const p = await pdp(f.platform, PATHS.searchAction, { subject: agent(f.agentId), resource: ANY, context: { proof: {} } });
  t.equal(p.status, 400);
  t.equal(p.body?.error?.field, 'context.proof');
});
