/**
 * Members (docs/organisations.md, "Members" and "Invitations"): in an
 * organisation, its members with their roles, and for a role with
 * `members_manage` (src/roles.ts, through `allows`) a role change, removal
 * (confirmed), an invitation by e-mail with a role, and the pending
 * invitations with Revoke. Controls the role does not allow are not offered.
 * For everyone: the invitations addressed to the signed-in person, with
 * Accept (accepting does not switch; the switcher then lists the
 * organisation).
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { allows } from '../session.js';
import { ROLES } from '../../../src/roles.js';
import type { Role } from '../../../src/roles.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { when } from '../ui/format.js';
import { workspaceName } from '../ui/workspace.js';

interface Member {
  account_id: string; email: string; first_name: string | null; last_name: string | null; role: Role; joined_at: string;
}
const ORG = '/v1/service/organization';
const enc = encodeURIComponent;
interface Invitation {
  invitation_id: string; organization_id: string; organization_name: string; email: string; role: Role;
  state: 'pending' | 'accepted' | 'revoked' | 'expired'; created_at: string; expires_at: string;
}

function MyInvitations(p: { onAccepted: (i: Invitation) => void }): JSX.Element {
  const d = useLoad(() => api<{ invitations: Invitation[] }>('GET', '/v1/service/invitations'));
  const [error, setError] = useState<unknown>(null);
  const pending = d.data?.invitations.filter((i) => i.state === 'pending') ?? [];
  const accept = async (i: Invitation): Promise<void> => {
    try {
      await api('POST', `/v1/service/invitations/${enc(i.invitation_id)}/accept`);
      setError(null);
      p.onAccepted(i);
      d.reload();
    } catch (err) { setError(err); d.reload(); }
  };
  return (
    <>
      <h2>Your invitations</h2>
      <ErrorText error={d.error ?? error} />
      {d.data && pending.length === 0 && <p>No invitation is waiting for you.</p>}
      {pending.length > 0 && (
        <table>
          <caption>Invitations to you</caption>
          <thead><tr><th scope="col">Organisation</th><th scope="col">Role</th><th scope="col">Expires</th>
            <th scope="col"><span class="sr-only">Action</span></th></tr></thead>
          <tbody>{pending.map((i) => (
            <tr key={i.invitation_id}><td>{i.organization_name}</td><td>{i.role}</td><td>{when(i.expires_at)}</td>
              <td><button type="button" class="primary" onClick={() => { void accept(i); }}>Accept<span
                class="sr-only"> the invitation to {i.organization_name}</span></button></td></tr>
          ))}</tbody>
        </table>
      )}
    </>
  );
}

function RoleSelect(p: { id: string; value: Role; onChange: (r: Role) => void; label: string }): JSX.Element {
  return (
    <>
      <label for={p.id} class="sr-only">{p.label}</label>
      <select id={p.id} value={p.value} onChange={(e) => p.onChange((e.target as HTMLSelectElement).value as Role)}>
        {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
      </select>
    </>
  );
}

function Organisation(p: { manage: boolean; say: (s: string) => void }): JSX.Element {
  const d = useLoad(async () => {
    const m = await api<{ members: Member[] }>('GET', '/v1/service/organization/members');
    const inv = p.manage ? await api<{ invitations: Invitation[] }>('GET', `${ORG}/invitations`) : null;
    return { members: m.members, invitations: inv?.invitations.filter((i) => i.state === 'pending') ?? [] };
  });
  const [roles, setRoles] = useState<Record<string, Role>>({});
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('member');
  const [error, setError] = useState<unknown>(null);
  const [removing, setRemoving] = useState<Member | null>(null);
  const act = async (f: () => Promise<string>): Promise<void> => {
    try { p.say(await f()); setError(null); } catch (err) { setError(err); }
    d.reload();
  };
  const invite = (e: Event): void => {
    e.preventDefault();
    void act(async () => {
      await api('POST', '/v1/service/organization/invitations', { email: email.trim(), role });
      setEmail('');
      return `Invited ${email.trim()} as ${role}. The invitation is pending for 7 days.`;
    });
  };
  return (
    <>
      <ErrorText error={d.error ?? error} />
      {d.data && (
        <table>
          <caption>Members</caption>
          <thead><tr><th scope="col">E-mail</th><th scope="col">Name</th><th scope="col">Role</th>
            <th scope="col">Joined</th>
            {p.manage && <th scope="col"><span class="sr-only">Actions</span></th>}</tr></thead>
          <tbody>{d.data.members.map((m) => (
            <tr key={m.account_id} data-member={m.email}>
              <td>{m.email}</td><td>{[m.first_name, m.last_name].filter(Boolean).join(' ') || '—'}</td>
              <td>{p.manage ? <RoleSelect id={`role-${m.account_id}`} label={`Role of ${m.email}`}
                value={roles[m.account_id] ?? m.role}
                onChange={(r) => setRoles({ ...roles, [m.account_id]: r })} /> : m.role}</td>
              <td>{when(m.joined_at)}</td>
              {p.manage && <td class="actions">
                <button type="button" onClick={() => void act(async () => {
                  const to = roles[m.account_id] ?? m.role;
                  await api('POST', `${ORG}/members/${enc(m.account_id)}/role`, { role: to });
                  return `${m.email} is now ${to}.`;
                })}>Change role<span class="sr-only"> of {m.email}</span></button>
                <button type="button" class="danger" onClick={() => setRemoving(m)}>Remove<span
                  class="sr-only"> {m.email}</span>…</button>
              </td>}
            </tr>
          ))}</tbody>
        </table>
      )}
      {p.manage && (
        <>
          <h2>Invite someone</h2>
          <form class="row wrap" onSubmit={invite}>
            <label for="invite-email">E-mail address</label>
            <input id="invite-email" type="email" required size={30} value={email}
              onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
            <label for="invite-role">Role</label>
            <select id="invite-role" value={role}
              onChange={(e) => setRole((e.target as HTMLSelectElement).value as Role)}>
              {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
            </select>
            <button type="submit" class="primary">Invite</button>
          </form>
          <h2>Pending invitations</h2>
          {d.data && d.data.invitations.length === 0 && <p>None.</p>}
          {d.data && d.data.invitations.length > 0 && (
            <table>
              <caption>Pending invitations</caption>
              <thead><tr><th scope="col">E-mail</th><th scope="col">Role</th><th scope="col">Expires</th>
                <th scope="col"><span class="sr-only">Action</span></th></tr></thead>
              <tbody>{d.data.invitations.map((i) => (
                <tr key={i.invitation_id}><td>{i.email}</td><td>{i.role}</td><td>{when(i.expires_at)}</td>
                  <td><button type="button" class="danger" onClick={() => void act(async () => {
                    await api('POST', `${ORG}/invitations/${enc(i.invitation_id)}/revoke`);
                    return `Revoked the invitation of ${i.email}.`;
                  })}>Revoke<span class="sr-only"> the invitation of {i.email}</span></button></td></tr>
              ))}</tbody>
            </table>
          )}
        </>
      )}
      <ConfirmDialog open={removing !== null} title="Remove this member?" confirmLabel="Remove member" danger
        onClose={() => setRemoving(null)}
        onConfirm={async () => {
          const m = removing!;
          await api('POST', `${ORG}/members/${enc(m.account_id)}/remove`);
          p.say(`Removed ${m.email}. Their sessions in this organisation have ended.`);
          d.reload();
        }}>
        {removing && <p>{removing.email} loses access to this organisation at once.</p>}
      </ConfirmDialog>
    </>
  );
}

/** The members page. */
export function MembersPage(): JSX.Element {
  const { session, workspacesChanged } = useApp();
  const [status, setStatus] = useState('');
  const w = session.workspace;
  const org = w?.kind === 'organization';
  return (
    <section>
      <PageTitle>Members</PageTitle>
      {org ? <p>Members of <strong>{workspaceName(w)}</strong>; your role is <strong>{w.role}</strong>.
        {!allows(session, 'members_manage') && ' Only an owner invites, removes members and changes roles.'}</p>
        : <p>This is your personal workspace: you are its only member. Switch to an organisation to see its
          members.</p>}
      {org && <Organisation key={w.workspace_id} manage={allows(session, 'members_manage')} say={setStatus} />}
      <MyInvitations onAccepted={(i) => {
        setStatus(`You joined ${i.organization_name} as ${i.role}. `
          + 'Switch to it with the workspace switcher at the top.');
        workspacesChanged();
      }} />
      <StatusText>{status}</StatusText>
    </section>
  );
}
