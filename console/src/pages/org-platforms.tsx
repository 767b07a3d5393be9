/**
 * An organisation's platforms (docs/organisations.md, "Platforms" and
 * "Publishing"): the publisher domain step by step (publisher-domain.tsx),
 * then each platform with its `publish_state`, what publishing still needs
 * (a verified publisher domain, a callback address, a description: the API's
 * own check, `checkPublish` of src/publishing.ts, so the page says what the
 * API would refuse, and why, before anyone clicks), Publish or Unpublish,
 * Edit (its name and description, platform-edit.tsx), its callback address,
 * and a form that registers one more platform (the three
 * secrets shown once). A refusal the API still gives (the state changed
 * meanwhile) is shown as it says it, with its code. Without
 * `platforms_manage` the page reads and says who may act.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ERRORS } from '../../../src/errors.js';
import { PUBLISH_STATES, checkPublish } from '../../../src/publishing.js';
import type { PublishRefusal, PublishState } from '../../../src/publishing.js';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { allows } from '../session.js';
import { ErrorText, PageTitle, SecretsOnce, StatusText, useLoad } from '../ui/common.js';
import { when } from '../ui/format.js';
import type { Platform, PublisherDomain, Registration } from '../types.js';
import { EditPlatform } from './platform-edit.js';
import { PublisherDomainPanel } from './publisher-domain.js';
import { RegisterForm, registrationSecrets } from './register.js';
import type { Secrets } from './register.js';

const enc = encodeURIComponent;

/** What publishing `p` still needs, as the API's check says (null when it may be published now). */
function publishRefusal(p: Platform, domain: PublisherDomain | null): PublishRefusal | null {
  if (!(PUBLISH_STATES as readonly string[]).includes(p.publish_state)) return null;
  const c = checkPublish(p.publish_state as PublishState, {
    organisation: true, domainVerified: domain?.state === 'verified',
    callbackUrl: p.callback_url, description: p.description });
  return c.ok ? null : c.code;
}

function Requirements(p: { platform: Platform; domain: PublisherDomain | null }): JSX.Element {
  const items: [string, boolean][] = [
    ['a verified publisher domain', p.domain?.state === 'verified'],
    ['a callback address', (p.platform.callback_url ?? '').trim() !== ''],
    ['a description', p.platform.description.trim() !== ''],
  ];
  return (
    <ul class="checklist" aria-label={`What publishing ${p.platform.name} needs`}>
      {items.map(([what, ok]) => <li key={what} class={ok ? 'ok' : 'missing'}>
        {ok ? '✓' : '✗'} {what}<span class="sr-only">{ok ? ': done' : ': missing'}</span></li>)}
    </ul>
  );
}

function PlatformCard(p: { platform: Platform; domain: PublisherDomain | null; manage: boolean;
  say: (s: string) => void; reload: () => void }): JSX.Element {
  const x = p.platform;
  const [error, setError] = useState<unknown>(null);
  const [callback, setCallback] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const refusal = x.publish_state === 'published' ? null : publishRefusal(x, p.domain);
  const reasonId = `why-${x.platform_id}`;
  const act = async (f: () => Promise<string>): Promise<void> => {
    setError(null); setBusy(true);
    try { p.say(await f()); } catch (err) { setError(err); } finally { setBusy(false); p.reload(); }
  };
  const move = (to: 'publish' | 'unpublish'): void => void act(async () => {
    const r = await api<Platform>('POST', `/v1/service/platforms/${enc(x.platform_id)}/${to}`);
    return r.publish_state === 'published' ? `${x.name} is published: it is in the directory.`
      : `${x.name} is unpublished: it left the directory; its connections keep working.`;
  });
  const cb = callback ?? x.callback_url ?? '';
  const saveCallback = (e: Event): void => {
    e.preventDefault();
    void act(async () => {
      await api('PUT', `/v1/service/platforms/${enc(x.platform_id)}/callback`,
        { callback_url: cb.trim() === '' ? null : cb.trim() });
      setCallback(null);
      return cb.trim() ? `Callback address of ${x.name} saved.` : `Callback address of ${x.name} removed.`;
    });
  };
  return (
    <article class="panel" aria-labelledby={`name-${x.platform_id}`} data-platform={x.name}>
      <h3 id={`name-${x.platform_id}`}>{x.name} <span class={`badge ${x.publish_state === 'published'
        ? 'approved' : 'pending'}`}>{x.publish_state}</span></h3>
      <dl class="facts">
        <dt>Platform id</dt><dd class="mono">{x.platform_id}</dd>
        <dt>Description</dt><dd>{x.description || '—'}</dd>
        <dt>Callback address</dt><dd>{x.callback_url ?? '—'}</dd>
        <dt>Scopes it may ask for</dt><dd>{x.default_allowed_scopes.join(', ')}</dd>
        <dt>Registered</dt><dd>{when(x.created_at)}</dd>
      </dl>
      {p.manage && <EditPlatform platform={x}
        onSaved={(saved) => { p.say(`Saved ${saved.name}.`); p.reload(); }} />}
      {x.publish_state !== 'published' && <Requirements platform={x} domain={p.domain} />}
      {p.manage && (
        <div class="actions">
          {x.publish_state === 'published'
            ? <button type="button" disabled={busy} onClick={() => move('unpublish')}>Unpublish<span
              class="sr-only"> {x.name}</span></button>
            : <button type="button" class="primary" disabled={busy || refusal !== null}
              aria-describedby={refusal ? reasonId : undefined} onClick={() => move('publish')}>Publish<span
                class="sr-only"> {x.name}</span></button>}
        </div>
      )}
      {refusal && <p id={reasonId} class="hint" data-refusal={refusal}>Cannot publish yet: {ERRORS[refusal].message}
        {refusal === 'description_required' && ' Edit the platform to add one.'}</p>}
      {p.manage && (
        <form class="row wrap" onSubmit={saveCallback}>
          <label for={`cb-${x.platform_id}`}>Callback URL of {x.name}</label>
          <input id={`cb-${x.platform_id}`} type="url" value={cb} size={40}
            placeholder="https://example.com/agent-authz/webhooks"
            onInput={(e) => setCallback((e.target as HTMLInputElement).value)} />
          <button type="submit" disabled={busy}>Save<span
            class="sr-only"> the callback address of {x.name}</span></button>
        </form>
      )}
      <ErrorText error={error} />
    </article>
  );
}

/** The platforms page of an organisation. */
export function OrgPlatformsPage(): JSX.Element {
  const { session } = useApp();
  const manage = allows(session, 'platforms_manage');
  const d = useLoad(() => api<{ platforms: Platform[] }>('GET', '/v1/service/platforms'));
  const [domain, setDomain] = useState<PublisherDomain | null>(null);
  const [secrets, setSecrets] = useState<Secrets | null>(null);
  const [status, setStatus] = useState('');
  const registered = (r: Registration): void => {
    setSecrets(registrationSecrets(r));
    d.reload();
  };
  return (
    <section>
      <PageTitle>Platforms</PageTitle>
      {!manage && <p class="notice">Your role ({session.workspace?.role}) reads the platforms; registering,
        publishing, the publisher domain and callback addresses need an owner or admin.</p>}
      {secrets && <SecretsOnce {...secrets} onDone={() => setSecrets(null)} />}
      <PublisherDomainPanel manage={manage} onChange={setDomain} />
      <h2>Your platforms</h2>
      <ErrorText error={d.error} />
      {d.data && d.data.platforms.length === 0 && <p>No platform yet.</p>}
      {d.data?.platforms.map((x) => <PlatformCard key={x.platform_id} platform={x} domain={domain} manage={manage}
        say={setStatus} reload={d.reload} />)}
      <StatusText>{status}</StatusText>
      {manage && <RegisterForm path="/v1/service/platforms" onRegistered={registered}
        title={d.data?.platforms.length ? 'Register another platform' : 'Register a platform'} />}
    </section>
  );
}
