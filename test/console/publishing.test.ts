/**
 * Organisations and publishing in the console (issue 32), in Debian's Chromium against a real
 * sidecar and a real DNS server on loopback (dnsmasq), with the keyboard: a person creates an
 * organisation on the Organisations page (a blank name refused with the API's code) and switches
 * to it; on the Platform page the publisher domain goes step by step — a name the API refuses, a
 * claim whose TXT record (name and text) is shown, a check that finds no record and one that finds
 * another record (each said with its code and what to do), the record published, verified with its date; two platforms registered
 * from the page, each saying what publishing still needs; a callback added, published, in the
 * directory; the record removed and the re-check lapses the claim — the stale page's Unpublish is
 * refused with the API's code, and after a reload the lapse is shown with its date and the platform
 * is unpublished; back to the personal workspace from the Organisations page. The API's state is read
 * after each step. axe-core on each view.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../helpers/dnsmasq.js';
import type { TxtRecords } from '../helpers/dnsmasq.js';
import { recheckDomains } from '../../sidecar/publishing/recheck.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo, textOnceMatches } from './browser.js';
import { driver, expectNoProblems, sessionInBrowser } from './steps.js';

if (dnsmasqMissing()) {
  t.pass('skipped: dnsmasq is not installed (.ci/run installs it)', { skip: true });
} else {
  t.test('create an organisation, verify the publisher domain step by step, publish, lapse', async (t) => {
    const records: TxtRecords = {};
    const dns = await startDnsmasq(['example.org'], records);
    t.teardown(() => dns.close());
    const sc = await startSidecar({ cryptoWorkers: 0, dnsServers: [dns.address] });
    const b = await launch();
    t.teardown(async () => { await b.close(); await sc.close(); });
    const { page } = b;
    const { get, press, type, said } = driver(b, sc);
    const check = async (name: string): Promise<void> => {
      t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
      await screenshot(page, name);
    };

    // 1. Create the organisation; a blank name is refused with the API's code.
    await sessionInBrowser(b.context, sc, 'pia@example.com', 'Pia');
    await page.goto(`${sc.url}/console/organisations`);
    await page.getByRole('table', { name: 'Your workspaces' }).waitFor();
    await type('#org-name', '   ');
    await press('button:text-is("Create organisation")');
    const alert = page.locator('#main [role=alert]');
    await alert.waitFor();
    t.match(await alert.innerText(), /^body\.name .*\(invalid_request\)$/, 'a blank name: the API\'s message and code');
    await type('#org-name', 'Travel Co');
    await page.keyboard.press('Enter');
    await said('Created Travel Co; you are its owner. You still act in Personal.');
    t.match(await focusedOnceOn(page, 'button:text-is("Switch to Travel Co now")'), /Switch to Travel Co now/,
      'the focus is on the offer to switch');
    const ws = await get('/v1/service/workspaces');
    const org = ws.workspaces.find((w: { name: string }) => w.name === 'Travel Co');
    t.match(org, { kind: 'organization', role: 'owner' }, 'the API lists the organisation, the person its owner');
    t.equal((await get('/v1/auth/session')).workspace.kind, 'personal', 'creating does not switch');
    await page.locator('tr[data-workspace="Travel Co"] button').waitFor();
    await check('organisations-created');
    await page.keyboard.press('Enter');
    await page.waitForURL((u) => u.pathname === '/console/');
    t.match((await get('/v1/auth/session')).workspace,
      { workspace_id: org.workspace_id, kind: 'organization', role: 'owner' },
      'the session acts in the organisation');
    t.equal(await page.locator('#workspace').inputValue(), org.workspace_id, 'the header\'s switcher says so');

    // 2. The publisher domain, step by step.
    await press('nav a[href="/console/platform"]');
    await page.getByRole('heading', { level: 1, name: 'Platforms' }).waitFor();
    const current = (): Promise<string> => page.locator('.domain-steps > li[aria-current] h3').innerText();
    await page.getByText('No domain claimed.').waitFor();
    t.equal(await current(), 'Claim a domain', 'step 1 is current');
    const panelAlert = page.locator('section[aria-labelledby="domain-title"] [role=alert]');
    await type('#domain-name', 'localhost');
    await page.keyboard.press('Enter');
    await panelAlert.waitFor();
    t.equal(await panelAlert.innerText(), 'Not a domain an organisation can claim. (invalid_domain)');
    await type('#domain-name', 'travel.example.org');
    await page.keyboard.press('Enter');
    await said('Claimed travel.example.org. Publish the TXT record below, then verify.');
    const claim = await get('/v1/service/organization/domain');
    t.match(claim, { domain: 'travel.example.org', state: 'unverified', verified_at: null });
    t.equal(await page.locator('#record-name').inputValue(), '_agent-authz.travel.example.org',
      'the record name shown');
    t.equal(await page.locator('#record-text').inputValue(), claim.record_text, 'the record text shown');
    t.equal(await current(), 'Verify', 'step 3 is current');
    await press('button:text-is("Verify now")');
    await panelAlert.waitFor();
    t.equal(await panelAlert.innerText(), 'The TXT record that proves the domain was not found. '
      + 'No TXT record was found at '
      + '_agent-authz.travel.example.org. Publish it, wait for DNS, then verify again. (domain_not_verified)',
    'no record: what the DNS said, what to do, and the code');
    t.match(await get('/v1/service/organization/domain'), { state: 'unverified', last_outcome: 'absent' });
    await check('publishing-domain-claimed');

    records[claim.record_name] = [['v=spf1 -all']];
    await dns.setRecords(records);
    await press('button:text-is("Verify now")');
    await page.getByRole('alert').getByText(/has TXT records, but none is the one above/).waitFor();
    t.equal(await panelAlert.innerText(), 'The TXT record that proves the domain was not found. '
      + '_agent-authz.travel.example.org has TXT records, but none is the one above. Check the text, then verify again. (domain_not_verified)',
      'another record at the name: mismatch, said so');
    t.match(await get('/v1/service/organization/domain'), { state: 'unverified', last_outcome: 'mismatch' });

    records[claim.record_name] = [['v=spf1 -all'], [claim.record_text]];
    await dns.setRecords(records);
    await press('button:text-is("Verify now")');
    await said('travel.example.org is verified.');
    const verified = await get('/v1/service/organization/domain');
    t.match(verified, { state: 'verified', last_outcome: 'verified', lapsed_at: null });
    await page.locator('[data-domain-state="verified"]').waitFor();
    t.match(await page.locator('[data-domain-state]').innerText(), /^verified Verified on .+; last checked .+\.$/);
    t.equal(await current(), 'State', 'the last step is current');
    t.equal(await panelAlert.count(), 0, 'the earlier error is gone');

    // 3. Two platforms registered from the page; what publishing needs.
    const register = async (name: string, o: { description?: string; callback?: string }): Promise<void> => {
      await type('#p-name', name);
      await tabTo(page, 'input[value="data:read"]');
      await page.keyboard.press('Space');
      if (o.description) await type('#p-description', o.description);
      if (o.callback) await type('#p-callback', o.callback);
      await press('button:text-is("Register platform")');
      await page.getByRole('region', { name: `Platform “${name}” registered — its secrets` }).waitFor();
      await press('button:text-is("I have saved them — hide")');
      await page.locator(`article[data-platform="${name}"]`).waitFor();
    };
    await register('Trip Planner', { description: 'Plans trips.' });
    await register('Bare Bot', { callback: 'http://127.0.0.1:9/hook' });
    const card = (name: string) => page.locator(`article[data-platform="${name}"]`);
    const needs = (name: string): Promise<string[]> => card(name).locator('.checklist li').allTextContents();
    t.same(await needs('Trip Planner'), ['✓ a verified publisher domain: done', '✗ a callback address: missing',
      '✓ a description: done'], 'what publishing Trip Planner needs');
    t.equal(await card('Trip Planner').locator('[data-refusal]').innerText(),
      'Cannot publish yet: Publishing needs a callback URL.');
    t.ok(await card('Trip Planner').locator('button:has-text("Publish")').isDisabled(), 'Publish is disabled');
    t.equal(await card('Trip Planner').locator('button:has-text("Publish")').getAttribute('aria-describedby'),
      await card('Trip Planner').locator('[data-refusal]').getAttribute('id'), 'and says why');
    t.match(await card('Bare Bot').locator('[data-refusal]').innerText(),
      /^Cannot publish yet: Publishing needs a description\./);
    type P = { name: string; platform_id: string; publish_state: string };
    const platforms = (await get('/v1/service/platforms')).platforms as P[];
    t.same(platforms.map((p) => [p.name, p.publish_state]).sort(), [['Bare Bot', 'draft'], ['Trip Planner', 'draft']],
      'the API has both, drafts');
    await check('publishing-platforms');

    // 4. A callback, then publish; the directory lists it.
    const trip = platforms.find((p) => p.name === 'Trip Planner')!;
    await type(`#cb-${trip.platform_id}`, 'http://127.0.0.1:9/hook');
    await page.keyboard.press('Enter');
    await said('Callback address of Trip Planner saved.');
    await card('Trip Planner').locator('[data-refusal]').waitFor({ state: 'detached' });
    await press('article[data-platform="Trip Planner"] button.primary:has-text("Publish")');
    await said('Trip Planner is published: it is in the directory.');
    t.equal((await get(`/v1/service/platforms/${trip.platform_id}`)).publish_state, 'published');
    t.match((await get('/v1/service/directory')).platforms, [{ name: 'Trip Planner',
      publisher: { name: 'Travel Co', verified_domain: 'travel.example.org' } }], 'in the directory');
    await card('Trip Planner').locator('button:has-text("Unpublish")').waitFor();

    // 5. The record goes; the re-check lapses the claim. The stale page's Unpublish is refused with the code.
    await dns.setRecords({});
    t.same([...(await recheckDomains(sc.app.ctx, sc.clock.now() + 25 * 3600_000))], [[org.workspace_id, 'lapsed']]);
    await press('article[data-platform="Trip Planner"] button:has-text("Unpublish")');
    const cardAlert = card('Trip Planner').locator('[role=alert]');
    await cardAlert.waitFor();
    t.equal(await cardAlert.innerText(),
      'The platform cannot make this move from its publish state. (publish_state_invalid)',
      'a move the API refuses: its message and code');
    await page.reload();
    await page.locator('[data-domain-state="lapsed"]').waitFor();
    t.match(await page.locator('[data-domain-state]').innerText(),
      /^lapsed Lapsed on .+ \(verified on .+\): the last check found no record\. Your platforms were unpublished;/);
    t.match(await get('/v1/service/organization/domain'), { state: 'lapsed', last_outcome: 'absent' });
    t.equal((await get(`/v1/service/platforms/${trip.platform_id}`)).publish_state, 'unpublished');
    t.match(await textOnceMatches(card('Trip Planner').locator('h3'), /unpublished$/), /unpublished$/);
    t.equal(await card('Trip Planner').locator('[data-refusal]').innerText(),
      'Cannot publish yet: Publishing needs a verified publisher domain.');
    t.same((await get('/v1/service/directory')).platforms, [], 'gone from the directory');
    await check('publishing-lapsed');

    // 6. Back to the personal workspace from the Organisations page.
    await press('nav a[href="/console/organisations"]');
    const acting = page.locator('tr[data-workspace="Travel Co"] td').last();
    await acting.waitFor();
    t.equal(await acting.innerText(), 'acting here', 'the workspace the session acts in');
    t.equal(await page.locator('tr[data-workspace="Personal"] button').textContent(), 'Switch to Personal');
    await press('tr[data-workspace="Personal"] button');
    await page.waitForURL((u) => u.pathname === '/console/');
    t.match((await get('/v1/auth/session')).workspace, { kind: 'personal', role: 'owner' }, 'switched back');
    expectNoProblems(t, b);
  });
}

