/**
 * The platform's API-key rotation in Debian's Chromium against a real
 * sidecar, with the keyboard alone: confirmed in a dialog, the new key is
 * shown exactly once (with a plain warning, gone when hidden and after a
 * reload) and never written to web storage; the old key is refused with
 * `401 invalid_api_key` and the new one works. Also the console's "page not
 * found". axe-core on each view; screenshots.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo } from './browser.js';
import { apiClient, expectNoProblems, sessionInBrowser } from './steps.js';

// Browser globals used inside page.evaluate callbacks (module-scoped: the root program has no DOM types).
declare const document: { cookie: string; body: { innerText: string }; querySelectorAll(s: string): Iterable<{ value: string }> };
declare const localStorage: { length: number } & Record<string, unknown>;
declare const sessionStorage: { length: number } & Record<string, unknown>;

t.test('rotate the API key: shown once, the old key refused, the new one works — keyboard only', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const b = await launch();
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page } = b;
  const check = async (name: string): Promise<void> => {
    t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };

  /** Where the page holds `text`: the form fields whose value it is, plus its occurrences in the page's text. */
  const onPage = (text: string): Promise<number> => page.evaluate((k) => [...document.querySelectorAll('input, textarea')].filter((i) => i.value === k).length
    + document.body.innerText.split(k).length - 1, text);

  const call = await sessionInBrowser(b.context, sc, 'margaret@example.com', 'Margaret');
  const reg = await call('/v1/service/platforms/personal', { name: 'Apollo API', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] });
  const agentsPath = `/v1/service/connections/${reg.connection_id}/agents`;
  const old = apiClient(sc.url, reg.api_key);
  t.equal((await old.get(agentsPath)).status, 200, 'the registered key works');

  await page.goto(`${sc.url}/console/platform`);
  await page.getByRole('heading', { name: 'API key', exact: true }).waitFor();
  await tabTo(page, 'button:text-is("Rotate API key…")');
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name: 'Rotate the API key?' });
  await dialog.waitFor();
  t.match(await dialog.textContent(), /The current key stops working\./, 'the dialog says what happens');
  await tabTo(page, 'dialog button:text-is("Rotate key")');
  await page.keyboard.press('Enter');

  const secrets = page.getByRole('region', { name: 'New API key' });
  await secrets.waitFor();
  await dialog.waitFor({ state: 'hidden' });
  t.match(await secrets.locator('.warning').textContent(), /^Copy it now\. It is shown only this once: agent-authz keeps only a hash or a sealed copy and cannot show it again\./, 'a plain warning');
  t.equal(await secrets.locator('input').count(), 1, 'one secret: the API key');
  const key = await page.inputValue('#secret-api-key');
  t.match(key, /^aak_[0-9a-f]{12}_[\w-]{43}$/, 'the new key');
  t.not(key, reg.api_key, 'not the old one');
  t.equal(await onPage(key), 1, 'shown exactly once on the page (one field)');
  t.equal(await page.locator('#main p.status').textContent(), `Key ${reg.api_key_prefix} no longer works.`, 'the old key\'s fate, by its prefix');
  t.match(await focusedOnceOn(page, 'section.secrets'), /^section "New API key/, 'the focus is on the new key (not left on the rotate button)');
  await check('platform-rotated');

  // The old key is refused, the new one works.
  const refused = await old.get(agentsPath);
  t.equal(refused.status, 401, 'the old key: 401');
  t.match(refused.body, { error: { code: 'invalid_api_key', message: 'The API key is missing or not valid.' } }, 'invalid_api_key');
  t.equal((await apiClient(sc.url, key).get(agentsPath)).status, 200, 'the new key works');

  // Nothing in web storage; hidden, the key is gone, and a reload does not bring it back.
  const storage = await page.evaluate(() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage), document.cookie]));
  t.notMatch(storage, /aak_/, 'the key is not in localStorage, sessionStorage or a readable cookie');
  t.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0, 'web storage is empty');
  await tabTo(page, 'button:text-is("I have saved it — hide")');
  await page.keyboard.press('Enter');
  await secrets.waitFor({ state: 'detached' });
  t.equal(await onPage(key), 0, 'hidden: the key is gone from the page');
  await page.reload();
  await page.getByRole('heading', { name: 'API key', exact: true }).waitFor();
  t.equal(await onPage(key), 0, 'and not shown again after a reload');
  t.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0, 'web storage is still empty');

  // A console address that is no page.
  await page.goto(`${sc.url}/console/no-such-page`);
  await page.getByRole('heading', { level: 1, name: 'Page not found' }).waitFor();
  t.same(await axeViolations(page), [], 'page not found: no serious or critical accessibility violation');

  expectNoProblems(t, b);
});
