/**
 * Small shared pieces of the console: the page heading (focused after each
 * navigation, so screen-reader and keyboard users start at the top of the new
 * page), error and success messages in live regions, a loader hook, a
 * confirmation dialog on the native `<dialog>` (focus trap and Escape for
 * free), and a copy button.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api.js';

/** The page's `<h1>`, focused when the page opens. */
export function PageTitle(p: { children: ComponentChildren }): JSX.Element {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => { ref.current?.focus(); }, []);
  return <h1 tabIndex={-1} ref={ref}>{p.children}</h1>;
}

/** An error message (`role="alert"`), or nothing. */
export function ErrorText(p: { error: unknown; id?: string }): JSX.Element | null {
  if (p.error === null || p.error === undefined) return null;
  const text = typeof p.error === 'string' ? p.error : describeError(p.error);
  return <p class="error" role="alert" id={p.id}>{text}</p>;
}

/** A success message in a polite live region (always rendered, so it is announced). */
export function StatusText(p: { children?: ComponentChildren }): JSX.Element {
  return <p class="status" role="status" aria-live="polite">{p.children}</p>;
}

/** State of {@link useLoad}. */
export interface Loaded<T> { data: T | undefined; error: unknown; loading: boolean; reload: () => void }

/** Loads data on mount and when `deps` change; `reload` loads again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then((data) => { if (live) setState({ data, error: null, loading: false }); },
      (error: unknown) => { if (live) setState((s) => ({ data: s.data, error, loading: false })); });
    return () => { live = false; };
  }, [tick, ...deps]); // eslint-disable-line react-hooks/exhaustive-deps
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { ...state, reload };
}

/** A modal confirmation on `<dialog>`: `children` are its fields; `onConfirm` may throw to keep it open with the error. */
export function ConfirmDialog(p: {
  open: boolean; title: string; confirmLabel: string; danger?: boolean; onConfirm: () => Promise<void>; onClose: () => void; children?: ComponentChildren;
  /** Called once the dialog has closed and the browser has returned the focus: where to move it when the opener is gone. */
  onClosed?: () => void;
}): JSX.Element {
  const ref = useRef<HTMLDialogElement>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (p.open && !d.open) { setError(null); d.showModal(); }
    if (!p.open && d.open) d.close();
  }, [p.open]);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    try { await p.onConfirm(); p.onClose(); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  const titleId = `dlg-${p.title.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <dialog ref={ref} aria-labelledby={titleId} onClose={() => { p.onClose(); p.onClosed?.(); }}>
      <form method="dialog" onSubmit={submit}>
        <h2 id={titleId}>{p.title}</h2>
        {p.children}
        <ErrorText error={error} />
        <div class="actions">
          <button type="submit" class={p.danger ? 'danger' : 'primary'} disabled={busy}>{p.confirmLabel}</button>
          <button type="button" onClick={p.onClose}>Cancel</button>
        </div>
      </form>
    </dialog>
  );
}

/** Copies `text` to the clipboard; if the browser refuses, selects the field `fallbackId` for Ctrl+C. */
export function CopyButton(p: { text: string; label: string; fallbackId: string }): JSX.Element {
  const [done, setDone] = useState<string>('');
  const copy = async (): Promise<void> => {
    try {
      await navigator.clipboard.writeText(p.text);
      setDone('Copied.');
    } catch {
      const el = document.getElementById(p.fallbackId) as HTMLInputElement | null;
      el?.focus();
      el?.select();
      setDone('Selected: press Ctrl+C (⌘C) to copy.');
    }
  };
  return (
    <span class="copy">
      <button type="button" onClick={() => { void copy(); }}>{p.label}</button>
      <span role="status" class="hint">{done}</span>
    </span>
  );
}

/** A read-only secret field with its copy button. */
export function SecretField(p: { id: string; label: string; value: string }): JSX.Element {
  return (
    <div class="secret">
      <label for={p.id}>{p.label}</label>
      <input id={p.id} readOnly value={p.value} spellcheck={false} autoComplete="off" class="mono" />
      <CopyButton text={p.value} label={`Copy ${p.label}`} fallbackId={p.id} />
    </div>
  );
}

/** The one-time display of secrets (one after a key rotation, three after registration): a plain warning, the fields, and a button that forgets them. */
export function SecretsOnce(p: { title: string; secrets: { id: string; label: string; value: string }[]; onDone: () => void }): JSX.Element {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => { ref.current?.focus(); }, []);
  return (
    <section class="secrets" aria-labelledby="secrets-title" tabIndex={-1} ref={ref}>
      <h2 id="secrets-title">{p.title}</h2>
      {p.secrets.length === 1
        ? <p class="warning"><strong>Copy it now.</strong> It is shown only this once: agent-authz keeps only
          a hash or a sealed copy and cannot show it again. Anyone who has it can act as your platform.</p>
        : <p class="warning"><strong>Copy these now.</strong> They are shown only this once: agent-authz keeps only
          a hash or a sealed copy and cannot show them again. Anyone who has them can act as your platform.</p>}
      {p.secrets.map((s) => <SecretField key={s.id} {...s} />)}
      <button type="button" class="primary" onClick={p.onDone}>I have saved {p.secrets.length === 1 ? 'it' : 'them'} — hide</button>
    </section>
  );
}
