/**
 * Connecting to a published platform in the console (issue 32), in Debian's Chromium against a
 * real sidecar, a real DNS server on loopback (dnsmasq, for the publisher's domain) and a real
 * webhook receiver (the platform's callback), with the keyboard: an organisation's owner reads
 * the directory (publisher and verified domain), connects choosing fewer scopes than offered (none
 * chosen is refused with the API's code); the platform learns the key from its signed webhook and
 * asks for delegations; the requests appear under Connections with the platform's verified
 * publisher and the constraints it proposed; the owner approves one with fewer scopes and stricter
 * constraints (a looser method refused with the API's code first; the proposed rate limit kept)
 * and denies another (the platform is told);
 * a member of the organisation sees the same pages without the controls their role may not use,
 * each saying who may act; the owner removes the connection (its key stops working, its pending
 * request is denied, the platform is told). The API's state is read after each step; axe-core on
 * each view.
 */
import t from 'tap';
import type { Cookie } from 'playwright-core';
import { Client, startSidecar } from '../helpers/sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../helpers/dnsmasq.js';
import { orgOwner } from '../helpers/organisations.js';
import { startHookReceiver, transportProblems, waitFor } from '../sidecar/webhooks/fixtures/hooks.js';
import type { Hit } from '../sidecar/webhooks/fixtures/hooks.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo, textOnceMatches } from './browser.js';
import { driver, expectNoProblems, sessionInBrowser } from './steps.js';

if (dnsmasqMissing()) {
  t.pass('skipped: dnsmasq is not installed (.ci/run installs it)', { skip: true });
} else {
  t.test('directory, connect, requests from the platform, approve fewer / deny, roles, remove', async (t) => {
    const dns = await startDnsmasq(['example.org'], {});
    t.teardown(() => dns.close());
    const rx = await startHookReceiver();
    t.teardown(() => rx.close());
    const sc = await startSidecar({ cryptoWorkers: 0, sendCodePerMinute: 100, dnsServers: [dns.address] });
    const b = await launch();
    t.teardown(async () => { await b.close(); await sc.close(); });
    const { page } = b;
    const { get, press, said } = driver(b, sc);
    const check = async (name: string): Promise<void> => {
      t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
      await screenshot(page, name);
    };
    const open = async (href: string, title: string): Promise<void> => {
      await press(`nav a[href="/console${href}"]`);
      await page.getByRole('heading', { level: 1, name: title }).waitFor();
    };
    const hook = (event: string, key: string, value: unknown): Promise<Hit> => waitFor(`${event} ${String(value)}`,
      10_000,
      () => rx.hits.find((h) => h.body.event === event && h.body[key] === value));

    // The publisher (over the API): a verified domain and a published platform.
    const { c: pub } = await orgOwner(sc, 'owner@travel.example.org', 'Travel Co');
    const reg = await pub.post('/v1/service/platforms', { name: 'Trip Planner', surface_type: 'agentic_api',
      description: 'Plans trips.', default_allowed_scopes: ['data:read', 'data:write', 'payments:send'],
      callback_url: rx.url });
    const claim = await pub.req('PUT', '/v1/service/organization/domain', { domain: 'travel.example.org' });
    await dns.setRecords({ [claim.body.record_name]: [[claim.body.record_text]] });
    t.equal((await pub.post('/v1/service/organization/domain/verify')).body.state, 'verified');
    t.equal((await pub.post(`/v1/service/platforms/${reg.body.platform_id}/publish`)).body.publish_state, 'published');

    // The account holder: Acme's owner, in the browser, acting in Acme.
    const call = await sessionInBrowser(b.context, sc, 'olga@acme.example.org', 'Olga');
    const acme = await call('/v1/service/organizations', { name: 'Acme' });
    await call('/v1/auth/session/workspace', { workspace_id: acme.organization_id });
    await page.goto(`${sc.url}/console/`);
    await open('/directory', 'Directory');
    const row = page.locator('tr[data-platform="Trip Planner"]');
    t.same((await row.locator('td').allInnerTexts()).slice(0, 4),
      ['Trip Planner\nPlans trips.', 'Travel Co', 'travel.example.org',
      'data:read, data:write, payments:send'], 'name, publisher, verified domain, scopes');
    await press('tr[data-platform="Trip Planner"] button');
    t.match(await focusedOnceOn(page, '#connect-title'), /Connect to Trip Planner/, 'the focus moves to the form');
    const form = 'form[aria-labelledby="connect-title"]';
    t.equal(await page.locator(`${form} input[type=checkbox]:checked`).count(), 0, 'none ticked');
    await press('button:text-is("Connect")');
    const alert = page.locator(`${form} [role=alert]`);
    await alert.waitFor();
    t.equal(await alert.innerText(), 'body.allowed_scopes must not be empty. (invalid_scopes)',
      'none chosen: the API\'s code');
    for (const s of ['data:read', 'data:write']) {
      await tabTo(page, `${form} input[value="${s}"]`);
      await page.keyboard.press('Space');
    }
    await check('directory-connect');
    await press('button:text-is("Connect")');
    await said(/^Connected to Trip Planner with data:read, data:write\./);
    await row.getByRole('link', { name: 'Connected' }).waitFor();
    const conns = (await get('/v1/service/connections')).connections;
    t.match(conns, [{ platform_id: reg.body.platform_id, allowed_scopes: ['data:read', 'data:write'],
      status: 'active' }],
      'the API has the connection, with the scopes chosen');
    const connId = conns[0].connection_id as string;

    // The platform learns the key from its signed webhook and asks for delegations.
    const created = await hook('connection.created', 'connection_id', connId);
    t.same(transportProblems(created, reg.body.webhook_signing_secret), [], 'signed');
    t.match(created.body,
      { org_id: acme.organization_id, org_name: 'Acme', allowed_scopes: ['data:read', 'data:write'] });
    const platform = new Client(sc.url);
    platform.apiKey = created.body.api_key as string;
    const ask = async (name: string, scopes: string[], constraints?: object): Promise<string> => {
      const agent = await platform.post(`/v1/service/connections/${connId}/agents`, { name, agent_type: 'api_agent' });
      const r = await platform.post(`/v1/service/connections/${connId}/delegation-requests`,
        { agent_id: agent.body.agent_id, scopes, ...(constraints ? { constraints } : {}) });
      t.equal(r.status, 200, `the platform asks for ${name}`);
      return r.body.request_id as string;
    };
    const proposal = { methods: ['GET', 'POST'], max_calls: { count: 100, period: 'hour' } };
    const planner = await ask('planner', ['data:read', 'data:write'], proposal);
    const booker = await ask('booker', ['data:read']);

    // Connections: the requests with the platform's verified publisher; approve fewer scopes.
    await open('/connections', 'Connections');
    const incoming = page.getByRole('table', { name: '2 requests waiting for a decision' });
    await incoming.waitFor();
    const publisher = 'published by Travel Co (verified domain travel.example.org)';
    t.same((await incoming.locator(`tr[data-request="${planner}"] td`).allInnerTexts()).slice(0, 5),
      ['Trip Planner', publisher, 'planner', 'data:read, data:write',
        'methods GET, POST; at most 100 calls per hour (UTC)'],
      'platform, verified publisher, agent, scopes asked, constraints proposed');
    t.same((await page.locator(`tr[data-connection="${connId}"] td`).allInnerTexts()).slice(1, 4),
      [publisher, 'data:read, data:write', 'active'], 'the connection with its publisher');
    await check('connections-requests');
    await press(`tr[data-request="${planner}"] a`);
    await page.getByRole('heading', { level: 1, name: 'Delegation request from planner' }).waitFor();
    t.equal(await page.locator('[data-fact="platform"]').innerText(), `Trip Planner, ${publisher}`,
      'the request names its verified publisher');
    t.match(await page.locator('#proposed-constraints').innerText(),
      /^The platform proposed: methods GET, POST; at most 100 calls per hour \(UTC\)\. Those are kept;/);
    await tabTo(page, 'input[name="scope"][value="data:read"]');
    await page.keyboard.press('Space');
    // Looser than the proposal (DELETE) is refused with the API's code; GET alone is stricter.
    for (const m of ['GET', 'DELETE']) {
      await tabTo(page, `#c-methods-${m}`);
      await page.keyboard.press('Space');
    }
    await press('button:text-is("Approve selected scopes")');
    const refusal = page.locator('form[aria-labelledby="approve-title"] [role=alert]');
    await refusal.waitFor();
    t.match(await refusal.innerText(), /\(constraints_loosened\)$/, 'a looser method: refused, with the code');
    t.match(await get(`/v1/service/delegations/requests/${planner}`), { state: 'pending' }, 'nothing issued');
    await tabTo(page, '#c-methods-DELETE');
    await page.keyboard.press('Space');
    await press('button:text-is("Approve selected scopes")');
    await page.locator('p.success').waitFor();
    t.match(await page.locator('p.success').innerText(),
      /^Approved: certificate \S+ for data:read; constraints: methods GET; at most 100 calls per hour \(UTC\);/,
      'fewer scopes, a stricter method, the proposed rate limit kept');
    const granted = await get(`/v1/service/delegations/requests/${planner}`);
    t.match(granted, { state: 'approved' });
    t.same((await get(`/v1/service/delegations/${granted.cert_id}`)).constraints,
      { methods: ['GET'], max_calls: { count: 100, period: 'hour' } }, 'the certificate\'s constraints in the API');
    const approved = await hook('delegation.approved', 'request_id', planner);
    t.same(approved.body.approved_scope, ['data:read'], 'the platform is told: fewer scopes than asked');

    // Deny the other.
    await open('/connections', 'Connections');
    await press(`tr[data-request="${booker}"] a`);
    await page.getByRole('heading', { level: 1, name: 'Delegation request from booker' }).waitFor();
    await press('button:text-is("Deny…")');
    await tabTo(page, '#deny-reason');
    await page.keyboard.type('Not needed.');
    await press('dialog button:text-is("Deny request")');
    await page.getByText('Denied. The platform is told by webhook.').waitFor();
    t.match(await get(`/v1/service/delegations/requests/${booker}`), { state: 'denied' });
    await hook('delegation.denied', 'request_id', booker);
    const waiting = await ask('writer', ['data:write']);

    // A member of Acme: the same pages, without the controls the role may not use.
    const owner: Cookie[] = await b.context.cookies();
    const inv = await call('/v1/service/organization/invitations', { email: 'mia@acme.example.org', role: 'member' });
    const mia = await sessionInBrowser(b.context, sc, 'mia@acme.example.org', 'Mia');
    await mia(`/v1/service/invitations/${inv.invitation_id}/accept`);
    await mia('/v1/auth/session/workspace', { workspace_id: acme.organization_id });
    await page.goto(`${sc.url}/console/connections`);
    await page.getByRole('table', { name: '1 request waiting for a decision' }).waitFor();
    const main = await page.locator('#main').innerText();
    t.match(main, /Your role \(member\) may not decide delegations: an approver or owner does\./);
    t.match(main, /Your role \(member\) reads the connections; removing one needs an owner or admin\./);
    t.equal(await page.locator('#main button:visible').count(), 0, 'no Remove for a member');
    t.equal(await page.locator(`tr[data-request="${waiting}"] a`).textContent(),
      'View the request of Trip Planner for writer');
    await check('connections-member');
    await press(`tr[data-request="${waiting}"] a`);
    await page.getByRole('heading', { level: 1, name: 'Delegation request from writer' }).waitFor();
    t.equal(await page.locator('#main form, #main button').count(), 0, 'no approve form for a member');
    t.match(await page.locator('#main .notice').innerText(),
      /^Your role \(member\) may not approve or deny delegations/);
    await open('/requests', 'Delegation requests');
    t.equal(await page.locator('#sr-agent').count(), 0, 'no self-request for a member');
    t.match(await page.locator('#main .notice').innerText(),
      /asking for, approving and denying delegations need an approver or owner\./);
    await open('/directory', 'Directory');
    await row.waitFor();
    t.equal(await page.locator('#main button').count(), 0, 'no Connect for a member');
    t.match(await page.locator('#main .notice').innerText(), /connecting needs an owner or admin\./);
    await open('/platform', 'Platforms');
    await page.getByText('Not claimed. An owner or admin claims it.').waitFor();
    t.equal(await page.locator('#domain-name, #p-name, #main button').count(), 0,
      'no domain, registration or publishing');
    await open('/approvals', 'Approvals');
    t.match(await page.locator('#main .notice').innerText(), /approving and denying need an approver or owner\./);
    const csrf = (await b.context.cookies()).find((c) => c.name === 'service_csrf')!.value;
    const refused = await b.context.request.post(`${sc.url}/v1/service/connections/${connId}/remove`,
      { data: {}, headers: { 'x-service-csrf': csrf } });
    t.equal((await refused.json()).error.code, 'role_forbidden', 'what the page does not offer, the API refuses');

    // The owner removes the connection.
    await b.context.clearCookies();
    await b.context.addCookies(owner);
    await page.goto(`${sc.url}/console/connections`);
    await press(`tr[data-connection="${connId}"] button.danger`);
    await page.getByRole('dialog', { name: 'Remove this connection?' }).waitFor();
    await check('connections-remove');
    await press('dialog button:text-is("Remove connection")');
    await said('Removed the connection to Trip Planner; 1 certificate revoked. The platform is told.');
    t.match(await textOnceMatches(page.locator(`tr[data-connection="${connId}"]`), /\tremoved /), /\tremoved /);
    t.match(await get(`/v1/service/connections/${connId}`), { status: 'removed' });
    t.match(await get(`/v1/service/delegations/requests/${waiting}`), { state: 'denied' },
      'its pending request is denied');
    t.equal((await platform.get(`/v1/service/connections/${connId}/agents`)).body.error.code, 'invalid_api_key',
      'its key stops working');
    await hook('connection.removed', 'connection_id', connId);
    await page.getByText('No platform is waiting for a decision.').waitFor();
    expectNoProblems(t, b);
  });
}
