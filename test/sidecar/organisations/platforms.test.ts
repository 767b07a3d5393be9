/**
 * An organisation's platforms end to end (docs/organisations.md, "Platforms"): an admin registers
 * several; the approver, not the admin, grants an agent its delegation; the agent's proofs verify
 * under the organisation's identity; the organisation's audit and usage are its own; a personal
 * workspace cannot use the organisation route, nor an organisation the personal one.
 */
import t from 'tap';
import { Client, expectError, onboard, startSidecar } from '../../helpers/sidecar.js';
import { addMember, orgOwner } from '../../helpers/organisations.js';

t.test('an organisation registers platforms and grants its agents authority', async (t) => {
  const sc = await startSidecar({ sendCodePerMinute: 100 });
  t.teardown(() => sc.close());
  const { c: owner, orgId } = await orgOwner(sc, 'owner@acme.example.org', 'Acme');
  const admin = await addMember(owner, sc, orgId, 'admin@acme.example.org', 'admin');
  const approver = await addMember(owner, sc, orgId, 'approver@acme.example.org', 'approver');

  const body = (name: string) => ({ name, surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'data:write'] });
  const regs = [];
  for (const name of ['Booking API', 'CRM API', 'Search API']) {
    const r = await admin.post('/v1/service/platforms', body(name));
    t.equal(r.status, 200, `the admin registers ${name}`);
    t.match(r.body, { name, publish_state: 'draft', api_key: /^aak_/ });
    regs.push(r.body);
  }
  t.equal((await owner.get('/v1/service/platforms')).body.platforms.length, 3, 'the organisation has three platforms');
  expectError(t, await approver.post('/v1/service/platforms', body('Nope')), 403, 'role_forbidden');
  expectError(t, await admin.post('/v1/service/platforms/personal', body('Nope')), 403, 'account_type_not_supported',
    'an organisation does not use the personal route');
  const solo = await onboard(sc, 'solo@example.com');
  expectError(t, await solo.post('/v1/service/platforms', body('Nope')), 403, 'account_type_not_supported',
    'a personal workspace does not use the organisation route');
  t.equal((await solo.post('/v1/service/platforms/personal', body('Mine'))).status, 200, 'but registers its one platform');

  // The platform adds an agent; the admin cannot grant it authority, the approver can.
  const platform = new Client(sc.url);
  platform.apiKey = regs[0].api_key;
  const agent = await platform.post(`/v1/service/connections/${regs[0].connection_id}/agents`, { name: 'bot', agent_type: 'api_agent' });
  t.equal(agent.status, 200);
  expectError(t, await admin.post('/v1/service/delegations/self-request', { connection_id: regs[0].connection_id }), 403,
    'role_forbidden', 'an admin does not grant authority');
  const sr = await approver.post('/v1/service/delegations/self-request', { connection_id: regs[0].connection_id });
  t.equal(sr.status, 200);
  const ap = await approver.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`, { approved_scope: ['data:read'] });
  t.equal(ap.status, 200, 'the approver grants fewer scopes than requested');
  const identity = await owner.get('/v1/service/identity');
  t.equal(identity.status, 200);

  // A proof of the agent verifies; the decision is in the organisation's audit, not the people's.
  const ch = await platform.post('/v1/service/challenge');
  const pr = await platform.post(`/v1/service/connections/${regs[0].connection_id}/agents/${agent.body.agent_id}/present`,
    { challenge: ch.body.challenge });
  const v = await platform.post('/v1/service/verify', { proof_bundle: pr.body.proof_bundle, required_scope: 'data:read' });
  t.match(v.body, { decision: 'allow', decision_reason: 'authorized' });
  const w = await platform.post('/v1/service/verify', { proof_bundle: pr.body.proof_bundle, required_scope: 'data:write' });
  t.not(w.body?.decision, 'allow', 'a scope the approver did not grant is refused');
  const auditor = await addMember(owner, sc, orgId, 'auditor@acme.example.org', 'auditor');
  const events = (await auditor.get('/v1/service/audit/personal?limit=200')).body.events as { event_type: string }[];
  t.ok(events.some((e) => e.event_type === 'proof.verified'), 'the auditor reads the verify in the organisation\'s audit');
  t.equal((await auditor.get('/v1/service/usage/personal')).status, 200);
  const me = (await owner.get('/v1/auth/session')).body.account_id as string;
  await owner.post('/v1/auth/session/workspace', { workspace_id: me });
  t.same((await owner.get('/v1/service/platforms')).body.platforms, [], 'the owner\'s personal workspace has none of them');
});
