/**
 * Organisations, publishing and connections on PostgreSQL across three replicas (issue 32's
 * black-box flow): every step lands on another replica. A publisher organisation verifies its
 * domain against a real DNS server (dnsmasq) and publishes; a personal account holder and an
 * organisation (through an approver who is not its owner) connect; the platform receives both
 * signed `connection.created` webhooks and uses each key; it asks for delegations, proposing
 * constraints for one; the approvers grant fewer scopes, one with stricter constraints than
 * proposed (looser ones refused); proofs verify per connection on every replica, and outside the
 * approved constraints are denied; removing one connection
 * refuses its key on every replica within the API-key cache's 5 s (docs/storage.md) and leaves
 * the other working; a removed member's session ends on every replica at once.
 */
import t from 'tap';
import { startPostgres } from '../../helpers/postgres.js';
import { Client, onboard } from '../../helpers/sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../../helpers/dnsmasq.js';
import { addMember, orgOwner } from '../../helpers/organisations.js';
import { startHookReceiver, transportProblems, waitFor } from '../webhooks/fixtures/hooks.js';
import type { Hit } from '../webhooks/fixtures/hooks.js';
import { newReplicaGroup, platformOn, sameSession, startReplicas } from './replicas.js';
import type { Replica } from './replicas.js';

t.setTimeout(240_000);

const pg = dnsmasqMissing() ? undefined : await startPostgres(t);
if (pg) {
  const g = await newReplicaGroup(t, pg);
  const dns = await startDnsmasq(['example.org'], {});
  t.teardown(() => dns.close());
  const rx = await startHookReceiver();
  t.teardown(() => rx.close());
  const [A, B, C] = await startReplicas(t, g, 3, { env: { SIDECAR_DNS_SERVERS: dns.address } });
  const on = (c: Client, r: Replica): Client => sameSession(c, r);

  t.test('publish, connect twice, delegate, verify and remove across three replicas', async (t) => {
    const { c: owner } = await orgOwner(A!.sc, 'owner@travel.example.org', 'Travel Co');
    const reg = await on(owner, B!).post('/v1/service/platforms', { name: 'Trip Planner', surface_type: 'agentic_api',
      description: 'Plans trips.', default_allowed_scopes: ['data:read', 'data:write'], callback_url: rx.url });
    t.equal(reg.status, 200, 'registered on B');
    const claim = await on(owner, C!).req('PUT', '/v1/service/organization/domain', { domain: 'travel.example.org' });
    await dns.setRecords({ [claim.body.record_name]: [[claim.body.record_text]] });
    t.equal((await on(owner, A!).post('/v1/service/organization/domain/verify')).body.state, 'verified', 'verified on A');
    t.equal((await on(owner, B!).post(`/v1/service/platforms/${reg.body.platform_id}/publish`)).body.publish_state, 'published');
    t.equal((await (await onboard(C!.sc, 'reader@example.com')).get('/v1/service/directory')).body.platforms.length, 1,
      'in the directory on C');

    // A personal account (on C) and an organisation through its admin (on A) connect.
    const alice = await onboard(C!.sc, 'alice@example.com');
    const { c: acmeOwner, orgId: acmeId } = await orgOwner(A!.sc, 'owner@acme.example.org', 'Acme');
    // Invited on B, each joins on another replica.
    const admin = await addMember(on(acmeOwner, B!), A!.sc, acmeId, 'admin@acme.example.org', 'admin');
    const approver = await addMember(on(acmeOwner, B!), C!.sc, acmeId, 'approver@acme.example.org', 'approver');
    const url = `/v1/service/directory/${reg.body.platform_id}/connect`;
    const aConn = (await alice.post(url, { allowed_scopes: ['data:read', 'data:write'] })).body.connection_id as string;
    const bConn = (await admin.post(url, { allowed_scopes: ['data:read'] })).body.connection_id as string;
    const hook = (id: string): Promise<Hit> => waitFor(`connection.created ${id}`, 10_000,
      () => rx.hits.find((h) => h.body.event === 'connection.created' && h.body.connection_id === id));
    const hooks = [await hook(aConn), await hook(bConn)];
    for (const h of hooks) t.same(transportProblems(h, reg.body.webhook_signing_secret as string), [], 'signed');
    t.match(hooks[1]!.body, { org_id: acmeId, org_name: 'Acme', allowed_scopes: ['data:read'] });

    // The platform uses each key on every replica; the approvers grant fewer scopes. For Acme it
    // proposes two tenants; Acme's approver (on C) sees the proposal written on B, is refused a
    // third tenant, and grants one.
    const flows: { key: string; conn: string; agentId: string; context: Record<string, string> }[] = [];
    const proposal = { tenants: ['acme', 'acme-eu'] };
    for (const [h, decider, ask, proposed] of [[hooks[0]!, alice, ['data:read', 'data:write'], null],
      [hooks[1]!, approver, ['data:read'], proposal]] as const) {
      const key = h.body.api_key as string;
      const conn = h.body.connection_id as string;
      const agent = await platformOn(A!, key).post(`/v1/service/connections/${conn}/agents`, { name: 'bot', agent_type: 'api_agent' });
      const req = await platformOn(B!, key).post(`/v1/service/connections/${conn}/delegation-requests`,
        { agent_id: agent.body.agent_id, scopes: ask, ...(proposed ? { constraints: proposed } : {}) });
      t.equal(req.status, 200, 'asked on B');
      const approve = `/v1/service/delegations/requests/${req.body.request_id}/approve`;
      let grant: Record<string, unknown> = { approved_scope: ['data:read'] };
      if (proposed) {
        t.same((await decider.get(`/v1/service/delegations/requests/${req.body.request_id}`)).body.proposed_constraints,
          proposed, 'the proposal written on B is read on C');
        const looser = await decider.post(approve,
          { approved_scope: ['data:read'], constraints: { tenants: ['acme', 'globex'] } });
        t.match(looser.body.error,
          { code: 'constraints_loosened', member: 'tenants', detail: 'globex is not a tenant of the proposal' },
          'a tenant the proposal does not name is refused');
        grant = { ...grant, constraints: { tenants: ['acme'] } };
      }
      const ap = await decider.post(approve, grant);
      t.equal(ap.status, 200, 'granted fewer (or as many) scopes');
      t.same(ap.body.constraints, proposed ? { tenants: ['acme'] } : null, 'with the constraints granted');
      flows.push({ key, conn, agentId: agent.body.agent_id as string, context: proposed ? { tenant: 'acme' } : {} });
    }
    const verify = async (f: (typeof flows)[number], presentOn: Replica, verifyOn: Replica,
      context = f.context): Promise<string> => {
      const ch = await platformOn(presentOn, f.key).post('/v1/service/challenge');
      if (ch.status !== 200) return `challenge ${ch.status} ${ch.body?.error?.code}`;
      const pr = await platformOn(presentOn, f.key).post(`/v1/service/connections/${f.conn}/agents/${f.agentId}/present`,
        { challenge: ch.body.challenge });
      if (pr.status !== 200) return `present ${pr.status} ${pr.body?.error?.code}`;
      const v = await platformOn(verifyOn, f.key).post('/v1/service/verify',
        { proof_bundle: pr.body.proof_bundle, required_scope: 'data:read', context });
      if (v.status !== 200) return `verify ${v.status} ${v.body?.error?.code}`;
      return [v.body.decision, v.body.decision_reason, v.body.constraint].filter(Boolean).join(' ');
    };
    for (const [p, v] of [[A!, B!], [B!, C!], [C!, A!]] as const) {
      for (const f of flows) t.equal(await verify(f, p, v), 'allow authorized', `present on ${p.name}, verify on ${v.name}`);
    }
    t.equal(await verify(flows[1]!, A!, B!, { tenant: 'acme-eu' }), 'deny constraint_denied tenants',
      'a tenant proposed but not granted is denied');

    // The platform removes Acme's connection on A: its key stops on every replica; Alice's goes on.
    t.equal((await platformOn(A!, flows[1]!.key).post(`/v1/service/connections/${flows[1]!.conn}/disconnect`)).body.status, 'removed');
    for (const r of [A!, B!, C!]) {
      const started = Date.now();
      await waitFor(`the removed key refused on ${r.name}`, 5_000, async () => {
        const res = await platformOn(r, flows[1]!.key).post('/v1/service/challenge');
        return res.status === 401 && res.body?.error?.code === 'invalid_api_key';
      });
      t.ok(Date.now() - started <= 5_000, `refused on ${r.name} within 5 s`);
      t.equal(await verify(flows[0]!, r, r), 'allow authorized', `the other connection works on ${r.name}`);
    }

    // A member removed on B is signed out of the organisation on every replica at once.
    const approverId = (await approver.get('/v1/auth/session')).body.account_id as string;
    t.equal((await on(acmeOwner, B!).post(`/v1/service/organization/members/${approverId}/remove`)).status, 200);
    for (const r of [A!, B!, C!]) {
      const res = await on(approver, r).get('/v1/service/delegations');
      t.equal(`${res.status} ${res.body?.error?.code}`, '401 auth_required', `the removed approver is refused on ${r.name}`);
    }
  });
} else {
  t.pass('skipped: dnsmasq is not installed (.ci/run installs it)', { skip: true });
}
