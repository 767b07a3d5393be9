/**
 * Steps the console's browser tests share: signing in through the page with
 * the code read from the e-mail (as a person would), or through the browser's
 * own request context (the same cookies, faster, for tests whose subject is a
 * later page), an API client for the platform's side (its API key),
 * challenge + present, verify, and the final check that the page reported no
 * error and no CSP violation.
 */
import type { BrowserContext, Page } from 'playwright-core';
import { Client } from '../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../helpers/sidecar.js';
import type { Browser } from './browser.js';
import { tabTo } from './browser.js';

/** The tap assertions the steps use. */
interface Asserts { match: (...a: any[]) => unknown; same: (...a: any[]) => unknown } // eslint-disable-line @typescript-eslint/no-explicit-any

/** Signs in on the sign-in page with the keyboard; optionally tries a wrong code first (and checks the message). */
export async function signIn(page: Page, sc: TestSidecar, email: string, o: { wrongFirst?: boolean; t?: Asserts; shot?: () => Promise<void> } = {}): Promise<void> {
  const before = sc.mail.messages.filter((m) => m.to === email).length;
  await tabTo(page, '#email');
  await page.keyboard.press('Control+A');
  await page.keyboard.type(email);
  await page.keyboard.press('Enter');
  await page.locator('#code:focus').waitFor();
  const deadline = Date.now() + 5000;
  while (sc.mail.messages.filter((m) => m.to === email).length === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const code = await sc.mail.codeFor(email);
  if (o.wrongFirst) {
    await page.keyboard.type(code === '000000' ? '111111' : '000000');
    await page.keyboard.press('Enter');
    await page.getByRole('alert').waitFor();
    o.t?.match(await page.getByRole('alert').textContent(), /^That code is not right\. 4 tries left\.$/, 'a wrong code: the tries left');
    await o.shot?.();
    await page.keyboard.press('Control+A');
  }
  await page.keyboard.type(code);
  await page.keyboard.press('Enter');
}

/**
 * Signs in and onboards through the browser's request context, whose cookies are the page's
 * (the session cookie and the CSRF cookie), with the code read from the e-mail. Returns a
 * caller of the session's API that sends the CSRF cookie as `X-Service-CSRF`.
 */
export async function sessionInBrowser(context: BrowserContext, sc: TestSidecar, email: string, first: string):
  Promise<(path: string, body?: unknown) => Promise<any>> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const call = async (path: string, body: unknown = {}): Promise<any> => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const csrf = (await context.cookies(sc.url)).find((c) => c.name === 'service_csrf')?.value;
    const r = await context.request.post(sc.url + path, { data: body, headers: csrf ? { 'x-service-csrf': csrf } : {} });
    if (!r.ok()) throw new Error(`${path}: ${r.status()} ${await r.text()}`);
    return r.json();
  };
  await call('/v1/auth/email/send-code', { email });
  await call('/v1/auth/email/verify-code', { email, code: await sc.mail.codeFor(email) });
  await call('/v1/auth/onboarding/profile', { first_name: first, last_name: 'Tester' });
  await call('/v1/auth/onboarding/account-type', { account_type: 'individual' });
  return call;
}

/** A client of the platform's side, with its API key. */
export function apiClient(url: string, apiKey: string): Client {
  const c = new Client(url);
  c.apiKey = apiKey;
  return c;
}

/** challenge + present for the flow's agent; the proof bundle (throws with the API's answer otherwise). */
export async function proofFor(f: Flow): Promise<unknown> {
  const ch = await f.platform.post('/v1/service/challenge');
  if (ch.status !== 200) throw new Error(`challenge: ${ch.text}`);
  const pr = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge });
  if (pr.status !== 200) throw new Error(`present: ${pr.text}`);
  return pr.body.proof_bundle;
}

/** Verify; the answer's body (a decision or an error). */
export async function verify(platform: Client, bundle: unknown, scope: string, context: Record<string, string>): Promise<unknown> {
  return (await platform.post('/v1/service/verify', { proof_bundle: bundle, required_scope: scope, context })).body;
}

/** The page reported no error, no failed render and no CSP violation. */
export function expectNoProblems(t: Asserts, b: Browser): void {
  t.same(b.problems, [], 'no page error, console error or CSP violation');
}

/** A JSON answer as the tests read it. */
export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The keyboard and API steps of a test that drives one page as one person: `get` reads the API
 * with the page's cookies; `press` tabs to a control and presses Enter; `type` tabs to a field and
 * replaces its text; `said` waits for a status message.
 */
export function driver(b: Browser, sc: TestSidecar): {
  get: (path: string) => Promise<Json>; press: (selector: string) => Promise<void>;
  type: (selector: string, text: string) => Promise<void>; said: (text: string | RegExp) => Promise<void>;
} {
  const { page } = b;
  return {
    get: async (path) => (await b.context.request.get(sc.url + path)).json(),
    press: async (selector) => { await tabTo(page, selector); await page.keyboard.press('Enter'); },
    type: async (selector, text) => {
      await tabTo(page, selector);
      await page.keyboard.press('Control+A');
      await page.keyboard.type(text);
    },
    said: (text) => page.getByRole('status').getByText(text).first().waitFor(),
  };
}
