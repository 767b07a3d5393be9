/**
 * Sign-in with an e-mailed code (POST /v1/auth/email/send-code, then
 * verify-code). Each refusal is said plainly: a wrong code with the tries
 * left, a locked, expired or used code (with a button for a new one), and a
 * rate limit with the wait counting down (the API's `retry_after`).
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, describeError } from '../api.js';
import { plural } from '../ui/format.js';

/** The message for a refused send-code or verify-code. */
export function signInError(err: unknown): string {
  if (!(err instanceof ApiError)) return describeError(err);
  switch (err.code) {
    case 'invalid_code': {
      const left = typeof err.details.tries_left === 'number' ? err.details.tries_left : null;
      if (left === 0) return 'That code is not right, and it has no tries left. Request a new code.';
      return `That code is not right.${left === null ? '' : ` ${plural(left, 'try', 'tries')} left.`}`;
    }
    case 'code_locked': return 'Too many wrong tries: this code is locked. Request a new code.';
    case 'code_expired': return 'This code has expired (codes last 10 minutes). Request a new code.';
    case 'code_used': return 'This code was already used. Request a new code.';
    case 'rate_limited': return `Too many attempts. ${err.message}`;
    default: return describeError(err);
  }
}

/** The sign-in page. */
export function SignInPage(p: { notice: string | null; next: string; onSignedIn: () => Promise<void> }): JSX.Element {
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [step, setStep] = useState<'email' | 'code'>('email');
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const [waitUntil, setWaitUntil] = useState(0);
  const [now, setNow] = useState(Date.now());
  const codeRef = useRef<HTMLInputElement>(null);
  const headingRef = useRef<HTMLHeadingElement>(null);

  useEffect(() => { headingRef.current?.focus(); }, []);
  useEffect(() => { if (step === 'code') codeRef.current?.focus(); }, [step]);
  useEffect(() => {
    if (waitUntil <= now) return undefined;
    const t = setTimeout(() => setNow(Date.now()), 1000);
    return () => clearTimeout(t);
  }, [waitUntil, now]);
  const wait = Math.max(0, Math.ceil((waitUntil - now) / 1000));

  const fail = (err: unknown): void => {
    setError(signInError(err));
    if (err instanceof ApiError && err.code === 'rate_limited' && typeof err.details.retry_after === 'number') {
      setWaitUntil(Date.now() + err.details.retry_after * 1000);
      setNow(Date.now());
    }
    if (err instanceof ApiError && ['code_locked', 'code_expired', 'code_used'].includes(err.code)) setCode('');
  };

  const sendCode = async (e?: Event): Promise<void> => {
    e?.preventDefault();
    setBusy(true); setError(null); setStatus('');
    try {
      const r = await api<{ resent: boolean }>('POST', '/v1/auth/email/send-code', { email }, { anonymous: true });
      setStep('code');
      setStatus(r.resent ? `A new code is on its way to ${email}; the earlier one no longer works.` : `A 6-digit code is on its way to ${email}.`);
    } catch (err) { fail(err); } finally { setBusy(false); }
  };

  const verify = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true); setError(null);
    try {
      await api('POST', '/v1/auth/email/verify-code', { email, code: code.trim() }, { anonymous: true });
      setStatus('Signed in.');
      await p.onSignedIn();
    } catch (err) { fail(err); } finally { setBusy(false); }
  };

  return (
    <section class="panel narrow" aria-labelledby="signin-title">
      <h1 id="signin-title" tabIndex={-1} ref={headingRef}>Sign in to agent-authz</h1>
      {p.notice && <p class="notice" role="status">{p.notice}</p>}
      {step === 'email' ? (
        <form onSubmit={sendCode}>
          <label for="email">E-mail address</label>
          <input id="email" type="email" autoComplete="email" required value={email}
            onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
          <p class="hint">We e-mail you a 6-digit code. No password.</p>
          <button type="submit" class="primary" disabled={busy || wait > 0}>Send code</button>
        </form>
      ) : (
        <form onSubmit={verify}>
          <p>Code sent to <strong>{email}</strong>. <button type="button" class="link"
            onClick={() => { setStep('email'); setCode(''); setError(null); setStatus(''); }}>Use another address</button></p>
          <label for="code">6-digit code</label>
          <input id="code" ref={codeRef} inputMode="numeric" autoComplete="one-time-code" pattern="[0-9]{6}" maxLength={6} required
            value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} aria-describedby="code-help" />
          <p class="hint" id="code-help">The code works once, for 10 minutes, and allows 5 wrong tries.</p>
          <div class="actions">
            <button type="submit" class="primary" disabled={busy || wait > 0}>Sign in</button>
            <button type="button" disabled={busy || wait > 0} onClick={() => { void sendCode(); }}>Send a new code</button>
          </div>
        </form>
      )}
      {error && <p class="error" role="alert">{error}{wait > 0 ? ` You can try again in ${plural(wait, 'second')}.` : ''}</p>}
      <p class="status" role="status">{status}</p>
      {p.next !== '/' && <p class="hint">After signing in you return to <code>{p.next}</code>.</p>}
    </section>
  );
}
