/**
 * The audit view's "Why?" in Debian's Chromium against a real sidecar, with
 * the keyboard alone: three real verify decisions (an allow under a budget, a
 * deny by the amount limit, a deny of a scope not delegated), each audit
 * event's "Why?" button opens the explanation the sidecar stored
 * (GET /v1/service/decisions/personal/{decision_id}) in a row below it: the
 * decision and reason, the stage, the scope asked and granted, each
 * constraint with the request's value and its limit, the approval, the
 * budget counters and, for a deny, what would have allowed it — and never a
 * secret of the platform. Errors in the console's style: an explanation that
 * is not stored (its row deleted from the real database, as when its write
 * failed) is `decision_not_found`; the browser offline is the network error,
 * and "Try again" reads it once back online. axe-core on each view.
 */
import path from 'node:path';
import t from 'tap';
import Database from 'better-sqlite3';
import { startSidecar } from '../helpers/sidecar.js';
import { DB_FILE_NAME } from '../../sidecar/store/index.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo } from './browser.js';
import { apiClient, expectNoProblems, proofFor, sessionInBrowser, verify } from './steps.js';

type Answer = { decision: string; decision_reason: string; decision_id: string };

t.test('audit: "Why?" opens the explanation of each decision — keyboard only', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const b = await launch();
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page } = b;

  const call = await sessionInBrowser(b.context, sc, 'grace@example.com', 'Grace');
  const reg = await call('/v1/service/platforms/personal', { name: 'Shop API', surface_type: 'agentic_api',
    default_allowed_scopes: ['data:read', 'data:write', 'payments:send'] });
  const platform = apiClient(sc.url, reg.api_key);
  const agent = await platform.post(`/v1/service/connections/${reg.connection_id}/agents`,
    { name: 'till-bot', agent_type: 'api_agent' });
  const request = await call('/v1/service/delegations/self-request',
    { connection_id: reg.connection_id, agent_id: agent.body.agent_id });
  const cert = await call(`/v1/service/delegations/requests/${request.request_id}/approve`, {
    approved_scope: ['data:read', 'payments:send'],
    constraints: { max_amount: { amount: '50.00', currency: 'USD' }, methods: ['POST'],
      budget: { amount: '200.00', currency: 'USD', period: 'day' } },
  });
  const flow = { user: platform, platform, reg, agentId: agent.body.agent_id as string, requestId: request.request_id,
    certId: cert.cert_id };
  const decide = async (scope: string, amount: string): Promise<Answer> => {
    const context = { method: 'POST', path: '/pay', amount, currency: 'USD' };
    const a = await verify(platform, await proofFor(flow), scope, context) as Answer;
    sc.clock.advance(1000);
    return a;
  };
  const allow = await decide('payments:send', '20.00');
  const overLimit = await decide('payments:send', '75.00');
  const notDelegated = await decide('data:write', '1.00');
  t.match(allow, { decision: 'allow', decision_reason: 'authorized' }, 'a real allow');
  t.match(overLimit, { decision: 'deny', decision_reason: 'constraint_denied', constraint: 'max_amount' },
    'a real deny by the amount limit');
  t.match(notDelegated, { decision: 'deny', decision_reason: 'not_delegated' }, 'a real deny of a scope not delegated');
  // The explanation is written right after the answer (group-committed): wait until the API has all three.
  for (const a of [allow, overLimit, notDelegated]) {
    const deadline = Date.now() + 5000;
    while ((await b.context.request.get(`${sc.url}/v1/service/decisions/personal/${a.decision_id}`)).status() !== 200) {
      if (Date.now() > deadline) throw new Error(`no explanation of ${a.decision_id}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  await page.goto(`${sc.url}/console/audit`);
  await page.getByRole('heading', { level: 1, name: 'Audit' }).waitFor();
  await page.locator(`#ev-${notDelegated.decision_id}`).waitFor();
  // The live updates off (with the keyboard), so the offline step below concerns only the explanation.
  await tabTo(page, 'form[aria-label="Audit filters"] input[type="checkbox"]');
  await page.keyboard.press('Space');
  t.equal(await page.getByRole('button', { name: 'Why?', exact: true }).count(), 3,
    'a "Why?" on each of the three decision events');
  t.equal(await page.locator('table.audit > tbody > tr').count(), 8,
    'three presents and three decisions, after the registration\'s two administrative events');
  for (const a of [allow, overLimit, notDelegated]) {
    t.equal(await page.locator(`#ev-${a.decision_id}`).count(), 1,
      'the decision event\'s row: its event id is the decision id');
  }

  const why = (id: string): string => `#ev-${id} button:text-is("Why?")`;
  const panel = (id: string) => page.locator(`#why-row-${id}`);
  /** Tabs to a decision's "Why?" and presses Enter; the explanation's text once it is read. */
  const open = async (id: string, wait = 'Why this decision'): Promise<string> => {
    await tabTo(page, why(id));
    await page.keyboard.press('Enter');
    await panel(id).getByText(wait).first().waitFor();
    return (await panel(id).innerText()).replace(/\s+/g, ' ');
  };
  const close = async (id: string): Promise<void> => {
    await tabTo(page, why(id), { back: true });
    await page.keyboard.press('Enter');
    await panel(id).waitFor({ state: 'detached' });
  };
  const secrets = [reg.api_key, reg.signing_secret, reg.webhook_signing_secret] as string[];

  await t.test('a deny by the amount limit: reason, constraint, value and limit, what would allow it', async (t) => {
    const text = await open(overLimit.decision_id, 'What would have allowed it');
    t.equal(await page.locator(why(overLimit.decision_id)).getAttribute('aria-expanded'), 'true',
      'the button says it is expanded');
    t.match(await focusedOnceOn(page, why(overLimit.decision_id)), /^button "Why\?"/, 'the focus stays on the button');
    t.match(text, /Decision deny constraint_denied \(Amount limit\) — A constraint of the certificate does not hold, /,
      'decision and reason');
    t.match(text, /or its context is missing\. Decided by/, 'the reason\'s meaning in plain words (no API member names)');
    t.match(text, /Decided by the delegation check/, 'the stage');
    t.match(text, /Scope asked payments:send — delegated/, 'the scope asked');
    t.match(text, /Scopes granted data:read, payments:send/, 'the scopes granted');
    t.match(text, /Request method POST, path \/pay, amount 75\.00, currency USD/, 'the request\'s context');
    const rows = await panel(overLimit.decision_id).locator('table').first().locator('tbody tr').allInnerTexts();
    t.same(rows.map((r) => r.replace(/\s+/g, ' ').trim()), [
      'Amount limit decided payments of at most 50.00 USD per request amount 75.00, currency USD does not hold',
      'HTTP methods methods POST method POST holds',
    ], 'each constraint with the request\'s value, its limit and whether it holds');
    t.match(text, /The certificate asks for no approval\./, 'the approval');
    t.match(text, /Budget and calls Not read: the decision was made before the budget and rate limits are checked\./,
      'the budget: not read, since the amount limit decided first');
    t.same(await panel(overLimit.decision_id).locator('ul.would-allow li').allInnerTexts(),
      ['Raise the certificate\'s amount limit to 75.00 USD.'], 'would allow: the amount limit raised to the amount');
    for (const s of secrets) t.notOk(text.includes(s), 'no secret of the platform');
    t.same(await axeViolations(page), [], 'explanation open: no serious or critical accessibility violation');
    await screenshot(page, 'audit-why-deny');
    await close(overLimit.decision_id);
    t.equal(await page.locator(why(overLimit.decision_id)).getAttribute('aria-expanded'), 'false', 'closed again');
  });

  await t.test('an allow: the counters, no "would allow"', async (t) => {
    const text = await open(allow.decision_id, 'Budget and calls, as read before this call');
    t.match(text, /Decision allow authorized — The certificate is active/, 'decision and reason');
    t.match(text, /Budget 0\.00 USD 20\.00 USD 200\.00 USD/, 'the budget: used before, this call, limit');
    t.match(text, /Amount limit payments of at most 50\.00 USD per request amount 20\.00, currency USD holds/);
    t.notMatch(text, /would have allowed/, 'nothing to suggest for an allow');
    t.same(await axeViolations(page), [], 'allow explained: no serious or critical accessibility violation');
    await close(allow.decision_id);
  });

  await t.test('a scope not delegated: would allow delegating it', async (t) => {
    const text = await open(notDelegated.decision_id, 'What would have allowed it');
    t.match(text, /Decision deny not_delegated — The required scope is not in the certificate's approved scopes\./);
    t.match(text, /Scope asked data:write — not delegated/);
    t.same(await panel(notDelegated.decision_id).locator('ul.would-allow li').allInnerTexts(),
      ['Delegate data:write to this agent: approve a request that includes it.']);
    await close(notDelegated.decision_id);
  });

  await t.test('errors: decision_not_found, the network, "Try again"', async (t) => {
    // The explanation's write failing is logged, not refused (docs/authzen.md): its row is then missing.
    const db = new Database(path.join(sc.dataDir, DB_FILE_NAME));
    t.equal(db.prepare('DELETE FROM decision_explanations WHERE id = ?').run(allow.decision_id).changes, 1,
      'the stored row deleted');
    db.close();
    await open(allow.decision_id, 'Try again');
    t.equal(await panel(allow.decision_id).getByRole('alert').innerText(),
      `${await notFoundMessage()} (decision_not_found)`, 'the API\'s message and code, in the console\'s error style');
    t.match(await panel(allow.decision_id).innerText(), /no explanation of this decision stored/,
      'and what that means');
    t.same(await axeViolations(page), [], 'an error shown: no serious or critical accessibility violation');
    await close(allow.decision_id);

    await b.context.setOffline(true);
    await open(notDelegated.decision_id, 'Try again');
    t.equal(await panel(notDelegated.decision_id).getByRole('alert').innerText(),
      'The sidecar could not be reached. Check the connection and try again.', 'the network error');
    await b.context.setOffline(false);
    await tabTo(page, `#why-row-${notDelegated.decision_id} button:text-is("Try again")`);
    await page.keyboard.press('Enter');
    await panel(notDelegated.decision_id).getByText('What would have allowed it').waitFor();
    t.equal(await panel(notDelegated.decision_id).getByRole('alert').count(), 0,
      'read once back online: the error is gone');
  });

  /** The API's own message of a decision that is not found (the page must show it as the API says it). */
  async function notFoundMessage(): Promise<string> {
    const r = await b.context.request.get(`${sc.url}/v1/service/decisions/personal/${allow.decision_id}`);
    t.equal(r.status(), 404);
    const e = (await r.json() as { error: { code: string; message: string } }).error;
    t.equal(e.code, 'decision_not_found');
    return e.message;
  }

  expectNoProblems(t, b);
});
