/**
 * The workspace switcher in the header (docs/organisations.md, "Workspaces"):
 * the person's workspaces (`GET /v1/service/workspaces`, their own first), the
 * one the session acts in selected, and a Switch button
 * (`POST /v1/auth/session/workspace`; choosing alone changes nothing, so the
 * page never moves under a keyboard user's arrow keys). After a switch the
 * session is read again and the overview opens, in the new workspace.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { navigate } from '../router.js';
import type { Session, Workspace } from '../session.js';
import { ErrorText, useLoad } from './common.js';

/** A workspace's name for people. */
export function workspaceName(w: Pick<Workspace, 'kind' | 'name'>): string {
  return w.kind === 'personal' ? 'Personal' : w.name ?? 'Organisation';
}

/** The switcher; `version` changes when the list may have (an invitation accepted). */
export function WorkspaceSwitcher(p: { session: Session; version: number; reload: () => Promise<unknown> }):
  JSX.Element {
  const current = p.session.workspace?.workspace_id ?? p.session.account_id;
  const d = useLoad(() => api<{ current_workspace_id: string; workspaces: Workspace[] }>('GET',
    '/v1/service/workspaces'), [current, p.version]);
  const [choice, setChoice] = useState(current);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => setChoice(current), [current]);
  const list = d.data?.workspaces ?? [];
  if (list.length < 2) return <></>;
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    if (choice === current) return;
    try {
      await api('POST', '/v1/auth/session/workspace', { workspace_id: choice });
      setError(null);
      await p.reload();
      navigate('/');
    } catch (err) { setError(err); }
  };
  return (
    <form class="workspace" onSubmit={(e) => { void submit(e); }}>
      <label for="workspace">Workspace</label>
      <select id="workspace" value={choice} onChange={(e) => setChoice((e.target as HTMLSelectElement).value)}>
        {list.map((w) => <option key={w.workspace_id} value={w.workspace_id}>{workspaceName(w)} ({w.role})</option>)}
      </select>
      <button type="submit">Switch</button>
      <ErrorText error={error ?? d.error} />
    </form>
  );
}
