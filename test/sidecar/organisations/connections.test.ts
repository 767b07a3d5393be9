/**
 * Connections made by account holders (issue 32; docs/organisations.md, "Connections"), black box:
 * the sidecar runs as a process started the way `npm start` starts it (bin/agent-authz-sidecar.mjs
 * on the compiled sources, SQLite, configured by its environment; test/helpers/started-sidecar.ts),
 * with a real DNS server and a real webhook receiver. A publisher organisation verifies its domain
 * and publishes a platform; a personal account holder and an organisation (through an approver who
 * is not its owner) connect; the platform learns each connection's key only from its signed
 * `connection.created` webhook, uses it to add an agent and ask for a delegation, proposing
 * constraints; the approvers grant fewer scopes, one with stricter constraints (looser ones are
 * refused), one keeping the proposal; proofs verify per connection within the approved constraints
 * and are denied outside them; removing one connection (from the platform's side) denies its
 * proofs and leaves the other working; each connection and its removal is an audit event of both the
 * account holder and the publisher, with no secret in it; the process then stops on SIGTERM with exit 0.
 */
import t from 'tap';
import { Client, expectError, onboard } from '../../helpers/sidecar.js';
import { startSidecarCommand } from '../../helpers/started-sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../../helpers/dnsmasq.js';
import { addMember, orgOwner } from '../../helpers/organisations.js';
import { startHookReceiver, transportProblems, waitFor } from '../webhooks/fixtures/hooks.js';
import type { Hit } from '../webhooks/fixtures/hooks.js';

if (dnsmasqMissing()) {
  t.pass('skipped: dnsmasq is not installed (.ci/run installs it)', { skip: true });
} else {
  t.test('two account holders connect to a published platform', async (t) => {
    const dns = await startDnsmasq(['example.org'], {});
    t.teardown(() => dns.close());
    const rx = await startHookReceiver();
    t.teardown(() => rx.close());
    const proc = await startSidecarCommand(t, { SIDECAR_DNS_SERVERS: dns.address });
    const sc = proc.sc;

    // The publisher: a verified domain and a published platform with a callback.
    const { c: pub, orgId: pubId } = await orgOwner(sc, 'owner@travel.example.org', 'Travel Co');
    const reg = await pub.post('/v1/service/platforms', { name: 'Trip Planner', surface_type: 'agentic_api', description: 'Plans trips.',
      default_allowed_scopes: ['data:read', 'data:write', 'payments:send'], callback_url: rx.url });
    const claim = await pub.req('PUT', '/v1/service/organization/domain', { domain: 'travel.example.org' });
    await dns.setRecords({ [claim.body.record_name]: [[claim.body.record_text]] });
    t.equal((await pub.post('/v1/service/organization/domain/verify')).body.state, 'verified');
    t.equal((await pub.post(`/v1/service/platforms/${reg.body.platform_id}/publish`)).body.publish_state, 'published');
    const secret = reg.body.webhook_signing_secret as string;

    // Two account holders connect: a person, and an organisation through its admin.
    const alice = await onboard(sc, 'alice@example.com');
    const aliceId = (await alice.get('/v1/auth/session')).body.account_id as string;
    const { c: acmeOwner, orgId: acmeId } = await orgOwner(sc, 'owner@acme.example.org', 'Acme');
    const acmeAdmin = await addMember(acmeOwner, sc, acmeId, 'admin@acme.example.org', 'admin');
    const acmeApprover = await addMember(acmeOwner, sc, acmeId, 'approver@acme.example.org', 'approver');

    const connectUrl = `/v1/service/directory/${reg.body.platform_id}/connect`;
    expectError(t, await alice.post(connectUrl, { allowed_scopes: ['data:read', 'Not A Scope'] }), 400, 'invalid_scopes');
    expectError(t, await alice.post(connectUrl, { allowed_scopes: ['data:read', 'execute:tool'] }),
      400, 'scope_not_offered');
    const aConn = await alice.post(connectUrl, { allowed_scopes: ['data:read', 'payments:send'] });
    t.match(aConn.body, { platform_id: reg.body.platform_id, allowed_scopes: ['data:read', 'payments:send'], status: 'active' });
    t.notMatch(aConn.text, /aak_/, 'the key is not in the answer');
    expectError(t, await alice.post(connectUrl, { allowed_scopes: ['data:read'] }), 409, 'already_connected');
    expectError(t, await acmeApprover.post(connectUrl, { allowed_scopes: ['data:read'] }), 403, 'role_forbidden');
    const bConn = await acmeAdmin.post(connectUrl, { allowed_scopes: ['data:read', 'data:write'] });
    t.equal(bConn.status, 200);
    expectError(t, await alice.post(`/v1/service/directory/${(await alice.get('/v1/auth/session')).body.account_id}/connect`,
      { allowed_scopes: ['data:read'] }), 404, 'platform_not_found', 'only a published platform');

    // The platform learns each key from its signed connection.created.
    const created = (id: string): Promise<Hit> => waitFor(`connection.created for ${id}`, 10_000, () => rx.hits.find((h) => h.body.event === 'connection.created' && h.body.connection_id === id));
    const aHook = await created(aConn.body.connection_id);
    const bHook = await created(bConn.body.connection_id);
    for (const h of [aHook, bHook]) t.same(transportProblems(h, secret), [], 'signed with the platform\'s webhook secret');
    t.same(Object.keys(aHook.body).sort(), ['allowed_scopes', 'api_key', 'callback_url', 'connection_id', 'delivery_id', 'event',
      'occurred_at', 'org_id', 'org_name', 'platform_id', 'webhook_signing_secret'], 'exactly the spec\'s fields');
    t.match(bHook.body, { org_id: acmeId, org_name: 'Acme', allowed_scopes: ['data:read', 'data:write'], callback_url: rx.url,
      webhook_signing_secret: secret, api_key: /^aak_[0-9a-f]{12}_/ });
    t.not(aHook.body.api_key, bHook.body.api_key);
    const auditText = JSON.stringify((await acmeOwner.get('/v1/service/audit/personal?limit=200')).body);
    t.notMatch(auditText, new RegExp(bHook.body.api_key as string), 'the key is in no audit event');

    // With each key the platform adds an agent and asks for authority, proposing constraints; the approvers grant
    // fewer scopes: Alice with stricter constraints (looser ones are refused), Acme keeping the proposal.
    const flows: { platform: Client; conn: string; agentId: string }[] = [];
    const proposals = [
      { methods: ['GET', 'POST'], path_prefixes: ['/trips'], max_amount: { amount: '100.00', currency: 'EUR' } },
      { tenants: ['acme'] },
    ];
    const stricter = { methods: ['GET'], path_prefixes: ['/trips/paris'] };
    const granted: unknown[] = [stricter, proposals[1]];
    for (const [i, hook, approver, ask, grant] of [
      [0, aHook, alice, ['data:read', 'payments:send'], ['data:read']],
      [1, bHook, acmeApprover, ['data:read', 'data:write'], ['data:read']],
    ] as const) {
      const platform = new Client(sc.url);
      platform.apiKey = hook.body.api_key as string;
      const conn = hook.body.connection_id as string;
      const agent = await platform.post(`/v1/service/connections/${conn}/agents`, { name: 'planner', agent_type: 'api_agent' });
      t.equal(agent.status, 200);
      expectError(t, await platform.post(`/v1/service/connections/${conn}/delegation-requests`,
        { agent_id: agent.body.agent_id, scopes: ['execute:tool'] }), 400, 'scope_not_offered', 'beyond the connection');
      const requests = `/v1/service/connections/${conn}/delegation-requests`;
      const asking = (constraints: unknown) => platform.post(requests,
        { agent_id: agent.body.agent_id, scopes: ask, constraints });
      const bad = await asking({ methods: ['get'] });
      expectError(t, bad, 400, 'invalid_constraints', 'a malformed proposal');
      t.match(bad.body.error,
        { field: 'body.constraints', message: /constraints\.methods has an invalid entry "get"/ });
      expectError(t, await asking({ rate: 1 }), 400, 'invalid_constraints', 'an unknown constraint');
      const req = await asking(proposals[i]);
      t.match(req.body, { state: 'pending', requested_scope: ask });
      t.same(req.body.proposed_constraints, proposals[i], 'the proposal is in the answer');
      const pending = await approver.get(`/v1/service/delegations/requests/${req.body.request_id}`);
      t.equal(pending.status, 200, 'the account holder sees the request');
      t.same(pending.body.proposed_constraints, proposals[i], 'with what the platform proposes');
      const listed = (await approver.get('/v1/service/delegations/requests')).body.requests as
        Record<string, unknown>[];
      const inList = listed.find((r) => r.request_id === req.body.request_id);
      t.same(inList?.proposed_constraints, proposals[i], 'and in the list');
      const approve = `/v1/service/delegations/requests/${req.body.request_id}/approve`;
      let body: Record<string, unknown> = { approved_scope: grant };
      if (i === 0) {
        const granting = (constraints: unknown) => approver.post(approve, { approved_scope: grant, constraints });
        const looser = await granting({ ...stricter, methods: ['GET', 'DELETE'] });
        expectError(t, looser, 400, 'constraints_loosened', 'a method the proposal does not allow');
        t.match(looser.body.error,
          { field: 'body.constraints', member: 'methods', detail: 'DELETE is not allowed by the proposal' });
        const none = await granting(null);
        expectError(t, none, 400, 'constraints_loosened', 'dropping the proposal');
        t.equal(none.body.error.member, 'methods');
        const wider = await granting({ ...stricter, path_prefixes: ['/'] });
        t.match(wider.body.error, { code: 'constraints_loosened', member: 'path_prefixes' }, 'a wider path prefix');
        body = { ...body, constraints: stricter };
      }
      const ap = await approver.post(approve, body);
      t.equal(ap.status, 200, 'approved with fewer scopes');
      t.same(ap.body.constraints, granted[i], i === 0 ? 'with the stricter constraints' : 'keeping the proposal');
      const approved = await waitFor('delegation.approved', 10_000, () => rx.hits.find(
        (h) => h.body.event === 'delegation.approved' && h.body.request_id === req.body.request_id));
      t.same(transportProblems(approved, secret), [], 'delegation.approved is signed');
      t.same(approved.body.approved_scope, grant, 'the platform learns the scopes granted');
      t.same((approved.body.cert_json as { payload: { constraints: unknown } }).payload.constraints, granted[i],
        'and, in the signed certificate, the constraints granted');
      flows.push({ platform, conn, agentId: agent.body.agent_id as string });
    }
    const verify = async (f: (typeof flows)[number], context: Record<string, string>) => {
      const ch = await f.platform.post('/v1/service/challenge');
      const pr = await f.platform.post(`/v1/service/connections/${f.conn}/agents/${f.agentId}/present`,
        { challenge: ch.body.challenge });
      if (pr.status !== 200) return `present ${pr.status} ${pr.body?.error?.code}`;
      const v = await f.platform.post('/v1/service/verify',
        { proof_bundle: pr.body.proof_bundle, required_scope: 'data:read', context });
      if (v.status !== 200) return `verify ${v.status} ${v.body?.error?.code}`;
      return [v.body.decision, v.body.decision_reason, v.body.constraint].filter(Boolean).join(' ');
    };
    const inParis = { method: 'GET', path: '/trips/paris/day-1' };
    t.equal(await verify(flows[0]!, inParis), 'allow authorized',
      'a proof on Alice\'s connection, within its constraints');
    t.equal(await verify(flows[0]!, { method: 'POST', path: '/trips/paris/day-1' }), 'deny constraint_denied methods',
      'a method the proposal allowed but the approval did not');
    t.equal(await verify(flows[0]!, { method: 'GET', path: '/trips/rome' }), 'deny constraint_denied path_prefixes',
      'a path outside the approved prefix');
    t.equal(await verify(flows[1]!, { tenant: 'acme' }), 'allow authorized', 'a proof on Acme\'s connection');
    t.equal(await verify(flows[1]!, { tenant: 'globex' }), 'deny constraint_denied tenants', 'the kept proposal holds');

    // The platform removes Acme's connection: its proofs stop, Alice's go on.
    const removed = await flows[1]!.platform.post(`/v1/service/connections/${flows[1]!.conn}/disconnect`);
    t.match(removed.body, { status: 'removed' });
    t.equal(removed.body.revoked_cert_ids.length, 1);
    t.match(await verify(flows[1]!, { tenant: 'acme' }), /^(verify|present) 401 invalid_api_key$/,
      'the removed connection\'s key no longer works');
    t.equal(await verify(flows[0]!, inParis), 'allow authorized', 'the other connection is untouched');
    await waitFor('connection.removed', 10_000, () => rx.hits.find((h) => h.body.event === 'connection.removed' && h.body.connection_id === flows[1]!.conn));
    t.equal((await acmeOwner.get(`/v1/service/connections/${flows[1]!.conn}`)).body.status, 'removed', 'Acme sees it removed');

    // The audit: each connection in its workspace's chain and in the publisher's, who acted, no secret.
    const rows = async (c: Client, type: string) => ((await c.get(`/v1/service/audit/personal?limit=200&event_type=${type}`))
      .body.events as { details: Record<string, unknown> }[]).reverse().map((e) => e.details);
    const [aId, bId] = [aConn.body.connection_id, bConn.body.connection_id];
    const adminId = (await acmeAdmin.get('/v1/auth/session')).body.account_id;
    t.match(await rows(acmeOwner, 'connection.created'), [{ actor_account_id: adminId, connection_id: bId,
      platform_id: reg.body.platform_id, allowed_scopes: ['data:read', 'data:write'] }], 'Acme\'s connection, by its admin');
    t.same(await rows(acmeOwner, 'connection.removed'), [{ actor: 'platform', connection_id: bId,
      platform_id: reg.body.platform_id, revoked_cert_ids: removed.body.revoked_cert_ids, denied_request_ids: [] }],
      'removed by the platform');
    t.same((await rows(pub, 'connection.created')).map((d) => [d.connection_id, d.workspace_id, d.actor_workspace_id]),
      [[reg.body.connection_id, undefined, undefined], [aId, aliceId, aliceId], [bId, acmeId, acmeId]],
      'the publisher\'s chain: its own registration, then each account holder\'s connection');
    t.same(await rows(pub, 'connection.removed'), [{ actor: 'platform', connection_id: bId,
      platform_id: reg.body.platform_id, workspace_id: acmeId }], 'the publisher\'s record of the removal');
    const everything = JSON.stringify([(await pub.get('/v1/service/audit/personal?limit=200')).body,
      (await acmeOwner.get('/v1/service/audit/personal?limit=200')).body,
      (await alice.get('/v1/service/audit/personal?limit=200')).body]);
    for (const s of [aHook.body.api_key, bHook.body.api_key, secret, reg.body.api_key, reg.body.signing_secret]) {
      t.equal(everything.includes(s as string), false, 'no key or secret in any audit row');
    }
    t.equal(pubId.length > 0, true);
    const code = await proc.stop();
    t.equal(code, 0, code === 0 ? 'SIGTERM stops the sidecar with exit 0'
      : `exit ${code}: ${proc.output().slice(-2000)}`);
  });
}
