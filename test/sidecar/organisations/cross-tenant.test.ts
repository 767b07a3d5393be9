/**
 * The cross-tenant matrix (issue 32): two organisations, each with a member, an invitation, a
 * platform, its connection and key, an agent, a pending request, a certificate, a webhook
 * delivery and a decision. Every operation of the API that names a resource is called by the
 * second organisation (its owner's session, and its platform's API key) with the first one's ids:
 * none succeeds, and none answers with anything of the first. Every listing of the second
 * organisation holds none of the first one's ids. The first organisation is unchanged afterwards.
 */
import t from 'tap';
import { ROUTES } from '../../../sidecar/api/operations.js';
import { Client, login, onboard, present, startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';

interface Tenant { owner: Client; platform: Client; ids: Record<string, string> }

/** The body of each operation that needs one to be accepted. */
const BODIES: Record<string, (ids: Record<string, string>) => unknown> = {
  setMemberRole: () => ({ role: 'member' }),
  approveDelegationRequest: () => ({ approved_scope: ['data:read'] }),
  revokeCertificate: () => ({ reason: 'cross-tenant probe' }),
  connectPlatform: () => ({ allowed_scopes: ['data:read'] }),
  requestDelegation: (ids) => ({ agent_id: ids.agent_id, scopes: ['data:read'] }),
  presentProof: () => ({ challenge: 'A'.repeat(43) }),
  createAgent: () => ({ name: 'x', agent_type: 'api_agent' }),
  setCallbackUrl: () => ({ callback_url: null }),
  updatePlatform: () => ({ name: 'cross-tenant probe' }),
};

async function tenant(sc: TestSidecar, name: string): Promise<Tenant> {
  const owner = await login(sc, `owner@${name}.example.org`);
  await owner.post('/v1/auth/onboarding/profile', { first_name: 'O', last_name: name });
  const orgId = (await owner.post('/v1/auth/onboarding/account-type', { account_type: 'organization', organization_name: name }))
    .body.organization_id as string;
  const inv = await owner.post('/v1/service/organization/invitations', { email: `member@${name}.example.org`, role: 'member' });
  const member = await onboard(sc, `member@${name}.example.org`);
  await member.post(`/v1/service/invitations/${inv.body.invitation_id}/accept`);
  const inv2 = await owner.post('/v1/service/organization/invitations', { email: `later@${name}.example.org`, role: 'auditor' });
  const reg = await owner.post('/v1/service/platforms', { name: `${name} API`, surface_type: 'agentic_api', description: 'd',
    default_allowed_scopes: ['data:read', 'data:write'], callback_url: 'http://127.0.0.1:9/hook' });
  const platform = new Client(sc.url);
  platform.apiKey = reg.body.api_key;
  const agent = await platform.post(`/v1/service/connections/${reg.body.connection_id}/agents`, { name: 'a', agent_type: 'api_agent' });
  const sr = await owner.post('/v1/service/delegations/self-request', { connection_id: reg.body.connection_id });
  const ap = await owner.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`, { approved_scope: ['data:read'] });
  const pending = await platform.post(`/v1/service/connections/${reg.body.connection_id}/delegation-requests`,
    { agent_id: agent.body.agent_id, scopes: ['data:write'] });
  const f = { user: owner, platform, reg: reg.body, agentId: agent.body.agent_id, requestId: sr.body.request_id, certId: ap.body.cert_id };
  const v = await platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read' });
  let delivery: string | undefined;
  for (let i = 0; i < 100 && delivery === undefined; i++) {
    delivery = (await owner.get('/v1/service/webhooks/deliveries')).body.deliveries?.[0]?.delivery_id;
    if (delivery === undefined) await new Promise((r) => setTimeout(r, 20));
  }
  const memberId = (await member.get('/v1/auth/session')).body.account_id as string;
  return {
    owner, platform,
    ids: {
      organization_id: orgId, account_id: memberId, invitation_id: inv2.body.invitation_id, platform_id: reg.body.platform_id,
      connection_id: reg.body.connection_id, agent_id: agent.body.agent_id, request_id: pending.body.request_id,
      cert_id: ap.body.cert_id, decision_id: v.body.decision_id, delivery_id: delivery ?? 'none', approval_id: 'none',
    },
  };
}

t.test('the second organisation reaches nothing of the first', async (t) => {
  const sc = await startSidecar({ sendCodePerMinute: 1000 });
  t.teardown(() => sc.close());
  const a = await tenant(sc, 'alpha');
  const b = await tenant(sc, 'beta');
  t.not(a.ids.delivery_id, 'none', 'a webhook delivery exists');
  const aIds = Object.values(a.ids).filter((v) => v !== 'none');
  const leaks = (text: string): string[] => aIds.filter((id) => text.includes(id));
  const snapshot = async (): Promise<string> => JSON.stringify(await Promise.all([
    '/v1/service/platforms', '/v1/service/connections', '/v1/service/agents', '/v1/service/delegations',
    '/v1/service/delegations/requests', '/v1/service/organization/members', '/v1/service/organization/invitations',
    '/v1/service/webhooks/deliveries',
  ].map(async (p) => (await a.owner.get(p)).body)));
  const before = await snapshot();

  let named = 0;
  for (const r of ROUTES) {
    if (r.auth === 'none') continue;
    const as = r.auth === 'api_key' ? b.platform : b.owner;
    const params = [...r.url.matchAll(/:(\w+)/g)].map((x) => x[1]!);
    if (params.length === 0) {
      if (r.method !== 'GET') continue;
      const res = await as.get(r.url);
      t.same(leaks(res.text), [], `${r.operation.operationId}: B's listing holds nothing of A's`);
      continue;
    }
    named++;
    const url = r.url.replace(/:(\w+)/g, (_m, n: string) => a.ids[n] ?? `unknown-${n}`);
    // Bodies that would be accepted were the ids B's own, so a refusal is about the ids, not the body.
    const body = BODIES[r.operation.operationId]?.(a.ids) ?? {};
    const res = r.method === 'GET' ? await as.get(url) : await as.req(r.method, url, body);
    t.ok(res.status >= 400, `${r.operation.operationId} with A's ids is refused (${res.status} ${res.body?.error?.code ?? ''} ${res.body?.error?.message ?? ''})`);
    t.same(leaks(res.text.replace(url, '')), [], `${r.operation.operationId}: the refusal holds nothing of A's`);
  }
  t.ok(named >= 25, `${named} operations that name a resource`);
  t.equal(await snapshot(), before, 'A is unchanged');
});
