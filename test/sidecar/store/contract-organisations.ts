/**
 * Store contract, organisations part (issue 32): an organisation is a workspace with its first
 * owner; memberships list by person and by organisation; the last owner cannot be demoted or
 * removed, also when two owners demote each other at once; a removal ends the member's sessions
 * in that organisation and no others; invitations are pending once per address, expire, are
 * revoked or accepted once (only by their address); a session points at a workspace; every
 * change writes its audit rows, and a refused one none.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { AuditEventRecord, InvitationRecord, NewOrganisation, SessionRecord, Store } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, count, storeFor, together, values } from './contract-fixtures.js';

const person = async (s: Store): Promise<{ id: string; email: string }> => {
  const email = `${randomUUID()}@example.com`;
  const a = await s.accounts.findOrCreateAccount(email, randomUUID(), NOW);
  return { id: a.id, email };
};
const org = (ownerId: string, over: Partial<NewOrganisation> = {}): NewOrganisation => ({
  id: randomUUID(), name: `Org ${randomUUID().slice(0, 8)}`, ownerId, rootPublicKey: '{"k":2}',
  rootSecretEnc: new Uint8Array([1, 2, 3]), creditsMicros: 500, now: NOW, ...over,
});
const ev = (orgId: string, type: AuditEventRecord['eventType'], details: Record<string, unknown> = {}): AuditEventRecord => ({
  id: randomUUID(), accountId: orgId, eventType: type, connectionId: null, agentId: null, certId: null, requiredScope: null,
  details, createdAt: NOW,
});
const types = async (s: Store, orgId: string): Promise<string[]> =>
  (await s.audit.readChain(orgId, 0, 1000)).map((r) => r.eventType);

/** Runs the organisations part. */
export async function organisationsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('an organisation is a workspace with its first owner and first audit row', async (t) => {
    const alice = await person(s);
    const o = org(alice.id);
    await s.organisations.createOrganisation(o, [ev(o.id, 'organization.created', { name: o.name })]);
    const acct = await s.accounts.getAccount(o.id);
    t.match(acct, { id: o.id, accountType: 'organization', onboardingStep: 'complete', orgName: o.name, creditsMicros: 500,
      rootPublicKey: '{"k":2}' });
    t.same(await s.organisations.membershipsOf(alice.id),
      [{ orgId: o.id, orgName: o.name, accountId: alice.id, role: 'owner', createdAt: NOW }]);
    t.same(await types(s, o.id), ['organization.created']);
    t.equal((await s.accounts.getAccount(alice.id))?.orgName, null, 'a person has no organisation name');
  });

  await t.test('roles change under the last-owner rule; refusals write nothing', async (t) => {
    const [a, b] = [await person(s), await person(s)];
    const o = org(a.id);
    await s.organisations.createOrganisation(o, []);
    const join = async (id: string, email: string, role: InvitationRecord['role']): Promise<void> => {
      const inv = invitation(o.id, email, role, a.id);
      t.equal(await s.organisations.createInvitation(inv, []), 'created');
      t.match(await s.organisations.acceptInvitation(inv.id, id, email, NOW + 1, () => []), { outcome: 'joined' });
    };
    await join(b.id, b.email, 'member');
    t.equal(await s.organisations.changeRole(o.id, a.id, 'admin', (m) => [ev(o.id, 'member.role_changed', { from: m.role })]),
      'last_owner');
    t.equal(await s.organisations.removeMember(o.id, a.id, NOW, () => [ev(o.id, 'member.removed')]), 'last_owner');
    t.same(await types(s, o.id), [], 'no audit row for a refusal');
    t.equal(await s.organisations.changeRole(o.id, b.id, 'owner', () => [ev(o.id, 'member.role_changed')]), 'changed');
    t.equal(await s.organisations.changeRole(o.id, randomUUID(), 'owner', () => []), 'not_member');
    // Two owners demote each other at once: one succeeds, the other is the last owner then.
    const rs = values(t, await together(2, (i) => s.organisations.changeRole(o.id, i === 0 ? a.id : b.id, 'member',
      () => [ev(o.id, 'member.role_changed')])));
    t.same(rs.sort(), ['changed', 'last_owner']);
    const roles = (await s.organisations.members(o.id)).map((m) => m.role);
    t.equal(count(roles, 'owner'), 1, 'exactly one owner is left');
    t.same(await types(s, o.id), ['member.role_changed', 'member.role_changed']);
  });

  await t.test('removing a member ends their sessions in that organisation only', async (t) => {
    const [a, b] = [await person(s), await person(s)];
    const [o1, o2] = [org(a.id), org(a.id)];
    await s.organisations.createOrganisation(o1, []);
    await s.organisations.createOrganisation(o2, []);
    for (const o of [o1, o2]) {
      const inv = invitation(o.id, b.email, 'approver', a.id);
      await s.organisations.createInvitation(inv, []);
      await s.organisations.acceptInvitation(inv.id, b.id, b.email, NOW, () => []);
    }
    const session = (workspaceId: string | null): SessionRecord => ({
      id: randomUUID(), tokenHash: `t-${randomUUID()}`, accountId: b.id, expiresAt: NOW + 1e6, absoluteExpiresAt: NOW + 1e7,
      endedAt: null, createdAt: NOW, workspaceId,
    });
    const [in1, in2, own] = [session(o1.id), session(o2.id), session(null)];
    for (const x of [in1, in2, own]) await s.accounts.createSession(x);
    t.equal(await s.organisations.removeMember(o1.id, b.id, NOW + 5, (m) => [ev(o1.id, 'member.removed', { role: m.role })]),
      'changed');
    t.equal((await s.accounts.getSessionByTokenHash(in1.tokenHash))?.endedAt, NOW + 5, 'the session in o1 ended');
    t.equal((await s.accounts.getSessionByTokenHash(in2.tokenHash))?.endedAt, null, 'the session in o2 lives');
    t.equal((await s.accounts.getSessionByTokenHash(own.tokenHash))?.endedAt, null, 'the personal session lives');
    t.equal(await s.organisations.membership(o1.id, b.id), undefined);
    t.equal((await s.organisations.membership(o2.id, b.id))?.role, 'approver');
    t.equal(await s.organisations.removeMember(o1.id, b.id, NOW + 6, () => []), 'not_member');
    t.same(await types(s, o1.id), ['member.removed']);
  });

  await t.test('invitations: one pending per address, expiry, revocation, acceptance once and only by its address', async (t) => {
    const [a, b, c] = [await person(s), await person(s), await person(s)];
    const o = org(a.id);
    await s.organisations.createOrganisation(o, []);
    const inv = invitation(o.id, b.email, 'auditor', a.id);
    t.equal(await s.organisations.createInvitation(inv, [ev(o.id, 'member.invited')]), 'created');
    t.equal(await s.organisations.createInvitation({ ...inv, id: randomUUID() }, [ev(o.id, 'member.invited')]), 'pending_exists');
    t.equal(await s.organisations.createInvitation(invitation(o.id, a.email, 'member', a.id), []), 'already_member');
    t.same((await s.organisations.invitationsFor(b.email, NOW)).map((i) => i.id), [inv.id]);
    t.same(await s.organisations.acceptInvitation(inv.id, c.id, c.email, NOW, () => []), { outcome: 'not_found' },
      'another address cannot accept it');
    const rs = values(t, await together(3, () => s.organisations.acceptInvitation(inv.id, b.id, b.email, NOW + 1,
      (m) => [ev(o.id, 'member.joined', { role: m.role })])));
    t.equal(rs.filter((r) => r.outcome === 'joined').length, 1, 'accepted once');
    t.ok(rs.every((r) => r.outcome === 'joined' || r.outcome === 'accepted'));
    t.equal((await s.organisations.membership(o.id, b.id))?.role, 'auditor');
    t.equal((await s.organisations.invitations(o.id, NOW + 2)).find((i) => i.id === inv.id)?.state, 'accepted');

    const late = invitation(o.id, c.email, 'member', a.id);
    await s.organisations.createInvitation(late, []);
    t.equal((await s.organisations.invitations(o.id, late.expiresAt)).find((i) => i.id === late.id)?.state, 'expired',
      'reads expired after its time');
    t.same(await s.organisations.invitationsFor(c.email, late.expiresAt), []);
    t.same(await s.organisations.acceptInvitation(late.id, c.id, c.email, late.expiresAt, () => []), { outcome: 'expired' });
    const again = { ...invitation(o.id, c.email, 'member', a.id), createdAt: late.expiresAt };
    t.equal(await s.organisations.createInvitation(again, []), 'created', 'an expired invitation does not block a new one');
    t.equal(await s.organisations.revokeInvitation(o.id, again.id, NOW + 3, [ev(o.id, 'invitation.revoked')]), true);
    t.equal(await s.organisations.revokeInvitation(o.id, again.id, NOW + 3, [ev(o.id, 'invitation.revoked')]), false);
    t.same(await s.organisations.acceptInvitation(again.id, c.id, c.email, NOW + 4, () => []), { outcome: 'revoked' });
    t.same(await types(s, o.id), ['member.invited', 'member.joined', 'invitation.revoked']);
  });

  await t.test('a session points at a workspace; an ended one cannot', async (t) => {
    const a = await person(s);
    const o = org(a.id);
    await s.organisations.createOrganisation(o, []);
    const x: SessionRecord = { id: randomUUID(), tokenHash: `t-${randomUUID()}`, accountId: a.id, expiresAt: NOW + 1e6,
      absoluteExpiresAt: NOW + 1e7, endedAt: null, createdAt: NOW };
    await s.accounts.createSession(x);
    t.equal((await s.accounts.getSessionByTokenHash(x.tokenHash))?.workspaceId, null);
    t.equal(await s.organisations.setSessionWorkspace(x.id, o.id, [ev(o.id, 'workspace.switched')]), true);
    t.equal((await s.accounts.getSessionByTokenHash(x.tokenHash))?.workspaceId, o.id);
    await s.accounts.endSession(x.id, NOW + 1);
    t.equal(await s.organisations.setSessionWorkspace(x.id, null, [ev(o.id, 'workspace.switched')]), false);
    t.same(await types(s, o.id), ['workspace.switched']);
  });
}

function invitation(orgId: string, email: string, role: InvitationRecord['role'], invitedBy: string): InvitationRecord {
  return {
    id: randomUUID(), orgId, orgName: '', email, role, invitedBy, state: 'pending', createdAt: NOW, expiresAt: NOW + 86_400_000,
    decidedAt: null, acceptedBy: null,
  };
}
