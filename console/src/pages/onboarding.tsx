/**
 * Onboarding: the profile (first and last name), then the account type,
 * which completes onboarding (POST /v1/auth/onboarding/profile and
 * /account-type). The API's validation messages are shown as it gives them.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { ErrorText, PageTitle } from '../ui/common.js';
import { currentRoute, navigate } from '../router.js';

/** The onboarding page (shown until onboarding is complete). */
export function OnboardingPage(): JSX.Element {
  const { session, reloadSession } = useApp();
  const [first, setFirst] = useState(session.first_name ?? '');
  const [last, setLast] = useState(session.last_name ?? '');
  const [type, setType] = useState('individual');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const run = async (e: Event, call: () => Promise<unknown>): Promise<void> => {
    e.preventDefault();
    setBusy(true); setError(null);
    try {
      await call();
      const s = await reloadSession();
      if (s?.onboarding_step === 'complete') {
        const path = currentRoute().path;
        navigate(path === '/onboarding' ? '/' : path, { replace: true });
      }
    } catch (err) { setError(err); } finally { setBusy(false); }
  };

  return (
    <section class="panel narrow">
      <PageTitle>Welcome — set up your account</PageTitle>
      <ol class="steps" aria-label="Onboarding steps">
        <li aria-current={session.onboarding_step === 'profile' ? 'step' : undefined}>Profile</li>
        <li aria-current={session.onboarding_step === 'account_type' ? 'step' : undefined}>Account type</li>
      </ol>
      {session.onboarding_step === 'profile' ? (
        <form onSubmit={(e) => run(e, () => api('POST', '/v1/auth/onboarding/profile', { first_name: first, last_name: last }))}>
          <label for="first">First name</label>
          <input id="first" autoComplete="given-name" value={first} maxLength={100} onInput={(e) => setFirst((e.target as HTMLInputElement).value)} />
          <label for="last">Last name</label>
          <input id="last" autoComplete="family-name" value={last} maxLength={100} onInput={(e) => setLast((e.target as HTMLInputElement).value)} />
          <button type="submit" class="primary" disabled={busy}>Continue</button>
        </form>
      ) : (
        <form onSubmit={(e) => run(e, () => api('POST', '/v1/auth/onboarding/account-type', { account_type: type }))}>
          <fieldset>
            <legend>Account type</legend>
            <label class="choice"><input type="radio" name="type" value="individual" checked={type === 'individual'} onChange={() => setType('individual')} />
              <span><strong>Individual</strong> — a personal workspace with alpha credits; you can register one platform.</span></label>
            <label class="choice"><input type="radio" name="type" value="organization" checked={type === 'organization'}
              onChange={() => setType('organization')} />
              <span><strong>Organization</strong> — recorded now; organization features (several platforms, team members)
                are not in this release.</span></label>
          </fieldset>
          <button type="submit" class="primary" disabled={busy}>Finish</button>
        </form>
      )}
      <ErrorText error={error} />
    </section>
  );
}
