/**
 * Editing a platform's name and description (`PATCH /v1/service/platforms/{platform_id}`;
 * docs/organisations.md, "Publishing"), on the organisation's platform cards and the personal
 * platform page: an Edit button opens a small form with both fields filled in; Save sends them and
 * the page reloads the platform (so the publishing checklist follows); Cancel closes it. The focus
 * goes to the name field on opening and back to Edit on closing. A refusal is shown as the API
 * says it, with its code (a published platform's description cannot be emptied:
 * `description_required`). Shown only to a role that may manage platforms.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorText } from '../ui/common.js';
import type { Platform } from '../types.js';

/** The Edit control of one platform; `onSaved` gets the platform as the API answered it. */
export function EditPlatform(p: { platform: Platform; onSaved: (saved: Platform) => void }): JSX.Element {
  const x = p.platform;
  const [open, setOpen] = useState(false);
  const [name, setName] = useState(x.name);
  const [description, setDescription] = useState(x.description);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const nameRef = useRef<HTMLInputElement>(null);
  const editRef = useRef<HTMLButtonElement>(null);
  const wasOpen = useRef(false);
  useEffect(() => {
    if (open) nameRef.current?.focus();
    else if (wasOpen.current) editRef.current?.focus();
    wasOpen.current = open;
  }, [open]);
  const id = (what: string): string => `edit-${what}-${x.platform_id}`;

  const start = (): void => { setName(x.name); setDescription(x.description); setError(null); setOpen(true); };
  const save = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null); setBusy(true);
    try {
      const saved = await api<Platform>('PATCH', `/v1/service/platforms/${encodeURIComponent(x.platform_id)}`,
        { name, description });
      setOpen(false);
      p.onSaved(saved);
    } catch (err) { setError(err); } finally { setBusy(false); }
  };

  if (!open) {
    return <button type="button" ref={editRef} onClick={start}>Edit<span class="sr-only"> the name and description
      of {x.name}</span></button>;
  }
  return (
    <form class="panel" aria-label={`Edit ${x.name}`} onSubmit={(e) => { void save(e); }}>
      <label for={id('name')}>Name</label>
      <input id={id('name')} ref={nameRef} value={name} maxLength={200}
        onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      <label for={id('description')}>Description{x.publish_state === 'published'
        ? ' (a published platform keeps one)' : ' (publishing needs one)'}</label>
      <textarea id={id('description')} rows={3} maxLength={2000} value={description}
        onInput={(e) => setDescription((e.target as HTMLTextAreaElement).value)} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>Save<span class="sr-only"> {x.name}</span></button>
        <button type="button" disabled={busy} onClick={() => setOpen(false)}>Cancel</button>
      </div>
      <ErrorText error={error} />
    </form>
  );
}
