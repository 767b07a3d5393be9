/**
 * Step-up approvals, budgets and rate limits in the console (issue 23's parts
 * of issue 24), in Debian's Chromium against a real sidecar, with the
 * keyboard: a certificate is approved in the console with an approval rule,
 * a budget and a rate limit (the API validator's message first); an agent's
 * verify above the threshold gets `approval_required`; the pending approval
 * appears on the open Approvals page without a reload (the page polls; the
 * test moves the page's clock), is approved, and the retried verify is
 * allowed exactly once; a second one is denied with a note (the text rule
 * checked in the page) and its verify is `approval_denied`; the certificates
 * page shows what the limits used and have left; deciding an approval that
 * expired meanwhile says so. axe-core on every new page; screenshots.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { validateConstraints } from '../../src/constraints.js';
import { TEXT_RULES } from '../../sidecar/http/resources.js';
import { APPROVALS_POLL_MS, NOTE_RULE } from '../../console/src/constants.js';
import { payment } from '../sidecar/approvals/helpers.js';
import { axeViolations, focused, launch, screenshot, tabTo } from './browser.js';
import { apiClient, expectNoProblems, proofFor, sessionInBrowser, verify } from './steps.js';

t.test('approval rule, budget and rate limit; approve, deny with a note, expired — keyboard only', async (t) => {
  t.same(NOTE_RULE, TEXT_RULES.reason, 'the page checks a note with the API\'s own text rule');
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const b = await launch({ clock: true });
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page } = b;
  const check = async (name: string): Promise<void> => {
    t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };
  const go = async (label: string, path: string): Promise<void> => {
    await tabTo(page, `nav a[href="/console${path}"]`);
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/console${path}`);
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  };

  // Sign-in and platform set-up through the browser's own cookies (sign-in itself is flows.test.ts's subject).
  const call = await sessionInBrowser(b.context, sc, 'joan@example.com', 'Joan');
  const reg = await call('/v1/service/platforms/personal', { name: 'Shop API', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'payments:send'] });
  const platform = apiClient(sc.url, reg.api_key);
  const agent = await platform.post(`/v1/service/connections/${reg.connection_id}/agents`, { name: 'order-bot', agent_type: 'api_agent' });
  t.equal(agent.status, 200);
  const request = await call('/v1/service/delegations/self-request', { connection_id: reg.connection_id });

  // Approve payments:send with an approval rule above 100.00 USD, a budget and a rate limit.
  await page.goto(`${sc.url}/console/requests/${request.request_id}`);
  await page.getByRole('heading', { level: 1, name: 'Delegation request from order-bot' }).waitFor();
  await tabTo(page, 'input[name=scope][value="payments:send"]');
  await page.keyboard.press('Space');
  await tabTo(page, '#c-budget-amount');
  await page.keyboard.type('500.00');
  await tabTo(page, '#c-max_calls-count');
  await page.keyboard.type('100');
  await tabTo(page, '#c-require_approval-above');
  await page.keyboard.type('100.00');
  await tabTo(page, 'button:text-is("Approve selected scopes")');
  await page.keyboard.press('Enter');
  await page.locator('#constraints-error').waitFor();
  const apiMessage = `${validateConstraints({ budget: { amount: '500.00', currency: 'USD', period: 'day' }, max_calls: { count: 100, period: 'hour' },
    require_approval: { scopes: [], above: { amount: '100.00', currency: 'USD' } } })}.`;
  t.equal(await page.locator('#constraints-error').textContent(), apiMessage, 'an approval rule without scopes: the API validator\'s message');
  await check('request-rules');
  await tabTo(page, 'input[id^="c-require_approval-scope-"][value="payments:send"]', { back: true });
  await page.keyboard.press('Space');
  await tabTo(page, 'button:text-is("Approve selected scopes")');
  await page.keyboard.press('Enter');
  const approved = page.getByText(/^Approved: certificate cert-/);
  await approved.waitFor();
  t.match(await approved.textContent(), 'constraints: at most 500.00 USD of payments per day (UTC); at most 100 calls per hour (UTC); '
    + 'your approval of each payments:send action above 100.00 USD;', 'approved with the rules, in plain words');
  const certId = /certificate (cert-[0-9a-f-]{36})/.exec((await approved.textContent())!)![1]!;
  const flow: Flow = { user: platform, platform, reg, agentId: agent.body.agent_id, requestId: request.request_id, certId };

  // The Approvals page, open while the agent acts.
  await go('Approvals', '/approvals');
  await page.getByText('Nothing is waiting for your approval.').waitFor();
  t.match(await verify(platform, await proofFor(flow), 'payments:send', payment('20.00').context), { decision: 'allow', decision_reason: 'authorized' },
    'below the threshold no approval is needed');
  const p120 = payment('120.00');
  const asked = await verify(platform, await proofFor(flow), 'payments:send', p120.context) as { decision: string; decision_reason: string; approval_id: string };
  t.match(asked, { decision: 'deny', decision_reason: 'approval_required', approval_id: /^[0-9a-f-]{36}$/ }, 'above it, the agent is told to wait');

  // It appears without a reload: the page polls (the test moves the page's clock to the next poll).
  await page.clock.fastForward(APPROVALS_POLL_MS + 100);
  const card = page.locator('article.approval');
  await card.waitFor();
  t.equal(await page.getByRole('status').filter({ hasText: 'arrived' }).textContent(), '1 new request for your approval arrived.');
  const text = await card.innerText();
  t.match(text, /^order-bot: Send a payment, 120\.00 USD/, 'the headline: who, what, how much');
  for (const fact of [/Amount\s+120\.00 USD/, /Action\s+POST \/v1\/payments/, /Scope\s+payments:send\s*sensitive/, /Agent\s+order-bot/, /Expires\s+\S+ \S+ \(in \d+ min\)/]) {
    t.match(text, fact, `shown in human terms: ${fact}`);
  }
  await check('approvals');
  await tabTo(page, 'article.approval button.approve');
  await page.keyboard.press('Enter');
  await page.getByText(/^Approved: payments:send 120\.00 USD: POST \/v1\/payments\. The agent may now do exactly this once, until /).waitFor();
  await page.getByText('Nothing is waiting for your approval.').waitFor();
  t.match(await focused(page), /^h2 "Waiting for you \(0\)"/, 'the focus goes to the list, not to the page\'s end');
  t.match(await page.locator('table.approvals tbody tr').first().innerText(), /granted\tpayments:send 120\.00 USD: POST \/v1\/payments\torder-bot/);

  // The retry is allowed exactly once.
  t.match(await verify(platform, await proofFor(flow), 'payments:send', p120.context), { decision: 'allow', decision_reason: 'authorized', approval_id: asked.approval_id },
    'the retry with a fresh proof is allowed');
  t.match(await verify(platform, await proofFor(flow), 'payments:send', p120.context), { decision: 'deny', decision_reason: 'approval_used' }, 'once');

  // A second one is denied with a note; the note's text rule is checked in the page first.
  const p250 = payment('250.00');
  const second = await verify(platform, await proofFor(flow), 'payments:send', p250.context) as { approval_id: string };
  await page.clock.fastForward(APPROVALS_POLL_MS + 100);
  await card.filter({ hasText: '250.00 USD' }).waitFor();
  await tabTo(page, 'article.approval button.deny');
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name: 'Deny this action?' });
  await dialog.waitFor();
  await tabTo(page, '#deny-note');
  await page.keyboard.type('Too much\u202E');
  await tabTo(page, 'dialog button:text-is("Deny action")');
  await page.keyboard.press('Enter');
  await dialog.getByRole('alert').waitFor();
  t.equal(await dialog.getByRole('alert').textContent(), 'The note contains a bidirectional override or isolate character.', 'the API\'s text rule, in the page');
  await tabTo(page, '#deny-note', { back: true });
  await page.keyboard.press('Control+A');
  await page.keyboard.type('Too much for one payment.');
  await check('approvals-deny');
  await tabTo(page, 'dialog button:text-is("Deny action")');
  await page.keyboard.press('Enter');
  await page.getByText(/^Denied: payments:send 250\.00 USD: POST \/v1\/payments\. The agent is refused this action \(approval_denied\) and sees your note\.$/).waitFor();
  await page.locator('table.approvals tbody tr', { hasText: 'Too much for one payment.' }).waitFor();
  t.match(await page.locator('table.approvals tbody tr').first().innerText(), /^denied\tpayments:send 250\.00 USD.*\tToo much for one payment\.$/);
  t.match(await verify(platform, await proofFor(flow), 'payments:send', p250.context), { decision: 'deny', decision_reason: 'approval_denied', approval_id: second.approval_id },
    'the verify after the denial: approval_denied');

  // What the limits used: 20.00 + 120.00 of the budget, two allowed calls.
  await go('Certificates', '/certificates');
  const used = page.getByRole('table', { name: 'Certificates in force' }).locator('tbody td').nth(4);
  await used.getByText('spent').waitFor();
  t.equal(await used.innerText(), '140.00 of 500.00 USD spent today (UTC); 360.00 left\n2 of 100 calls this hour (UTC); 98 left', 'spent and left in the window');
  await check('certificates-limits');

  // An approval that expires while the page shows it: deciding it says so.
  const late = await verify(platform, await proofFor(flow), 'payments:send', payment('300.00').context) as { approval_id: string };
  await go('Approvals', '/approvals');
  await card.filter({ hasText: '300.00 USD' }).waitFor();
  await tabTo(page, 'article.approval button.approve');
  // Hold the page's poll (its timers) while the server's time passes the expiry, so the card is
  // still there to be decided; then let it run again.
  // pauseAt refuses a time already past, and under load the page's clock can pass `now + 1`
  // before the call lands (a CI run did): aim 250 ms ahead, and try again (bounded) if it passed.
  for (let attempt = 1; ; attempt++) {
    try {
      await page.clock.pauseAt(await page.evaluate(() => Date.now() + 250));
      break;
    } catch (err) {
      if (attempt >= 5 || !/fast-forward to the past/.test(String(err))) throw err;
    }
  }
  sc.clock.advance(sc.config.approvalTtlSeconds * 1000 + 1000);
  await page.keyboard.press('Enter');
  const alert = page.locator('#main .error[role=alert]');
  await alert.waitFor();
  await page.clock.resume();
  t.equal(await alert.textContent(), 'This request can no longer be decided: it expired before it was decided; the agent has to ask again (approval_not_pending). '
    + 'The list below is up to date.', 'a clear error for an expired approval');
  await page.locator('table.approvals tbody tr', { hasText: '300.00 USD' }).waitFor();
  t.match(await page.locator('table.approvals tbody tr').first().innerText(), /^expired\tpayments:send 300\.00 USD/);
  await check('approvals-expired');
  t.match(await verify(platform, await proofFor(flow), 'payments:send', payment('300.00').context), { decision: 'deny', decision_reason: 'approval_expired', approval_id: late.approval_id });

  expectNoProblems(t, b);
});
