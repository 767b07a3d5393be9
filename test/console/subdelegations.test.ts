/**
 * A certificate's page and its tree of sub-delegations (issue 33), in Debian's
 * Chromium against a real sidecar, with the keyboard: the account holder
 * approves a root certificate with the right to delegate two levels; the
 * platform sub-delegates a chain of depth 2 (root → research-bot → fetch-bot)
 * and a sibling (root → audit-bot) through the API; the root's page shows
 * both levels nested, each node with its agent, scopes and state; revoking the
 * middle node (confirmed with a reason) revokes it and its child, and the page
 * shows them revoked while the root and the sibling stay in force — as the API
 * and verify say too. A sub-delegated certificate's page names its parent.
 * axe-core on the tree, the dialog and the tree after the revocation.
 */
import t from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import type { Locator } from 'playwright-core';
import type { Flow } from '../helpers/sidecar.js';
import { mustSubDelegate, newAgent, proofOf } from '../sidecar/chains/helpers.js';
import { verify } from '../sidecar/decide/helpers.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo, textOnceMatches } from './browser.js';
import { apiClient, expectNoProblems, sessionInBrowser } from './steps.js';

const short = (id: string): string => `cert-${id.slice(5, 13)}`;

t.test('the tree of sub-delegations; revoking the middle node revokes its child only — keyboard only', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const b = await launch();
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page } = b;
  const check = async (name: string): Promise<void> => {
    t.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };

  // The root: approved in the account holder's session with the right to delegate two levels.
  const call = await sessionInBrowser(b.context, sc, 'rosa@example.com', 'Rosa');
  const reg = await call('/v1/service/platforms/personal', { name: 'Research API', surface_type: 'agentic_api',
    default_allowed_scopes: ['data:read', 'data:write'] });
  const platform = apiClient(sc.url, reg.api_key);
  const agent = await platform.post(`/v1/service/connections/${reg.connection_id}/agents`,
    { name: 'orchestrator', agent_type: 'api_agent' });
  t.equal(agent.status, 200);
  const request = await call('/v1/service/delegations/self-request', { connection_id: reg.connection_id });
  const root = await call(`/v1/service/delegations/requests/${request.request_id}/approve`,
    { approved_scope: ['data:read', 'data:write'], max_delegation_depth: 2 });
  const f: Flow = { user: platform, platform, reg, agentId: agent.body.agent_id, requestId: request.request_id,
    certId: root.cert_id };

  // The chain of depth 2 and a sibling, by the platform with its key (as test/sidecar/chains does).
  const research = await newAgent(f, 'research-bot');
  const fetcher = await newAgent(f, 'fetch-bot');
  const auditor = await newAgent(f, 'audit-bot');
  const mid = await mustSubDelegate(f, f.agentId,
    { to_agent_id: research, scopes: ['data:read'], max_delegation_depth: 1 });
  const leaf = await mustSubDelegate(f, research, { to_agent_id: fetcher, scopes: ['data:read'] });
  const sibling = await mustSubDelegate(f, f.agentId, { to_agent_id: auditor, scopes: ['data:read'] });
  const allowed = await verify(platform, await proofOf(f, fetcher), 'data:read');
  t.equal(allowed.body.decision, 'allow', 'before: the leaf of the chain is allowed');
  // A proof made now, verified after the revocation (a revoked agent gets no new proof).
  const leafProof = await proofOf(f, fetcher);

  // The root's page: both levels, nested, in the API's order.
  await page.goto(`${sc.url}/console/certificates/${root.cert_id}`);
  await page.getByRole('heading', { level: 1, name: `Certificate ${short(root.cert_id)}` }).waitFor();
  const li = (id: string): string => `li[data-cert="${id}"]`;
  const node = (id: string): Locator => page.locator(`${li(id)} > .node`);
  /** The node's text: its id, agent, scopes, then `rest` (a pattern). */
  const says = async (id: string, agentName: string, scopes: string, rest: string): Promise<string> => {
    const re = new RegExp(`^${short(id)}\\s+${agentName}\\s+${scopes}\\s+${rest}`);
    t.match(await textOnceMatches(node(id), re), re, `${agentName}: ${rest}`);
    return rest;
  };
  await node(leaf).waitFor();
  t.equal(await page.locator(`${li(root.cert_id)} > ul > ${li(mid)} > ul > ${li(leaf)}`).count(), 1,
    'the leaf is nested under the middle node, under the root');
  const children = page.locator(`${li(root.cert_id)} > ul > li`);
  t.same(await children.evaluateAll((els) => els.map((e) => e.getAttribute('data-cert'))),
    [mid, sibling], 'the root\'s children, oldest first as the API lists them');
  t.match(await page.locator('#main').innerText(), /3 certificates below this one\./);
  await says(root.cert_id, '\\(this certificate\\)\\s+orchestrator', 'data:read, data:write', 'in force until revoked');
  await says(mid, 'research-bot', 'data:read', 'in force until revoked\\s+Revoke');
  await says(leaf, 'fetch-bot', 'data:read', 'in force until revoked\\s+Revoke');
  t.equal(await page.getByRole('list', { name: `Sub-delegated from ${short(mid)} (research-bot)` }).count(), 1,
    'each level is a named list');
  await check('certificate-tree');

  // Revoke the middle node, with the keyboard, confirmed with a reason.
  await tabTo(page, `${li(mid)} > .node button`);
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name: 'Revoke this certificate?' });
  await dialog.waitFor();
  t.match(await dialog.innerText(),
    /research-bot loses data:read at once, and so does every agent that holds a certificate sub-delegated below it\./);
  await tabTo(page, 'dialog button:text-is("Revoke certificate")');
  await page.keyboard.press('Enter');
  t.equal(await dialog.getByRole('alert').textContent(),
    'Give a reason: it is recorded with the revocation and sent to the platform.', 'a reason is required');
  await tabTo(page, '#revoke-reason', { back: true });
  await page.keyboard.type('Research finished.');
  await check('certificate-tree-revoke');
  await tabTo(page, 'dialog button:text-is("Revoke certificate")');
  await page.keyboard.press('Enter');
  const done = new RegExp(`^Revoked ${short(mid)} and 1 certificate below it at .+\\. `
    + 'Verify denies their proofs from now on\\.$');
  await page.getByRole('status').getByText(done).waitFor();
  await node(leaf).getByText(/^revoked /).waitFor();
  t.match(await focusedOnceOn(page, 'section > h2[tabindex]'), /^h2 "Sub-delegations"/,
    'the focus goes to the tree, not to the page\'s end');
  await says(mid, 'research-bot', 'data:read', 'revoked \\S+ \\S+ — “Research finished\\.”$');
  await says(leaf, 'fetch-bot', 'data:read', 'revoked \\S+ \\S+ with a certificate above it$');
  await says(root.cert_id, '\\(this certificate\\)\\s+orchestrator', 'data:read, data:write',
    'in force until revoked\\s+Revoke');
  await says(sibling, 'audit-bot', 'data:read', 'in force until revoked\\s+Revoke');
  await check('certificate-tree-revoked');

  // The API and verify agree.
  const read = async (id: string): Promise<{ status: string; revoke_reason: string | null }> =>
    (await b.context.request.get(`${sc.url}/v1/service/delegations/${id}`)).json();
  t.match(await read(mid), { status: 'revoked', revoke_reason: 'Research finished.' });
  t.match(await read(leaf), { status: 'revoked', revoke_reason: 'ancestor_revoked' });
  t.match(await read(root.cert_id), { status: 'approved', revoke_reason: null });
  t.match(await read(sibling), { status: 'approved', revoke_reason: null });
  t.match((await verify(platform, leafProof, 'data:read')).body,
    { decision: 'deny', decision_reason: 'delegation_revoked' }, 'the leaf\'s earlier proof: denied');
  t.match((await verify(platform, await proofOf(f, auditor), 'data:read')).body,
    { decision: 'allow', decision_reason: 'authorized' }, 'the sibling is still allowed');

  // The leaf's own page: its parent, by link.
  await tabTo(page, `${li(leaf)} > .node a`);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: `Certificate ${short(leaf)}` }).waitFor();
  await page.getByText('No agent has sub-delegated from this certificate.').waitFor();
  t.match(await page.locator('dl.facts').innerText(),
    new RegExp(`Place in the chain\\s+sub-delegated at depth 2 from ${short(mid)}\\s+Right to delegate\\s+none`));
  t.equal(await page.locator('ul.tree button').count(), 0, 'nothing left to revoke there');

  expectNoProblems(t, b);
});
