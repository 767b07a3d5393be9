/**
 * The platform registration form: name, surface, the scope ceiling (from the
 * scope vocabulary of src/scopes.ts, plus custom scopes), description and an
 * optional callback address (personal, or one more platform of an
 * organisation). The API's validation messages are shown as it gives them.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { CANONICAL_SCOPES } from '../../../src/scopes.js';
import { api } from '../api.js';
import { ErrorText } from '../ui/common.js';
import type { Registration } from '../types.js';

const SURFACES = [
  ['agentic_api', 'Agent actions on an API'], ['conversational_ai', 'Conversational AI'], ['meetings', 'Meetings'], ['physical_ai', 'Physical AI'],
] as const;

/** Secrets shown once (`SecretsOnce`): a heading and the values with their labels. */
export type Secrets = { title: string; secrets: { id: string; label: string; value: string }[] };

/** The secrets of a registration's answer, as both platform pages show them once. */
export function registrationSecrets(r: Registration): Secrets {
  return {
    title: `Platform “${r.name}” registered — its secrets`,
    secrets: [
      { id: 'secret-api-key', label: 'API key', value: r.api_key },
      { id: 'secret-signing', label: 'Signing secret', value: r.signing_secret },
      { id: 'secret-webhook', label: 'Webhook signing secret', value: r.webhook_signing_secret },
    ],
  };
}

/**
 * The registration form; `onRegistered` receives the answer with its secrets. `path` is the route
 * (the personal one by default; an organisation's is `/v1/service/platforms`), `title` its heading.
 */
export function RegisterForm(p: { onRegistered: (r: Registration) => void; path?: string; title?: string }):
  JSX.Element {
  const [name, setName] = useState('');
  const [surface, setSurface] = useState('agentic_api');
  const [scopes, setScopes] = useState<string[]>([]);
  const [custom, setCustom] = useState('');
  const [description, setDescription] = useState('');
  const [callback, setCallback] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true); setError(null);
    const all = [...scopes, ...custom.split(/[\s,]+/).filter(Boolean)];
    try {
      const r = await api<Registration>('POST', p.path ?? '/v1/service/platforms/personal', {
        name, surface_type: surface, default_allowed_scopes: all,
        ...(description ? { description } : {}), ...(callback.trim() ? { callback_url: callback.trim() } : {}),
      });
      p.onRegistered(r);
      setName(''); setScopes([]); setCustom(''); setDescription(''); setCallback('');
    } catch (err) { setError(err); } finally { setBusy(false); }
  };

  return (
    <form class="panel" onSubmit={submit}>
      <h2>{p.title ?? 'Register your platform'}</h2>
      <p>Your platform gets a connection and an API key; its agents will ask you for delegations within the scopes you allow here.</p>
      <label for="p-name">Name</label>
      <input id="p-name" value={name} maxLength={200} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      <label for="p-surface">Surface</label>
      <select id="p-surface" value={surface} onChange={(e) => setSurface((e.target as HTMLSelectElement).value)}>
        {SURFACES.map(([v, l]) => <option key={v} value={v}>{l} ({v})</option>)}
      </select>
      <fieldset>
        <legend>Scope ceiling — what agents of this platform may ever be given</legend>
        <div class="scopes">
          {Object.entries(CANONICAL_SCOPES).map(([s, info]) => (
            <label key={s} class="inline">
              <input type="checkbox" value={s} checked={scopes.includes(s)}
                onChange={(e) => setScopes((e.target as HTMLInputElement).checked ? [...scopes, s] : scopes.filter((x) => x !== s))} />
              {' '}<code>{s}</code>{info.sensitive ? <span class="badge warn">sensitive</span> : null}
              <span class="hint"> {info.description}</span>
            </label>
          ))}
        </div>
        <label for="p-custom">Custom scopes (optional, space-separated, e.g. <code>custom:reports:export</code>)</label>
        <input id="p-custom" value={custom} spellcheck={false} onInput={(e) => setCustom((e.target as HTMLInputElement).value)} />
      </fieldset>
      <label for="p-description">Description (optional)</label>
      <textarea id="p-description" rows={2} maxLength={2000} value={description} onInput={(e) => setDescription((e.target as HTMLTextAreaElement).value)} />
      <label for="p-callback">Webhook callback URL (optional, https)</label>
      <input id="p-callback" type="url" value={callback} placeholder="https://example.com/agent-authz/webhooks"
        onInput={(e) => setCallback((e.target as HTMLInputElement).value)} />
      <button type="submit" class="primary" disabled={busy}>Register platform</button>
      <ErrorText error={error} />
    </form>
  );
}
