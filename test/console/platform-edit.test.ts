/**
 * Editing a platform and leaving an organisation in the console (issue 32), in Debian's Chromium
 * against a real sidecar, with the keyboard: an organisation's owner opens Edit on a platform
 * registered without a description (the focus goes to the name), adds one — the publishing
 * checklist then says the description is done — sees a blank name refused with the API's code,
 * cancels (the focus returns to Edit); on the Organisations page the owner, the last one, tries to
 * leave and the dialog shows the API's refusal (`last_owner`). A member, in another browser, has
 * no Edit (their role reads) and leaves: back at sign-in, told so, and no longer a member. The
 * personal platform page edits its one platform too. The API's state is read after each step;
 * axe-core on each view.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import { axeViolations, focusedOnceOn, launch, screenshot, textOnceMatches } from './browser.js';
import { driver, expectNoProblems, sessionInBrowser } from './steps.js';

t.test('edit a platform\'s name and description; leave an organisation', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const owner = await launch();
  const guest = await launch();
  t.teardown(async () => { await owner.close(); await guest.close(); await sc.close(); });
  const check = async (page: typeof owner.page, name: string): Promise<void> => {
    t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };

  // The owner's organisation and a platform registered without a description (through the API).
  const call = await sessionInBrowser(owner.context, sc, 'otto@example.com', 'Otto');
  const org = await call('/v1/service/organizations', { name: 'Edit Co' });
  await call('/v1/auth/session/workspace', { workspace_id: org.organization_id });
  const reg = await call('/v1/service/platforms', { name: 'Bare Bot', surface_type: 'agentic_api',
    default_allowed_scopes: ['data:read'] });
  const id = reg.platform_id as string;
  const { page } = owner;
  const { get, press, type, said } = driver(owner, sc);
  const card = page.locator('article[data-platform="Bare Bot"]');
  await page.goto(`${sc.url}/console/platform`);
  await card.waitFor();
  const needs = (): Promise<string[]> => card.locator('.checklist li').allTextContents();
  t.same((await needs())[2], '✗ a description: missing');
  t.equal(await card.locator('[data-refusal]').innerText(),
    'Cannot publish yet: Publishing needs a verified publisher domain.');

  // 1. Edit: the focus goes to the name; a description added; the checklist follows.
  await press('article[data-platform="Bare Bot"] button:has-text("Edit")');
  t.match(await focusedOnceOn(page, `#edit-name-${id}`), new RegExp(`^input#edit-name-${id}`), 'the focus is on the name');
  t.equal(await page.locator(`#edit-name-${id}`).inputValue(), 'Bare Bot', 'filled in');
  await check(page, 'platform-edit-open');
  await type(`#edit-description-${id}`, 'Answers travel questions.');
  await press('article[data-platform="Bare Bot"] button[type=submit]:has-text("Save")');
  await said('Saved Bare Bot.');
  t.match(await get(`/v1/service/platforms/${id}`), { name: 'Bare Bot', description: 'Answers travel questions.' },
    'the API has the description');
  await card.getByText('✓ a description: done').waitFor();
  t.same(await needs(), ['✗ a verified publisher domain: missing', '✗ a callback address: missing',
    '✓ a description: done'], 'the checklist says the description is done');
  t.match(await card.locator('dl').innerText(), /Answers travel questions\./);

  // 2. A blank name is refused with the API's code; Cancel returns the focus to Edit.
  await press('article[data-platform="Bare Bot"] button:has-text("Edit")');
  await type(`#edit-name-${id}`, ' ');
  await page.keyboard.press('Enter');
  const alert = card.locator('[role=alert]');
  await alert.waitFor();
  t.match(await alert.innerText(), /^body\.name .*\(invalid_request\)$/, 'the API\'s message and code');
  await press('article[data-platform="Bare Bot"] button:text-is("Cancel")');
  t.match(await focusedOnceOn(page, 'article[data-platform="Bare Bot"] button:has-text("Edit")'), /^button "Edit/,
    'the focus is back on Edit');
  t.equal((await get(`/v1/service/platforms/${id}`)).name, 'Bare Bot', 'nothing changed');

  // 3. The last owner cannot leave: the dialog shows the API's refusal.
  await press('nav a[href="/console/organisations"]');
  await press('button:text-is("Leave Edit Co…")');
  await press('dialog button:text-is("Leave")');
  const refusal = page.locator('dialog [role=alert]');
  await refusal.waitFor();
  t.match(await refusal.innerText(), /\(last_owner\)$/, 'refused with the API\'s code');
  await check(page, 'organisation-leave-refused');
  await press('dialog button:text-is("Cancel")');
  t.equal((await get('/v1/auth/session')).workspace.workspace_id, org.organization_id, 'still acting in it');

  // 4. A member, in another browser: no Edit; leaves and is back at sign-in.
  const inv = await call('/v1/service/organization/invitations', { email: 'mia@example.com', role: 'member' });
  const gcall = await sessionInBrowser(guest.context, sc, 'mia@example.com', 'Mia');
  await gcall(`/v1/service/invitations/${inv.invitation_id}/accept`);
  await gcall('/v1/auth/session/workspace', { workspace_id: org.organization_id });
  const g = driver(guest, sc);
  await guest.page.goto(`${sc.url}/console/platform`);
  await guest.page.locator('article[data-platform="Bare Bot"]').waitFor();
  t.equal(await guest.page.locator('article button:has-text("Edit")').count(), 0, 'a member has no Edit');
  await g.press('nav a[href="/console/organisations"]');
  await g.press('button:text-is("Leave Edit Co…")');
  await g.press('dialog button:text-is("Leave")');
  await guest.page.getByText('You left Edit Co. Sign in again.').waitFor();
  await guest.page.waitForURL((u) => u.pathname === '/console/sign-in');
  t.equal((await guest.context.request.get(`${sc.url}/v1/auth/session`)).status(), 401, 'the session ended');
  const members = (await get('/v1/service/organization/members')).members as { email: string }[];
  t.same(members.map((m) => m.email), ['otto@example.com'], 'no longer a member');
  await check(guest.page, 'organisation-left');

  // 5. The personal platform page edits its one platform.
  const pcall = await sessionInBrowser(guest.context, sc, 'pat@example.com', 'Pat');
  const mine = await pcall('/v1/service/platforms/personal', { name: 'My Bot', surface_type: 'agentic_api',
    default_allowed_scopes: ['data:read'] });
  await guest.page.goto(`${sc.url}/console/platform`);
  await g.press('button:has-text("Edit")');
  await g.type(`#edit-name-${mine.platform_id}`, 'My Helper');
  await g.type(`#edit-description-${mine.platform_id}`, 'Reads my calendar.');
  await guest.page.keyboard.press('Tab');
  await guest.page.keyboard.press('Enter');
  await g.said('Saved My Helper.');
  t.match(await g.get(`/v1/service/platforms/${mine.platform_id}`), { name: 'My Helper', description: 'Reads my calendar.' });
  const facts = /My Helper[\s\S]*Reads my calendar\./;
  t.match(await textOnceMatches(guest.page.locator('dl.facts'), facts), facts);
  expectNoProblems(t, owner);
  expectNoProblems(t, guest);
});
