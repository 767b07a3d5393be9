/**
 * The platform page. In an organisation it is org-platforms.tsx (several
 * platforms, the publisher domain, publishing). In the personal workspace, the
 * one platform: registration (POST /v1/service/platforms/personal) with the
 * three secrets shown exactly once, then its details (the name and description
 * editable, platform-edit.tsx), the callback address
 * (PUT .../callback), API-key rotation (the new key shown once) and removal
 * of its connection. Secrets live only in this page's memory. After a
 * rotation the focus goes to the new key (the dialog would return it to the
 * rotate button, below the key).
 */
import type { JSX } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ConfirmDialog, ErrorText, PageTitle, SecretsOnce, StatusText, useLoad } from '../ui/common.js';
import { when } from '../ui/format.js';
import type { Connection, Platform, Registration } from '../types.js';
import { RegisterForm, registrationSecrets } from './register.js';
import type { Secrets } from './register.js';
import { EditPlatform } from './platform-edit.js';
import { OrgPlatformsPage } from './org-platforms.js';
import { useApp } from '../app.js';

/** The platform page: an organisation's platforms and publishing, or the personal platform. */
export function PlatformPage(): JSX.Element {
  const { session } = useApp();
  return session.workspace?.kind === 'organization' ? <OrgPlatformsPage /> : <PersonalPlatformPage />;
}

/** The personal workspace's one platform (its person is its owner: every control is theirs). */
function PersonalPlatformPage(): JSX.Element {
  const d = useLoad(async () => {
    const [p, c] = await Promise.all([
      api<{ platforms: Platform[] }>('GET', '/v1/service/platforms'),
      api<{ connections: Connection[] }>('GET', '/v1/service/connections'),
    ]);
    return { platform: p.platforms[0] ?? null, connections: c.connections };
  });
  const [secrets, setSecrets] = useState<Secrets | null>(null);
  const [status, setStatus] = useState('');
  const [callback, setCallback] = useState<string | null>(null);
  const [cbError, setCbError] = useState<unknown>(null);
  const [dialog, setDialog] = useState<'rotate' | 'remove' | null>(null);
  const rotated = useRef(false);

  const registered = (r: Registration): void => {
    setSecrets(registrationSecrets(r));
    d.reload();
  };

  if (d.error && !d.data) return <section><PageTitle>Platform</PageTitle><ErrorText error={d.error} /></section>;
  if (!d.data) return <section><PageTitle>Platform</PageTitle><p role="status">Loading…</p></section>;
  const { platform, connections } = d.data;
  const conn = connections.find((c) => c.connection_id === platform?.connection_id) ?? null;
  const cbValue = callback ?? platform?.callback_url ?? '';

  const saveCallback = async (e: Event): Promise<void> => {
    e.preventDefault();
    setCbError(null); setStatus('');
    try {
      await api('PUT', `/v1/service/platforms/${platform!.platform_id}/callback`, { callback_url: cbValue.trim() === '' ? null : cbValue.trim() });
      setStatus(cbValue.trim() ? 'Callback address saved.' : 'Callback address removed: no webhooks will be sent.');
      setCallback(null);
      d.reload();
    } catch (err) { setCbError(err); }
  };

  return (
    <section>
      <PageTitle>Platform</PageTitle>
      {secrets && <SecretsOnce {...secrets} onDone={() => setSecrets(null)} />}
      {!platform ? <RegisterForm onRegistered={registered} /> : (
        <>
          <dl class="facts">
            <dt>Name</dt><dd>{platform.name}</dd>
            <dt>Platform id</dt><dd class="mono">{platform.platform_id}</dd>
            <dt>Connection id</dt><dd class="mono">{platform.connection_id ?? '—'}</dd>
            <dt>Connection</dt><dd>{conn ? `${conn.status}${conn.removed_at ? ` (removed ${when(conn.removed_at)})` : ''}` : '—'}</dd>
            <dt>Surface</dt><dd>{platform.surface_type}</dd>
            <dt>Publish state</dt><dd>{platform.publish_state} <span class="hint">(a personal account's platform
              stays a draft; publishing in the directory needs an organisation)</span></dd>
            <dt>Scope ceiling</dt><dd>{platform.default_allowed_scopes.join(', ')}</dd>
            <dt>API key expires</dt><dd>{when(platform.expires_at)}</dd>
            <dt>Registered</dt><dd>{when(platform.created_at)}</dd>
            <dt>Description</dt><dd>{platform.description || '—'}</dd>
          </dl>
          <EditPlatform platform={platform} onSaved={(saved) => { setStatus(`Saved ${saved.name}.`); d.reload(); }} />
          <form class="panel" onSubmit={saveCallback}>
            <h2>Webhook callback address</h2>
            {platform.callback_disabled_at && <p class="warning">Deliveries were disabled on {when(platform.callback_disabled_at)} after
              repeated failures. Saving the address enables them again.</p>}
            <label for="callback">Callback URL (https; empty = no webhooks)</label>
            <input id="callback" type="url" value={cbValue} placeholder="https://example.com/agent-authz/webhooks"
              onInput={(e) => setCallback((e.target as HTMLInputElement).value)} />
            <button type="submit">Save callback address</button>
            <ErrorText error={cbError} />
          </form>
          {conn?.status === 'active' && (
            <div class="panel">
              <h2>API key</h2>
              <p>Rotating makes a new key and shows it once; the current key stops working (or after the grace period your operator set).</p>
              <div class="actions">
                <button type="button" onClick={() => setDialog('rotate')}>Rotate API key…</button>
                <button type="button" class="danger" onClick={() => setDialog('remove')}>Remove connection…</button>
              </div>
            </div>
          )}
          <ConfirmDialog open={dialog === 'rotate'} title="Rotate the API key?" confirmLabel="Rotate key" onClose={() => setDialog(null)}
            onClosed={() => {
              if (rotated.current) document.querySelector<HTMLElement>('section.secrets')?.focus();
              rotated.current = false;
            }}
            onConfirm={async () => {
              const r = await api<{
                api_key: string; previous_prefix: string; previous_key_valid_until: string | null }>(
                  'POST', `/v1/service/connections/${conn!.connection_id}/rotate-key`);
              setSecrets({ title: 'New API key', secrets: [{ id: 'secret-api-key', label: 'API key', value: r.api_key }] });
              rotated.current = true;
              setStatus(`Key ${r.previous_prefix} ${r.previous_key_valid_until ? `works until ${when(r.previous_key_valid_until)}` : 'no longer works'}.`);
            }}>
            <p>Your platform must switch to the new key. The current key stops working.</p>
          </ConfirmDialog>
          <ConfirmDialog open={dialog === 'remove'} title="Remove the connection?" confirmLabel="Remove connection" danger onClose={() => setDialog(null)}
            onConfirm={async () => {
              const r = await api<{ revoked_cert_ids: string[] }>('POST', `/v1/service/connections/${conn!.connection_id}/remove`);
              setStatus(`Connection removed; ${r.revoked_cert_ids.length} certificate(s) revoked.`);
              d.reload();
            }}>
            <p>Its API keys stop working, every certificate issued on it is revoked and its pending requests are denied. This cannot be undone.</p>
          </ConfirmDialog>
        </>
      )}
      <StatusText>{status}</StatusText>
    </section>
  );
}
