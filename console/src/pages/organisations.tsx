/**
 * Organisations (docs/organisations.md, "Creating an organisation" and
 * "Workspaces"): the person's workspaces with their role in each, a Switch
 * button per workspace the session does not act in, and a form that creates
 * an organisation (`POST /v1/service/organizations`; the creator is its first
 * owner and the session stays where it is). After creating, the page offers
 * to switch to the new organisation; switching is explicit (and audited), as
 * with the header's switcher. Acting in an organisation, "Leave" ends the
 * person's membership (`POST /v1/service/organization/leave`, after a
 * confirmation) and with it this session: the console returns to sign-in. The
 * last owner cannot leave; the dialog shows the API's refusal with its code
 * (`last_owner`).
 */
import type { JSX } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { navigate } from '../router.js';
import type { Workspace } from '../session.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { workspaceName } from '../ui/workspace.js';
import type { Organization } from '../types.js';

/** The organisations page. */
export function OrganisationsPage(): JSX.Element {
  const { session, reloadSession, workspacesChanged, sessionEnded } = useApp();
  const current = session.workspace?.workspace_id ?? session.account_id;
  const d = useLoad(() => api<{ workspaces: Workspace[] }>('GET', '/v1/service/workspaces'), [current]);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<Organization | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const [leaving, setLeaving] = useState(false);
  const org = session.workspace?.kind === 'organization' ? session.workspace : null;
  const switchRef = useRef<HTMLButtonElement>(null);

  const create = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null); setStatus(''); setBusy(true);
    try {
      const o = await api<Organization>('POST', '/v1/service/organizations', { name });
      setCreated(o);
      setName('');
      setStatus(`Created ${o.name}; you are its owner. You still act in ${workspaceName(session.workspace
        ?? { kind: 'personal', name: null })}.`);
      workspacesChanged();
      d.reload();
      setTimeout(() => switchRef.current?.focus(), 0);
    } catch (err) { setError(err); } finally { setBusy(false); }
  };
  const switchTo = async (id: string): Promise<void> => {
    setError(null);
    try {
      await api('POST', '/v1/auth/session/workspace', { workspace_id: id });
      await reloadSession();
      navigate('/');
    } catch (err) { setError(err); }
  };

  return (
    <section>
      <PageTitle>Organisations</PageTitle>
      <p>You act in <strong>{workspaceName(session.workspace ?? { kind: 'personal', name: null })}</strong>.
        Switching is explicit and recorded in the audit trail of the workspace you enter.</p>
      {d.data && (
        <table>
          <caption>Your workspaces</caption>
          <thead><tr><th scope="col">Workspace</th><th scope="col">Kind</th><th scope="col">Your role</th>
            <th scope="col"><span class="sr-only">Action</span></th></tr></thead>
          <tbody>{d.data.workspaces.map((w) => (
            <tr key={w.workspace_id} data-workspace={workspaceName(w)}>
              <td>{workspaceName(w)}</td><td>{w.kind === 'personal' ? 'personal' : 'organisation'}</td><td>{w.role}</td>
              <td>{w.workspace_id === current ? 'acting here'
                : <button type="button" onClick={() => { void switchTo(w.workspace_id); }}>Switch<span
                  class="sr-only"> to {workspaceName(w)}</span></button>}</td>
            </tr>
          ))}</tbody>
        </table>
      )}
      <form class="panel" onSubmit={(e) => { void create(e); }}>
        <h2>Create an organisation</h2>
        <p>An organisation has its own members, platforms, publisher domain, connections and audit trail. You become
          its first owner.</p>
        <label for="org-name">Organisation name</label>
        <input id="org-name" value={name} maxLength={200} required
          onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <button type="submit" class="primary" disabled={busy}>Create organisation</button>
      </form>
      {org && (
        <div class="panel">
          <h2>Leave {workspaceName(org)}</h2>
          <p>Ends your membership of {workspaceName(org)} and your sessions in it, this one included: you sign in
            again. The last owner cannot leave.</p>
          <button type="button" class="danger" onClick={() => setLeaving(true)}>Leave {workspaceName(org)}…</button>
        </div>
      )}
      <ConfirmDialog open={leaving} title="Leave the organisation?" confirmLabel="Leave" danger
        onClose={() => setLeaving(false)}
        onConfirm={async () => {
          await api('POST', '/v1/service/organization/leave');
          sessionEnded(`You left ${org ? workspaceName(org) : 'the organisation'}. Sign in again.`);
        }}>
        <p>You will no longer see {org ? workspaceName(org) : 'it'}; an owner can invite you again.</p>
      </ConfirmDialog>
      {created && created.organization_id !== current && (
        <p class="notice">
          <button type="button" class="primary" ref={switchRef}
            onClick={() => { void switchTo(created.organization_id); }}>Switch to {created.name} now</button>
        </p>
      )}
      <ErrorText error={error ?? d.error} />
      <StatusText>{status}</StatusText>
    </section>
  );
}
