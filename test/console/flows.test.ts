/**
 * The console's main flows in a real browser (Debian's Chromium through
 * playwright-core) against a real sidecar with a real SMTP sink and a real
 * webhook receiver, driven with the keyboard alone: sign-in (a wrong code
 * first, then the code read from the e-mail), onboarding, registering the
 * platform and reading its secrets once, approving a request with a scope
 * subset and constraints, revoking, and finding the resulting decisions in
 * the audit view (a decision filter chosen with the keyboard, a decision that
 * arrives while it is open), the usage chart (an SVG with the day's bars),
 * the agents (no certificate in force after the revocation) and webhooks.
 * Every page passes axe-core with no serious or critical violation and is
 * screenshotted (browser.ts, SHOTS). The session part (refresh, expiry and
 * return, CSRF failure) is in session.test.ts; the audit view's other filters
 * and pagination in audit.test.ts; deny and the other constraints in
 * requests.test.ts; key rotation in platform.test.ts.
 */
import http from 'node:http';
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import type { Client, Flow } from '../helpers/sidecar.js';
import { validateConstraints } from '../../src/constraints.js';
import { AUDIT_POLL_MS } from '../../console/src/constants.js';
import { axeViolations, launch, screenshot, tabTo } from './browser.js';
import { apiClient, expectNoProblems, proofFor, signIn, verify } from './steps.js';

// Browser globals used inside page.evaluate callbacks (module-scoped: the root program has no DOM types).
declare const document: { querySelectorAll(s: string): { length: number } & Iterable<{ value: string }>; cookie: string; body: { innerText: string } };
declare const navigator: { clipboard: { readText(): Promise<string> } };
declare const localStorage: { length: number } & Record<string, unknown>;
declare const sessionStorage: { length: number } & Record<string, unknown>;

t.test('sign in, onboard, register, approve, revoke, audit — keyboard only', async (t) => {
  const hooks: string[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => { hooks.push(body); res.writeHead(200).end('ok'); });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  // The default Secure cookies (as `npm start` sets them): browsers accept them from http://127.0.0.1.
  const sc = await startSidecar({ cryptoWorkers: 0, insecureCookies: false }, { webhook: { pollIntervalMs: 200 } });
  const b = await launch({ clock: true });
  t.teardown(async () => {
    await b.close();
    await sc.close();
    await new Promise<void>((r) => receiver.close(() => r()));
  });
  const { page } = b;
  await b.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: sc.url });
  const check = async (name: string): Promise<void> => {
    t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };
  const axe = async (name: string): Promise<void> => { t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`); };
  /** Where the page holds `text`: the form fields whose value it is, plus its occurrences in the page's text. */
  const onPage = (text: string): Promise<number> => page.evaluate((k) => [...document.querySelectorAll('input, textarea')].filter((i) => i.value === k).length
    + document.body.innerText.split(k).length - 1, text);
  const go = async (label: string, path: string): Promise<void> => {
    await tabTo(page, `nav a[href="/console${path}"]`);
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/console${path}`);
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  };

  // Sign-in: a wrong code says how many tries are left; the right one (from the e-mail) signs in.
  const email = 'ada@example.com';
  await page.goto(`${sc.url}/console/`);
  await page.waitForURL(/\/console\/sign-in\?next=%2F$/);
  await page.getByRole('heading', { name: 'Sign in to agent-authz' }).waitFor();
  t.pass('an anonymous visit goes to sign-in');
  await check('sign-in');
  await signIn(page, sc, email, { wrongFirst: true, t, shot: () => check('sign-in-wrong-code') });

  // Onboarding: profile, then account type.
  await page.getByRole('heading', { name: /Welcome/ }).waitFor();
  await check('onboarding');
  await tabTo(page, '#first');
  await page.keyboard.type('Ada');
  await page.keyboard.press('Tab');
  await page.keyboard.type('Lovelace');
  await page.keyboard.press('Enter');
  await page.getByRole('radio', { name: /Individual/ }).waitFor();
  await axe('onboarding, account type');
  await tabTo(page, 'button[type=submit]');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Hello, Ada' }).waitFor();
  await page.getByText('You have no platform yet').waitFor();
  await check('overview');

  // Register the platform; its three secrets are shown once, with copy buttons and a warning.
  await go('Platform', '/platform');
  await page.getByRole('heading', { name: 'Register your platform' }).waitFor();
  await check('platform-register');
  await tabTo(page, '#p-name');
  await page.keyboard.type('Orders API');
  for (const s of ['data:read', 'data:write', 'payments:send']) {
    await tabTo(page, `#main input[value="${s}"]`);
    await page.keyboard.press('Space');
  }
  await tabTo(page, '#p-callback');
  await page.keyboard.type(`http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`);
  await page.keyboard.press('Enter');
  const secrets = page.getByRole('region', { name: /registered — its secrets/ });
  await secrets.waitFor();
  t.match(await secrets.textContent(), /shown only this once/, 'a plain warning');
  const apiKey = await page.inputValue('#secret-api-key');
  t.match(apiKey, /^aak_[0-9a-f]{12}_[\w-]{43}$/);
  t.match(await page.inputValue('#secret-signing'), /^ss_[\w-]{43}$/);
  t.match(await page.inputValue('#secret-webhook'), /^whsec_[\w-]{43}$/);
  await tabTo(page, 'button:text-is("Copy API key")');
  await page.keyboard.press('Enter');
  await page.getByText('Copied.').waitFor();
  t.equal(await page.evaluate(() => navigator.clipboard.readText()), apiKey, 'the copy button copies the key');
  await check('platform-secrets');
  const storage = await page.evaluate(() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage), document.cookie]));
  t.notMatch(storage, /aak_|ss_|whsec_/, 'no secret in localStorage, sessionStorage or a readable cookie');
  t.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0, 'web storage is not used at all');
  await tabTo(page, 'button:text-is("I have saved them — hide")');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Webhook callback address' }).waitFor();
  t.equal(await onPage(apiKey), 0, 'hidden: the key is gone from the page');
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Platform' }).waitFor();
  t.equal(await onPage(apiKey), 0, 'and not shown again after a reload');
  await check('platform');

  // The platform creates its agent with the key read from the page.
  const platform: Client = apiClient(sc.url, apiKey);
  const connectionId = (await page.locator('dt:text-is("Connection id") + dd').textContent())!.trim();
  const agent = await platform.post(`/v1/service/connections/${connectionId}/agents`, { name: 'order-bot', agent_type: 'api_agent' });
  t.equal(agent.status, 200, 'the key from the page works');

  // Ask for a delegation and approve a subset with constraints.
  await go('Delegation requests', '/requests');
  await page.getByText('No requests yet.').waitFor();
  await axe('requests, none yet');
  await tabTo(page, 'button:text-is("Create request")');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Delegation request from order-bot' }).waitFor();
  const requestId = page.url().split('/').pop()!;
  await tabTo(page, 'input[value="data:read"]');
  await page.keyboard.press('Space');
  await tabTo(page, 'input[value="payments:send"]');
  await page.keyboard.press('Space');
  await tabTo(page, '#c-max_amount-amount');
  await page.keyboard.type('50.00');
  await tabTo(page, '#c-methods-GET');
  await page.keyboard.press('Space');
  await tabTo(page, '#c-path_prefixes');
  await page.keyboard.type('v1/orders');
  await tabTo(page, 'button:text-is("Approve selected scopes")');
  await page.keyboard.press('Enter');
  const apiMessage = `${validateConstraints({ max_amount: { amount: '50.00', currency: 'USD' }, methods: ['GET'], path_prefixes: ['v1/orders'] })}.`;
  await page.locator('#constraints-error').waitFor();
  t.equal(await page.locator('#constraints-error').textContent(), apiMessage, 'the API validator\'s own message');
  await check('request-review');
  await tabTo(page, '#c-path_prefixes', { back: true });
  await page.keyboard.press('Control+A');
  await page.keyboard.type('/v1/orders');
  await tabTo(page, 'button:text-is("Approve selected scopes")');
  await page.keyboard.press('Enter');
  const approved = page.getByText(/^Approved: certificate cert-/);
  await approved.waitFor();
  const certId = /certificate (cert-[0-9a-f-]{36})/.exec((await approved.textContent())!)![1]!;
  t.match(await approved.textContent(), /for data:read, payments:send; constraints: payments of at most 50.00 USD per request; methods GET; paths under \/v1\/orders/);

  // The certificate works as approved: within the constraints allow, outside them deny.
  const flow: Flow = { user: platform, platform, reg: { connection_id: connectionId }, agentId: agent.body.agent_id, requestId, certId };
  const proofs = [];
  for (let i = 0; i < 5; i++) proofs.push(await proofFor(flow));
  t.match(await verify(platform, proofs[0], 'data:read', { method: 'GET', path: '/v1/orders/7' }), { decision: 'allow' });
  t.match(await verify(platform, proofs[1], 'data:read', { method: 'POST', path: '/v1/orders/7' }), { decision: 'deny', decision_reason: 'constraint_denied', constraint: 'methods' });
  t.match(await verify(platform, proofs[2], 'data:write', { method: 'GET', path: '/v1/orders/7' }), { decision: 'deny', decision_reason: 'not_delegated' });

  // Revoke, confirmed with a reason.
  await go('Certificates', '/certificates');
  await page.getByRole('table', { name: 'Certificates in force' }).waitFor();
  await tabTo(page, 'button.danger');
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name: 'Revoke this certificate?' });
  await dialog.waitFor();
  await page.keyboard.press('Enter');
  await dialog.getByRole('alert').waitFor();
  t.match(await dialog.getByRole('alert').textContent(), /Give a reason/, 'a reason is required');
  await check('certificates-revoke');
  await tabTo(page, '#revoke-reason', { back: true });
  await page.keyboard.type('order-bot retired');
  await page.keyboard.press('Enter');
  await page.getByText(`Revoked ${certId}`).waitFor();
  await page.getByRole('table', { name: 'Revoked or expired certificates' }).getByText('order-bot retired').waitFor();
  await check('certificates');
  t.match(await verify(platform, proofs[3], 'data:read', { method: 'GET', path: '/v1/orders/7' }), { decision: 'deny', decision_reason: 'delegation_revoked' });

  // The decisions in the audit view; a filter; and a new event arriving while it is open.
  await go('Audit', '/audit');
  await page.locator('table.audit tbody tr').nth(6).waitFor();
  const rows = async (): Promise<string[]> => page.locator('table.audit tbody tr').allInnerTexts();
  t.equal((await rows()).filter((r) => /proof\.presented/.test(r)).length, 5, 'five presents');
  t.match((await rows()).join('\n'), /delegation_revoked[\s\S]*not_delegated[\s\S]*constraint_denied \(methods\)/, 'the denies, newest first');
  await check('audit');
  await tabTo(page, 'form[aria-label="Audit filters"] label:has-text("Decision") select');
  await page.keyboard.type('d');
  t.equal(await page.locator('form[aria-label="Audit filters"] label:has-text("Decision") select').inputValue(), 'deny', 'the decision filter, chosen with the keyboard');
  await tabTo(page, 'button:text-is("Apply filters")');
  await page.keyboard.press('Enter');
  await page.waitForURL(/decision=deny/);
  await page.waitForFunction(() => document.querySelectorAll('table.audit tbody tr').length === 3);
  t.notMatch((await rows()).join('\n'), /allow|presented/, 'only denies');
  t.match(await verify(platform, proofs[4], 'data:read', { method: 'GET', path: '/v1/orders/8' }), { decision: 'deny', decision_reason: 'delegation_revoked' });
  await page.clock.fastForward(AUDIT_POLL_MS + 100);
  await page.getByText('1 new event arrived.').waitFor();
  t.equal((await rows()).length, 4, 'the new decision arrived without a reload');
  t.equal(await page.locator('table.audit tbody tr.fresh').count(), 1, 'and is marked new');
  t.match(await page.locator('table.audit tbody tr').first().innerText(), /delegation_revoked/);
  t.match(String(await proofFor(flow).catch((e: Error) => e)), /no_active_delegation/, 'a revoked certificate presents no more proofs');

  await go('Usage', '/usage');
  await page.getByRole('table', { name: /Per day/ }).waitFor();
  t.match(await page.locator('table tbody tr').first().innerText(), /^\S+\t5\t1\t4\t\$9\.99$/, 'today: 5 calls, 1 allowed, 4 denied, $10 − 5 × $0.002');
  await check('usage');

  // The chart: a bar pair per day of the last 14, today's 1 allowed and 4 denied, and the credits line.
  const chart = page.getByRole('img', { name: 'Verify calls per day and credits' });
  t.equal(await chart.evaluate((e) => e.tagName.toLowerCase()), 'svg', 'the usage chart is an SVG');
  const bars = await chart.locator('g').evaluateAll((gs) => gs.map((g: any) => [...g.querySelectorAll('rect.bar')].map((r: any) => Number(r.getAttribute('height'))))); // eslint-disable-line @typescript-eslint/no-explicit-any
  t.equal(bars.length, 14, 'a bar pair for each of the 14 days');
  t.ok(bars.slice(0, 13).every(([a, d]) => a === 0 && d === 0), 'no calls on the 13 days before');
  const [allowH, denyH] = bars[13]!;
  t.ok(allowH! > 0 && Math.abs(denyH! / allowH! - 4) < 1e-9, `today: the denied bar is 4 times the allowed one (${allowH}, ${denyH})`);
  t.equal((await chart.locator('path.credits').getAttribute('d'))!.match(/[ML]/g)!.length, 14, 'the credits line has a point per day');

  await go('Agents', '/agents');
  await page.getByRole('cell', { name: 'custodial' }).waitFor();
  t.equal(await page.locator('tbody tr', { has: page.locator('th:text-is("order-bot")') }).locator('td').nth(3).innerText(), 'none',
    'order-bot\'s certificate was revoked: none in force');
  await check('agents');

  await go('Webhooks', '/webhooks');
  await page.locator('tbody tr').nth(2).waitFor();
  const events = await page.locator('tbody tr td:first-child').allInnerTexts();
  t.match(events, ['delegation.revoked', 'delegation.approved', 'connection.created'], 'the platform was told');
  await tabTo(page, 'button:has-text("Attempts")');
  await page.keyboard.press('Enter');
  await page.getByRole('table', { name: /Attempts of/ }).waitFor();
  await tabTo(page, 'button:has-text("Redeliver")');
  await page.keyboard.press('Enter');
  await page.getByText(/is queued again/).waitFor();
  await check('webhooks');
  for (let i = 0; i < 100 && !hooks.some((h) => h.includes('delegation.revoked')); i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(hooks.some((h) => h.includes('delegation.revoked')), 'the receiver got the revocation');

  expectNoProblems(t, b);
});
