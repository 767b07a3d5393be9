/**
 * The directory of published platforms (docs/organisations.md, "Publishing"):
 * each platform's name, description, publisher and the publisher's verified
 * domain, and the scopes it may ask for; and connecting the workspace to one
 * (`POST /v1/service/directory/{platform_id}/connect`), choosing
 * `allowed_scopes` within the platform's scopes — checkboxes of its scopes
 * only, none ticked at first. The connection's API key goes to the platform
 * in its signed webhook and is never shown here. A platform the workspace is
 * already connected to says so. Connecting needs `platforms_manage`.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { CANONICAL_SCOPES } from '../../../src/scopes.js';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { Link } from '../router.js';
import { allows } from '../session.js';
import { ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import type { Connection, DirectoryEntry } from '../types.js';

const enc = encodeURIComponent;
/** A vocabulary scope's meaning; empty for a custom scope. */
const describe = (s: string): string =>
  (Object.hasOwn(CANONICAL_SCOPES, s) ? CANONICAL_SCOPES[s as keyof typeof CANONICAL_SCOPES].description : '');

function ConnectForm(p: { entry: DirectoryEntry; onConnected: (c: Connection) => void; onCancel: () => void }):
  JSX.Element {
  const e = p.entry;
  const [scopes, setScopes] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (ev: Event): Promise<void> => {
    ev.preventDefault();
    setError(null); setBusy(true);
    try {
      p.onConnected(await api<Connection>('POST', `/v1/service/directory/${enc(e.platform_id)}/connect`,
        { allowed_scopes: e.scopes.filter((s) => scopes.includes(s)) }));
    } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return (
    <form class="panel" onSubmit={(ev) => { void submit(ev); }} aria-labelledby="connect-title">
      <h2 id="connect-title" tabIndex={-1}>Connect to {e.name}</h2>
      <p>{e.name} is published by <strong>{e.publisher.name}</strong>, whose domain <strong
        class="mono">{e.publisher.verified_domain}</strong> is verified. Its agents will ask you for delegations
        within the scopes you allow here; you approve each request.</p>
      <fieldset>
        <legend>Scopes {e.name} may ask for</legend>
        {e.scopes.map((s) => (
          <label key={s} class="inline">
            <input type="checkbox" value={s} checked={scopes.includes(s)}
              onChange={(ev) => setScopes((ev.target as HTMLInputElement).checked ? [...scopes, s]
                : scopes.filter((x) => x !== s))} />
            {' '}<code>{s}</code>
            {describe(s) && <span class="hint"> {describe(s)}</span>}
          </label>
        ))}
      </fieldset>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>Connect</button>
        <button type="button" onClick={p.onCancel}>Cancel</button>
      </div>
      <ErrorText error={error} />
    </form>
  );
}

/** The directory page. */
export function DirectoryPage(): JSX.Element {
  const { session } = useApp();
  const manage = allows(session, 'platforms_manage');
  const d = useLoad(async () => {
    const [dir, conns] = await Promise.all([
      api<{ platforms: DirectoryEntry[] }>('GET', '/v1/service/directory'),
      api<{ connections: Connection[] }>('GET', '/v1/service/connections'),
    ]);
    return { platforms: dir.platforms, connected: new Set(conns.connections.filter((c) => c.status === 'active')
      .map((c) => c.platform_id)) };
  });
  const [open, setOpen] = useState<DirectoryEntry | null>(null);
  const [status, setStatus] = useState('');
  return (
    <section>
      <PageTitle>Directory</PageTitle>
      <p>Platforms published by organisations with a verified domain. Connecting lets a platform's agents ask you
        for delegations.</p>
      {!manage && <p class="notice">Your role ({session.workspace?.role}) may read the directory; connecting
        needs an owner or admin.</p>}
      <ErrorText error={d.error} />
      {d.data && d.data.platforms.length === 0 && <p>No platform is published yet.</p>}
      {d.data && d.data.platforms.length > 0 && (
        <table>
          <caption>Published platforms</caption>
          <thead><tr><th scope="col">Platform</th><th scope="col">Publisher</th><th scope="col">Verified domain</th>
            <th scope="col">Scopes it may ask for</th>
            <th scope="col"><span class="sr-only">Action</span></th></tr></thead>
          <tbody>{d.data.platforms.map((e) => (
            <tr key={e.platform_id} data-platform={e.name}>
              <td><strong>{e.name}</strong><br /><span class="hint">{e.description}</span></td>
              <td>{e.publisher.name}</td><td class="mono">{e.publisher.verified_domain}</td>
              <td>{e.scopes.join(', ')}</td>
              <td>{d.data!.connected.has(e.platform_id) ? <Link href="/connections">Connected</Link>
                : manage && <button type="button" onClick={() => {
                  setOpen(e); setStatus('');
                  setTimeout(() => document.getElementById('connect-title')?.focus(), 0);
                }}>Connect…<span class="sr-only"> to {e.name}</span></button>}</td>
            </tr>
          ))}</tbody>
        </table>
      )}
      {open && <ConnectForm key={open.platform_id} entry={open} onCancel={() => setOpen(null)} onConnected={(c) => {
        setOpen(null);
        setStatus(`Connected to ${open.name} with ${c.allowed_scopes.join(', ')}. ${open.name} receives the `
          + 'connection\'s key in its signed webhook; its requests will appear under Connections.');
        d.reload();
      }} />}
      <StatusText>{status}</StatusText>
    </section>
  );
}
