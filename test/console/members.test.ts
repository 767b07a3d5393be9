/**
 * Organisations in the console (issue 32), in Debian's Chromium against a
 * real sidecar, with the keyboard, in two browser contexts: the owner switches
 * to the organisation with the header's switcher, invites a person by e-mail
 * as approver on the Members page; the invited person, in another browser,
 * sees the invitation, accepts it, switches, and sees the members — without
 * the controls an approver may not use; the owner changes their role and
 * removes them, and their session in the organisation ends. axe-core on each
 * view.
 */
import t from 'tap';
import type { Page } from 'playwright-core';
import { startSidecar } from '../helpers/sidecar.js';
import { axeViolations, launch, screenshot, tabTo } from './browser.js';
import { expectNoProblems, sessionInBrowser } from './steps.js';

/** Chooses `name` in the header's switcher by typing, and switches. */
async function switchTo(page: Page, name: string): Promise<void> {
  await tabTo(page, '#workspace');
  await page.keyboard.type(name);
  await tabTo(page, 'form.workspace button');
  await page.keyboard.press('Enter');
  await page.waitForURL((u) => u.pathname === '/console/');
}

t.test('invite, accept in another browser, switch, members; change the role, remove — keyboard only', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const owner = await launch();
  const guest = await launch();
  t.teardown(async () => { await owner.close(); await guest.close(); await sc.close(); });
  const said = (page: Page, text: string | RegExp): Promise<void> => page.getByRole('status').getByText(text).waitFor();
  const check = async (page: Page, name: string): Promise<void> => {
    t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };
  const members = async (page: Page): Promise<void> => {
    await tabTo(page, 'nav a[href="/console/members"]');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
  };

  // The owner creates the organisation (the session stays personal) and switches to it.
  const call = await sessionInBrowser(owner.context, sc, 'olga@example.com', 'Olga');
  const org = await call('/v1/service/organizations', { name: 'Acme' });
  const op = owner.page;
  await op.goto(`${sc.url}/console/members`);
  await op.getByText('This is your personal workspace').waitFor();
  await switchTo(op, 'Acme');
  const session = await (await owner.context.request.get(`${sc.url}/v1/auth/session`)).json();
  t.match(session.workspace, { workspace_id: org.organization_id, kind: 'organization', name: 'Acme', role: 'owner' },
    'the session acts in the organisation');
  await members(op);
  await op.getByRole('table', { name: 'Members' }).waitFor();
  t.match(await op.locator('#main p').first().innerText(), /^Members of Acme; your role is owner\.$/);

  // Invite the guest as approver.
  await tabTo(op, '#invite-email');
  await op.keyboard.type('ivan@example.com');
  await tabTo(op, '#invite-role');
  await op.keyboard.type('approver');
  await tabTo(op, 'form button:text-is("Invite")');
  await op.keyboard.press('Enter');
  await said(op, 'Invited ivan@example.com as approver. The invitation is pending for 7 days.');
  const pending = op.getByRole('table', { name: 'Pending invitations' });
  await pending.waitFor();
  t.match(await pending.locator('tbody tr').innerText(), /^ivan@example\.com\tapprover\t/);
  // A second invitation, revoked.
  await tabTo(op, '#invite-email');
  await op.keyboard.type('zoe@example.com');
  await tabTo(op, 'form button:text-is("Invite")');
  await op.keyboard.press('Enter');
  await said(op, 'Invited zoe@example.com as approver. The invitation is pending for 7 days.');
  await pending.locator('tbody tr', { hasText: 'zoe@example.com' }).waitFor();
  await tabTo(op, 'tr:has-text("zoe@example.com") button.danger');
  await op.keyboard.press('Enter');
  await said(op, 'Revoked the invitation of zoe@example.com.');
  await pending.locator('tbody tr', { hasText: 'zoe@example.com' }).waitFor({ state: 'detached' });
  const invitations = await (await owner.context.request.get(`${sc.url}/v1/service/organization/invitations`)).json();
  t.match(invitations.invitations.find((i: { email: string }) => i.email === 'zoe@example.com'), { state: 'revoked' });
  await check(op, 'members-owner');

  // The guest, in another browser: the invitation, accepted; the switcher then offers Acme.
  await sessionInBrowser(guest.context, sc, 'ivan@example.com', 'Ivan');
  const gp = guest.page;
  await gp.goto(`${sc.url}/console/members`);
  const mine = gp.getByRole('table', { name: 'Invitations to you' });
  await mine.waitFor();
  t.match(await mine.locator('tbody tr').innerText(), /^Acme\tapprover\t/);
  t.equal(await gp.locator('#workspace').count(), 0, 'one workspace: no switcher');
  await check(gp, 'members-invitation');
  await tabTo(gp, 'table button.primary');
  await gp.keyboard.press('Enter');
  await said(gp, 'You joined Acme as approver. Switch to it with the workspace switcher at the top.');
  await gp.getByText('No invitation is waiting for you.').waitFor();
  await switchTo(gp, 'Acme');
  await gp.getByRole('heading', { level: 2, name: 'Certificates in force' }).waitFor();
  t.equal(await gp.locator('#main [role=alert]').count(), 0, 'the overview opens for an approver, without usage');
  t.equal(await gp.getByRole('heading', { level: 2, name: 'Credits' }).count(), 0);
  await members(gp);
  const list = gp.getByRole('table', { name: 'Members' });
  await list.waitFor();
  t.same(await list.locator('tbody tr').evaluateAll((rows) =>
    rows.map((r) => (r as unknown as { innerText: string }).innerText.split('\t').slice(0, 3))),
    [['olga@example.com', 'Olga Tester', 'owner'], ['ivan@example.com', 'Ivan Tester', 'approver']],
    'owners first, then by e-mail');
  t.match(await gp.locator('#main p').first().innerText(),
    /your role is approver\. Only an owner invites, removes members and changes roles\.$/);
  t.equal(await gp.locator('#invite-email, #main select, td.actions').count(), 0,
    'an approver is offered no member controls');
  t.equal(await gp.getByRole('heading', { name: 'Pending invitations' }).count(), 0, 'nor the invitations');
  t.same(await gp.locator('nav a').allInnerTexts(),
    ['Overview', 'Requests', 'Approvals', 'Certificates', 'Agents', 'Platform', 'Connections', 'Directory', 'Members',
      'Organisations'],
    'no Audit, Usage or Webhooks for a role without audit_read');
  await check(gp, 'members-approver');

  // The owner changes the guest's role, then removes them.
  await op.reload();
  await op.getByRole('table', { name: 'Members' }).waitFor();
  const row = op.locator('tr[data-member="ivan@example.com"]');
  await tabTo(op, 'tr[data-member="ivan@example.com"] select');
  await op.keyboard.type('auditor');
  await tabTo(op, 'tr[data-member="ivan@example.com"] button:not(.danger)');
  await op.keyboard.press('Enter');
  await said(op, 'ivan@example.com is now auditor.');
  const read = await (await owner.context.request.get(`${sc.url}/v1/service/organization/members`)).json();
  t.match(read.members.find((m: { email: string }) => m.email === 'ivan@example.com'), { role: 'auditor' },
    'the API says auditor');
  await gp.reload();
  await gp.getByText(/your role is auditor\./).waitFor();

  await tabTo(op, 'tr[data-member="ivan@example.com"] button.danger');
  await op.keyboard.press('Enter');
  const dialog = op.getByRole('dialog', { name: 'Remove this member?' });
  await dialog.waitFor();
  await check(op, 'members-remove');
  await tabTo(op, 'dialog button:text-is("Remove member")');
  await op.keyboard.press('Enter');
  await said(op, 'Removed ivan@example.com. Their sessions in this organisation have ended.');
  await row.waitFor({ state: 'detached' });
  t.equal(await op.locator('#main tbody tr').count(), 1, 'the owner alone');
  const after = await guest.context.request.get(`${sc.url}/v1/service/organization/members`);
  t.equal(after.status(), 401, 'the removed person\'s session in the organisation has ended');
  t.equal((await after.json()).error.code, 'auth_required');

  expectNoProblems(t, owner);
  expectNoProblems(t, guest);
});
