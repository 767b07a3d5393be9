/**
 * Delegation requests in Debian's Chromium against a real sidecar and a real
 * webhook receiver, with the keyboard alone: the list of requests; denying
 * one with a reason (a reason the API refuses first, shown as the API says
 * it), the state the page shows and the API's, and the platform told with
 * the reason; the constraints editor's client IPs, tenants and time window,
 * each invalid value first (the page's message is the API's own, compared
 * with the API's answer to the same input), then approved, with the
 * certificate's constraints read back from the API and enforced by verify;
 * the Agents page's certificate in force; and a self-request for the agent
 * chosen in the list's form. axe-core on each page; screenshots.
 */
import http from 'node:http';
import t from 'tap';
import type { Test } from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { validateConstraints } from '../../src/constraints.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo } from './browser.js';
import { apiClient, expectNoProblems, proofFor, sessionInBrowser, verify } from './steps.js';

t.test('requests: list, deny with a reason, IPs, tenants and time window, agents — keyboard only', async (t) => {
  const hooks: string[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => { hooks.push(body); res.writeHead(200).end('ok'); });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const sc = await startSidecar({ cryptoWorkers: 0 }, { webhook: { pollIntervalMs: 200 } });
  const b = await launch();
  t.teardown(async () => {
    await b.close();
    await sc.close();
    await new Promise<void>((r) => receiver.close(() => r()));
  });
  const { page } = b;
  const check = async (tt: Test, name: string): Promise<void> => {
    tt.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };
  /** A raw API call with the page's own cookies (the CSRF cookie as X-Service-CSRF): status and body. */
  const raw = async (method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const csrf = (await b.context.cookies(sc.url)).find((c) => c.name === 'service_csrf')?.value ?? '';
    const r = await b.context.request.fetch(sc.url + path, { method, headers: { 'x-service-csrf': csrf }, ...(body !== undefined ? { data: body } : {}) });
    return { status: r.status(), body: await r.json() };
  };

  const call = await sessionInBrowser(b.context, sc, 'barbara@example.com', 'Barbara');
  const port = (receiver.address() as { port: number }).port;
  const reg = await call('/v1/service/platforms/personal', {
    name: 'Ledger API', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'data:write'], callback_url: `http://127.0.0.1:${port}/hooks`,
  });
  const platform = apiClient(sc.url, reg.api_key);
  const agents: Record<string, string> = {};
  const requests: Record<string, string> = {};
  for (const name of ['order-bot', 'report-bot']) {
    agents[name] = (await platform.post(`/v1/service/connections/${reg.connection_id}/agents`, { name, agent_type: 'api_agent' })).body.agent_id;
    requests[name] = (await call('/v1/service/delegations/self-request', { connection_id: reg.connection_id, agent_id: agents[name] })).request_id;
  }
  const openRequest = async (agent: string): Promise<void> => {
    await tabTo(page, `#main a:has-text("from ${agent}")`);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: `Delegation request from ${agent}` }).waitFor();
  };
  const approveButton = 'button:text-is("Approve selected scopes")';

  await t.test('the list of requests', async (t) => {
    await page.goto(`${sc.url}/console/requests`);
    await page.getByRole('heading', { level: 1, name: 'Delegation requests' }).waitFor();
    const table = page.getByRole('table', { name: '2 pending of 2' });
    await table.waitFor();
    t.same((await table.locator('tbody tr').allInnerTexts()).map((r) => r.split('\t').slice(0, 4).join(' | ')).sort(),
      ['pending | order-bot | Ledger API | data:read, data:write', 'pending | report-bot | Ledger API | data:read, data:write'],
      'state, agent, platform, scopes');
    const shownAgent = await page.locator('#sr-agent').evaluate((s: any) => (s.selectedIndex >= 0 ? s.options[s.selectedIndex].text : '')); // eslint-disable-line @typescript-eslint/no-explicit-any
    t.match(shownAgent, /^(order|report)-bot \(/, 'the self-request form shows the agent it would ask for (not a blank choice)');
    await check(t, 'requests');
  });

  await t.test('deny with a reason', async (t) => {
    await openRequest('report-bot');
    await tabTo(page, 'button:text-is("Deny…")');
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Deny this request?' });
    await dialog.waitFor();
    await tabTo(page, '#deny-reason');
    // A reason the API refuses (a bidirectional override): shown as the API says it; nothing is decided.
    const bad = 'Not now\u202E';
    await page.keyboard.type(bad);
    await tabTo(page, 'dialog button:text-is("Deny request")');
    await page.keyboard.press('Enter');
    await dialog.getByRole('alert').waitFor();
    const refused = await raw('POST', `/v1/service/delegations/requests/${requests['report-bot']}/deny`, { reason: bad });
    t.match(refused, { status: 400, body: { error: { code: 'invalid_request', field: 'body.reason' } } }, 'the API refuses that reason');
    t.equal(await dialog.getByRole('alert').textContent(), `${refused.body.error.message} (invalid_request)`, 'the page shows the API\'s message');
    t.equal((await raw('GET', `/v1/service/delegations/requests/${requests['report-bot']}`)).body.state, 'pending', 'still pending');

    const reason = 'Reports are made by a person.';
    await tabTo(page, '#deny-reason', { back: true });
    await page.keyboard.press('Control+A');
    await page.keyboard.type(reason);
    await tabTo(page, 'dialog button:text-is("Deny request")');
    await page.keyboard.press('Enter');
    await page.getByText('Denied. The platform is told by webhook.').waitFor();
    await dialog.waitFor({ state: 'hidden' });
    await page.locator('dt:text-is("Decided")').waitFor();
    t.equal(await page.locator('dt:text-is("State") + dd').textContent(), 'denied', 'the page shows the request denied');
    t.equal(await page.getByRole('heading', { name: 'Approve' }).count(), 0, 'and no longer offers approve or deny');
    t.match(await focusedOnceOn(page, '#main p.success'), /^p "Denied\. The platform is told by webhook\."$/, 'the focus goes to the outcome, not lost with the form');
    const api = await raw('GET', `/v1/service/delegations/requests/${requests['report-bot']}`);
    t.match(api.body, { state: 'denied', decided_at: /^\d{4}-/, cert_id: null }, 'the API: denied');
    await check(t, 'request-denied');
    for (let i = 0; i < 100 && !hooks.some((h) => h.includes('delegation.denied')); i++) await new Promise((r) => setTimeout(r, 50));
    const hook = JSON.parse(hooks.find((h) => h.includes('delegation.denied')) ?? '{}');
    t.match(hook, { event: 'delegation.denied', request_id: requests['report-bot'], reason }, 'the platform is told, with the reason');

    await tabTo(page, '#main a:text-is("← All requests")', { back: true });
    await page.keyboard.press('Enter');
    await page.getByRole('table', { name: '1 pending of 2' }).waitFor();
    t.match(await page.locator('tbody tr', { hasText: 'report-bot' }).innerText(), /^denied\treport-bot\t.*\tView/, 'the list: denied');
  });

  await t.test('constraints: client IPs, tenants and time window, invalid values first', async (t) => {
    await openRequest('order-bot');
    await tabTo(page, 'input[name=scope][value="data:read"]');
    await page.keyboard.press('Space');
    await tabTo(page, '#c-client_ips');
    await page.keyboard.type('203.0.113.0/24\n10.0.0.0/33');
    await tabTo(page, '#c-tenants');
    await page.keyboard.type('acme\nbeta corp');
    await tabTo(page, '#c-time_window-start');
    await page.keyboard.type('0900A');
    const days = ['mon', 'tue', 'wed', 'thu', 'fri'];
    for (const d of days) {
      await tabTo(page, `#c-time_window-${d}`);
      await page.keyboard.press('Space');
    }
    const window = { start: '09:00', end: '', days };
    const c = { client_ips: ['203.0.113.0/24', '10.0.0.0/33'], tenants: ['acme', 'beta corp'], time_window: window };
    /** Approve; the page's message equals the validator's and the API's answer to the same constraints. */
    const refusedAs = async (what: string): Promise<void> => {
      await tabTo(page, approveButton);
      await page.keyboard.press('Enter');
      const shown = page.locator('#constraints-error');
      await shown.filter({ hasText: `constraints.${what}` }).waitFor();
      const api = await raw('POST', `/v1/service/delegations/requests/${requests['order-bot']}/approve`, { approved_scope: ['data:read'], constraints: c });
      t.match(api, { status: 400, body: { error: { code: 'invalid_constraints' } } }, `${what}: the API refuses the same constraints`);
      t.equal(await shown.textContent(), api.body.error.message, `${what}: the page's message is the API's`);
      t.equal(await shown.textContent(), `${validateConstraints(c)}.`, `${what}: and the validator's`);
    };

    await refusedAs('client_ips has an invalid entry "10.0.0.0/33"');
    await check(t, 'request-constraints');
    await tabTo(page, '#c-client_ips', { back: true });
    await page.keyboard.press('Control+A');
    await page.keyboard.type('203.0.113.0/24\n2001:db8::/32');
    c.client_ips = ['203.0.113.0/24', '2001:db8::/32'];
    await refusedAs('tenants has an invalid entry "beta corp"');
    await tabTo(page, '#c-tenants', { back: true });
    await page.keyboard.press('Control+A');
    await page.keyboard.type('acme\nbeta-corp');
    c.tenants = ['acme', 'beta-corp'];
    await refusedAs('time_window.end must be HH:MM (UTC)');
    // Back to the start time's last part, then one Tab forward: the until field's first part (hours).
    await tabTo(page, '#c-time_window-start', { back: true });
    await page.keyboard.press('Tab');
    await page.keyboard.type('0600P');
    t.equal(await page.inputValue('#c-time_window-end'), '18:00', 'until 18:00, typed');
    window.end = '18:00';
    t.equal(validateConstraints(c), null, 'now valid');

    await tabTo(page, approveButton);
    await page.keyboard.press('Enter');
    const approved = page.getByText(/^Approved: certificate cert-/);
    await approved.waitFor();
    t.match(await approved.textContent(), 'for data:read; constraints: from 203.0.113.0/24, 2001:db8::/32; tenants acme, beta-corp; Mon, Tue, Wed, Thu, Fri 09:00–18:00 UTC;',
      'approved, the constraints in plain words');
    t.match(await focusedOnceOn(page, '#main p.success'), /^p "Approved: certificate cert-/, 'the focus goes to the outcome');
    const certId = /certificate (cert-[0-9a-f-]{36})/.exec((await approved.textContent())!)![1]!;
    const cert = await raw('GET', `/v1/service/delegations/${certId}`);
    t.same(cert.body.constraints, c, 'the API: the certificate carries exactly these constraints');
    t.same(cert.body.approved_scope, ['data:read']);

    // Enforced: client IP and tenant are checked before the time of day.
    const flow: Flow = { user: platform, platform, reg, agentId: agents['order-bot']!, requestId: requests['order-bot']!, certId };
    t.match(await verify(platform, await proofFor(flow), 'data:read', { client_ip: '198.51.100.7', tenant: 'acme' }),
      { decision: 'deny', decision_reason: 'constraint_denied', constraint: 'client_ips' });
    t.match(await verify(platform, await proofFor(flow), 'data:read', { client_ip: '2001:db8::1', tenant: 'globex' }),
      { decision: 'deny', decision_reason: 'constraint_denied', constraint: 'tenants' });
  });

  await t.test('agents: the certificate in force', async (t) => {
    await tabTo(page, 'nav a[href="/console/agents"]');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Agents' }).waitFor();
    const cell = (agent: string) => page.locator('tbody tr', { has: page.locator(`th:text-is("${agent}")`) }).locator('td').nth(3);
    await cell('order-bot').waitFor();
    const certs = (await raw('GET', '/v1/service/delegations')).body.certificates as { cert_id: string; agent_id: string; status: string }[];
    const active = certs.find((x) => x.agent_id === agents['order-bot'] && x.status === 'approved')!;
    t.equal(await cell('order-bot').innerText(), `cert-${active.cert_id.slice(5, 13)} · data:read`, 'order-bot: its certificate and scope');
    t.equal(await cell('order-bot').getByRole('link').getAttribute('title'), active.cert_id, 'the full id on the link');
    t.equal(await cell('order-bot').getByRole('link').getAttribute('href'), '/console/certificates');
    t.equal(await cell('report-bot').innerText(), 'none', 'report-bot (denied): none');
    t.same(await axeViolations(page), [], 'agents: no serious or critical accessibility violation');
  });

  await t.test('a self-request for the agent chosen with the keyboard', async (t) => {
    await tabTo(page, 'nav a[href="/console/requests"]', { back: true });
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Delegation requests' }).waitFor();
    await tabTo(page, '#sr-agent');
    await page.keyboard.type('report');
    t.equal(await page.inputValue('#sr-agent'), agents['report-bot'], 'report-bot chosen');
    await tabTo(page, 'button:text-is("Create request")');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Delegation request from report-bot' }).waitFor();
    const id = page.url().split('/').pop()!;
    t.match((await raw('GET', `/v1/service/delegations/requests/${id}`)).body, { agent_id: agents['report-bot'], state: 'pending' }, 'the API: a pending request for report-bot');
  });

  expectNoProblems(t, b);
});
