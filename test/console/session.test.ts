/**
 * The console's session handling in a real browser against a real sidecar
 * whose clock the test moves (and the page's clock with it): the page
 * refreshes the session before it expires and then sends the rotated CSRF
 * token; an expired session returns to sign-in, which comes back to the page
 * the user was on; a CSRF refusal is shown as an error on the page (not a
 * blank page), and signing in again recovers.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import { axeViolations, launch, screenshot, tabTo } from './browser.js';
import { expectNoProblems, signIn } from './steps.js';

const MIN = 60_000;

t.test('refresh before expiry, expiry and return, CSRF failure', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const b = await launch({ clock: true });
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page, context } = b;
  const csrf = async (): Promise<string | undefined> => (await context.cookies(sc.url)).find((c) => c.name === 'service_csrf')?.value;

  await page.goto(`${sc.url}/console/platform`);
  await page.waitForURL(/sign-in\?next=%2Fplatform$/);
  await page.getByRole('heading', { name: 'Sign in to agent-authz' }).waitFor();
  await signIn(page, sc, 'grace@example.com');
  await page.getByLabel('First name').fill('Grace');
  await page.getByLabel('Last name').fill('Hopper');
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByRole('button', { name: 'Finish' }).click();
  await page.waitForURL(/\/console\/platform$/);
  await page.getByRole('heading', { level: 1, name: 'Platform' }).waitFor();
  t.pass('after onboarding: the page asked for at first');
  const reg = await page.request.post(`${sc.url}/v1/service/platforms/personal`, {
    headers: { 'x-service-csrf': (await csrf())! },
    data: { name: 'Hopper API', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] },
  });
  t.equal(reg.status(), 200);
  await page.reload();
  await page.getByRole('heading', { name: 'Webhook callback address' }).waitFor();

  // 14 minutes later on both clocks: the page has refreshed the session on its own.
  const before = await csrf();
  const refreshed = page.waitForResponse((r) => r.url().endsWith('/v1/auth/refresh'));
  sc.clock.advance(14 * MIN);
  await page.clock.fastForward(14 * MIN);
  t.equal((await refreshed).status(), 200, 'refreshed before the 15-minute expiry');
  const after = await csrf();
  t.ok(after && after !== before, 'the refresh rotated the CSRF cookie');
  sc.clock.advance(10 * MIN);
  await page.getByLabel('Callback URL (https; empty = no webhooks)').fill('http://127.0.0.1:9/hooks');
  const put = page.waitForRequest((r) => r.method() === 'PUT');
  // The page re-reads the platform after saving; that must finish before the session runs out.
  const reread = Promise.all(['/v1/service/platforms', '/v1/service/connections'].map((p) => page.waitForResponse((r) => r.url().endsWith(p))));
  await page.getByRole('button', { name: 'Save callback address' }).click();
  t.equal((await put).headers()['x-service-csrf'], after, 'the next change sends the new token');
  await page.getByText('Callback address saved.').waitFor();
  await reread;

  // The session runs out (no refresh in time): the next call returns to sign-in, then back here.
  sc.clock.advance(16 * MIN);
  await tabTo(page, 'nav a[href="/console/audit"]');
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/console\/sign-in\?next=%2Faudit$/);
  await page.getByRole('heading', { name: 'Sign in to agent-authz' }).waitFor();
  t.match(await page.locator('.notice').textContent(), /Your session has expired\. Sign in again to return to the page you were on\./);
  t.same(await axeViolations(page), [], 'session expired: no serious or critical accessibility violation');
  await screenshot(page, 'session-expired');
  await signIn(page, sc, 'grace@example.com');
  await page.waitForURL(/\/console\/audit$/);
  await page.getByRole('heading', { level: 1, name: 'Audit' }).waitFor();
  t.pass('back on the page the user was on');

  // A CSRF refusal is an error message on the page, not a blank page.
  await page.getByRole('link', { name: 'Platform' }).click();
  await page.getByRole('heading', { name: 'Webhook callback address' }).waitFor();
  await context.addCookies([{ name: 'service_csrf', value: 'forged.token', url: sc.url }]);
  await page.getByRole('button', { name: 'Save callback address' }).click();
  const alert = page.getByRole('alert');
  await alert.waitFor();
  t.match(await alert.textContent(), /The security check of this change failed \(csrf_invalid\): The CSRF token does not match this session\. Sign out and sign in again/);
  t.ok(await page.getByRole('heading', { level: 1, name: 'Platform' }).isVisible(), 'the page is still there');
  t.same(await axeViolations(page), [], 'CSRF error: no serious or critical accessibility violation');
  await screenshot(page, 'csrf-error');
  await context.clearCookies({ name: 'service_csrf' });
  await page.getByRole('button', { name: 'Save callback address' }).click();
  await page.getByText(/\(csrf_required\)/).waitFor();

  // Signing out and in again recovers.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to agent-authz' }).waitFor();
  await signIn(page, sc, 'grace@example.com');
  await page.getByRole('heading', { level: 1, name: 'Overview' }).or(page.getByRole('heading', { level: 1, name: /Hello/ })).waitFor();
  await page.getByRole('link', { name: 'Platform' }).click();
  await page.getByLabel('Callback URL (https; empty = no webhooks)').fill('');
  await page.getByRole('button', { name: 'Save callback address' }).click();
  await page.getByText('Callback address removed: no webhooks will be sent.').waitFor();
  expectNoProblems(t, b);
});
