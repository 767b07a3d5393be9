/**
 * Organisations end to end on a real sidecar (issue 32; docs/organisations.md): onboarding as an
 * organisation; workspaces and explicit, audited switching; an invitation e-mailed over real SMTP,
 * accepted only by its address; roles changed under the last-owner rule; a removal that ends the
 * member's sessions in the organisation at once and no others; leaving; revoked and unknown
 * invitations; the organisation's audit chain holding every administrative event.
 */
import t from 'tap';
import { expectError, login, onboard, startSidecar } from '../../helpers/sidecar.js';
import { orgOwner } from '../../helpers/organisations.js';
import type { TestSidecar } from '../../helpers/sidecar.js';

async function invitationMail(sc: TestSidecar, to: string): Promise<string> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const m = [...sc.mail.messages].reverse().find((x) => x.to === to && /invited you to join/.test(x.raw));
    // Quoted-printable, as nodemailer sends long lines: soft breaks and =XX escapes.
    if (m) return m.raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_x, h: string) => String.fromCharCode(parseInt(h, 16)));
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no invitation e-mailed to ${to}`);
}

t.test('an organisation from onboarding to removal', async (t) => {
  const sc = await startSidecar({ sendCodePerMinute: 100 });
  t.teardown(() => sc.close());
  const { c: owner, orgId } = await orgOwner(sc, 'olga@example.com', 'Acme Agents');

  const session = await owner.get('/v1/auth/session');
  t.match(session.body, { email: 'olga@example.com', account_type: 'organization',
    workspace: { workspace_id: orgId, kind: 'organization', name: 'Acme Agents', role: 'owner' } }, 'the session acts in the organisation');
  const personalId = session.body.account_id as string;
  t.not(personalId, orgId, 'the organisation is its own workspace');
  t.same((await owner.get('/v1/service/workspaces')).body, {
    current_workspace_id: orgId,
    workspaces: [
      { workspace_id: personalId, kind: 'personal', name: null, role: 'owner' },
      { workspace_id: orgId, kind: 'organization', name: 'Acme Agents', role: 'owner' },
    ],
  });

  // An invitation by e-mail, accepted only by its address.
  const inv = await owner.post('/v1/service/organization/invitations', { email: 'Bob@Example.com', role: 'approver' });
  t.match(inv.body, { organization_id: orgId, organization_name: 'Acme Agents', email: 'bob@example.com', role: 'approver',
    state: 'pending' });
  t.match(await invitationMail(sc, 'bob@example.com'), new RegExp(`olga@example.com invited you to join the organisation "Acme Agents" on agent-authz as approver[\\s\\S]*${inv.body.invitation_id}`));
  expectError(t, await owner.post('/v1/service/organization/invitations', { email: 'bob@example.com', role: 'member' }),
    409, 'invitation_pending');
  expectError(t, await owner.post('/v1/service/organization/invitations', { email: 'olga@example.com', role: 'member' }),
    409, 'already_member');
  expectError(t, await owner.post('/v1/service/organization/invitations', { email: 'eve@example.com', role: 'root' }),
    400, 'invalid_request');

  const eve = await onboard(sc, 'eve@example.com');
  expectError(t, await eve.post(`/v1/service/invitations/${inv.body.invitation_id}/accept`), 404, 'invitation_not_found',
    'another address cannot accept');
  expectError(t, await eve.post('/v1/auth/session/workspace', { workspace_id: orgId }), 404, 'organization_not_found');
  expectError(t, await eve.get('/v1/service/organization/members'), 403, 'account_type_not_supported',
    'a personal workspace has no members list');

  const bob = await onboard(sc, 'bob@example.com');
  const bobElsewhere = await login(sc, 'bob@example.com');
  t.same((await bob.get('/v1/service/invitations')).body.invitations.map((i: { invitation_id: string }) => i.invitation_id),
    [inv.body.invitation_id]);
  t.same((await bob.post(`/v1/service/invitations/${inv.body.invitation_id}/accept`)).body,
    { workspace_id: orgId, kind: 'organization', name: 'Acme Agents', role: 'approver' });
  expectError(t, await bob.post(`/v1/service/invitations/${inv.body.invitation_id}/accept`), 409, 'invitation_closed',
    'accepted once');
  t.equal((await bob.get('/v1/auth/session')).body.workspace.kind, 'personal', 'joining does not switch');
  t.equal((await bob.post('/v1/auth/session/workspace', { workspace_id: orgId })).status, 200);
  t.equal((await bob.get('/v1/service/organization/members')).body.members.length, 2, 'an approver reads the members');
  expectError(t, await bob.post('/v1/service/organization/invitations', { email: 'carol@example.com', role: 'member' }),
    403, 'role_forbidden', 'an approver cannot invite');

  // Roles, under the last-owner rule.
  const bobId = (await bob.get('/v1/auth/session')).body.account_id as string;
  t.match((await owner.post(`/v1/service/organization/members/${bobId}/role`, { role: 'auditor' })).body,
    { account_id: bobId, email: 'bob@example.com', role: 'auditor' });
  expectError(t, await owner.post(`/v1/service/organization/members/${personalId}/role`, { role: 'admin' }), 409, 'last_owner');
  expectError(t, await owner.post('/v1/service/organization/leave'), 409, 'last_owner');
  expectError(t, await owner.post('/v1/service/organization/members/no-such-person/role', { role: 'admin' }), 404,
    'member_not_found');

  // Removal ends Bob's sessions in the organisation at once, and leaves his personal one.
  t.same((await owner.post(`/v1/service/organization/members/${bobId}/remove`)).body, { account_id: bobId, status: 'removed' });
  expectError(t, await bob.get('/v1/service/organization/members'), 401, 'auth_required', 'the removed member is signed out there');
  t.equal((await bobElsewhere.get('/v1/auth/session')).body.workspace.kind, 'personal', 'his personal session lives');
  expectError(t, await bobElsewhere.post('/v1/auth/session/workspace', { workspace_id: orgId }), 404, 'organization_not_found');

  // A revoked invitation cannot be accepted; a second owner may leave.
  const carolInv = await owner.post('/v1/service/organization/invitations', { email: 'carol@example.com', role: 'owner' });
  t.equal((await owner.post(`/v1/service/organization/invitations/${carolInv.body.invitation_id}/revoke`)).body.state, 'revoked');
  expectError(t, await owner.post(`/v1/service/organization/invitations/${carolInv.body.invitation_id}/revoke`), 409,
    'invitation_closed');
  const carol = await onboard(sc, 'carol@example.com');
  expectError(t, await carol.post(`/v1/service/invitations/${carolInv.body.invitation_id}/accept`), 409, 'invitation_closed');
  const carolInv2 = await owner.post('/v1/service/organization/invitations', { email: 'carol@example.com', role: 'owner' });
  await carol.post(`/v1/service/invitations/${carolInv2.body.invitation_id}/accept`);
  await carol.post('/v1/auth/session/workspace', { workspace_id: orgId });
  t.same((await owner.post('/v1/service/organization/leave')).body, { account_id: personalId, status: 'left' });
  expectError(t, await owner.get('/v1/auth/session'), 401, 'auth_required', 'leaving ends the session');

  // The organisation's chain holds every administrative event; Olga's personal one none of them.
  const audit = await carol.get('/v1/service/audit/personal?limit=100');
  t.equal(audit.status, 200);
  const types = audit.body.events.map((e: { event_type: string }) => e.event_type).reverse();
  t.same(types, ['organization.created', 'workspace.switched', 'member.invited', 'member.joined', 'workspace.switched',
    'member.role_changed', 'member.removed', 'member.invited', 'invitation.revoked', 'member.invited', 'member.joined',
    'workspace.switched', 'member.left']);
  const olga = await login(sc, 'olga@example.com');
  t.same((await olga.get('/v1/service/audit/personal')).body.events, [], 'nothing in the personal chain');
});
