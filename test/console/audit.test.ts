/**
 * The audit view's filters and cursor pagination in Debian's Chromium against
 * a real sidecar, with the keyboard alone. 130 decision events in three batches (two
 * agents, allows and denies, one second apart on the sidecar's clock, two
 * minutes between the batches) are more than the first page the console
 * shows (one API page of 100 when no filter applies in the page), after the
 * registration's two administrative events: "Load older events" adds the other 32, and the rows, compared one by one (time to the
 * millisecond, type, decision, reason, scope, agent) with the API's own audit
 * read, have no duplicate and no gap. The event-type, agent and time filters,
 * chosen with the keyboard, show exactly what the API's read with the same
 * filter gives. axe-core on each view; screenshots.
 */
import t from 'tap';
import type { Test } from 'tap';
import { startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { axeViolations, focusedOnceOn, launch, screenshot, tabTo } from './browser.js';
import { apiClient, expectNoProblems, proofFor, sessionInBrowser, verify } from './steps.js';

/** An audit event as the API gives it (the members the view shows). */
interface Ev { event_id: string; event_type: string; occurred_at: string; agent_id: string | null; required_scope: string | null; details: Record<string, unknown> | null }

const MIN = 60_000;

t.test('audit: load older events, event-type, agent and time filters — keyboard only', async (t) => {
  const sc = await startSidecar({ cryptoWorkers: 0 });
  const b = await launch();
  t.teardown(async () => { await b.close(); await sc.close(); });
  const { page } = b;
  const check = async (tt: Test, name: string): Promise<void> => {
    tt.same(await axeViolations(page), [], `${name}: no serious or critical accessibility violation`);
    await screenshot(page, name);
  };

  // Two agents with data:read each (set up through the API with the browser's own cookies).
  const call = await sessionInBrowser(b.context, sc, 'rosalind@example.com', 'Rosalind');
  const reg = await call('/v1/service/platforms/personal', { name: 'Lab API', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'data:write'] });
  const platform = apiClient(sc.url, reg.api_key);
  const flows: Record<string, Flow> = {};
  for (const name of ['alpha-bot', 'beta-bot']) {
    const agent = await platform.post(`/v1/service/connections/${reg.connection_id}/agents`, { name, agent_type: 'api_agent' });
    const request = await call('/v1/service/delegations/self-request', { connection_id: reg.connection_id, agent_id: agent.body.agent_id });
    const cert = await call(`/v1/service/delegations/requests/${request.request_id}/approve`, { approved_scope: ['data:read'] });
    flows[name] = { user: platform, platform, reg, agentId: agent.body.agent_id, requestId: request.request_id, certId: cert.cert_id };
  }
  const names = new Map(Object.entries(flows).map(([n, f]) => [f.agentId, n]));

  // Each present and each verify is one event, one second apart on the sidecar's clock.
  const act = async (agent: string, n: number, scope: string): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const bundle = await proofFor(flows[agent]!);
      sc.clock.advance(1000);
      await verify(platform, bundle, scope, { method: 'GET', path: '/v1/data' });
      sc.clock.advance(1000);
    }
  };
  await act('alpha-bot', 30, 'data:read'); // 60 events: presents and allows
  sc.clock.advance(2 * MIN);
  await act('beta-bot', 20, 'data:write'); // 40 events: presents and denies (not_delegated)
  sc.clock.advance(2 * MIN);
  await act('alpha-bot', 15, 'data:write'); // 30 events
  await call('/v1/auth/refresh'); // a fresh session on the sidecar's clock, which is now minutes ahead

  // The API's own read, all pages, with a filter; and the rows as the page should show them.
  const audit = async (query: Record<string, string> = {}): Promise<Ev[]> => {
    const out: Ev[] = [];
    let cursor: string | null = null;
    do {
      const q = new URLSearchParams({ limit: '200', ...query, ...(cursor ? { cursor } : {}) });
      const r = await b.context.request.get(`${sc.url}/v1/service/audit/personal?${q}`);
      if (!r.ok()) throw new Error(`audit read: ${r.status()} ${await r.text()}`);
      const body = await r.json() as { events: Ev[]; next_cursor: string | null };
      out.push(...body.events);
      cursor = body.next_cursor;
    } while (cursor);
    return out;
  };
  const expected = (events: Ev[]): string[][] => events.map((e) => {
    const d = e.details ?? {};
    const reason = typeof d.decision_reason === 'string' ? `${d.decision_reason}${typeof d.constraint === 'string' ? ` (${d.constraint})` : ''}` : '—';
    return [e.occurred_at, e.event_type, typeof d.decision === 'string' ? d.decision : '—', reason, e.required_scope ?? '—', names.get(e.agent_id ?? '') ?? '—'];
  });
  const shown = (): Promise<string[][]> => page.locator('table.audit tbody tr').evaluateAll((rows) => rows.map((r: any) => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const cells = [...r.cells] as { title: string; textContent: string }[];
    return [cells[0]!.title, ...cells.slice(1, 6).map((c) => c.textContent.trim())];
  }));
  const rowCount = (n: number): Promise<unknown> => page.waitForFunction((k) => (globalThis as any).document.querySelectorAll('table.audit tbody tr').length === k, n, { timeout: 15_000 }); // eslint-disable-line @typescript-eslint/no-explicit-any
  const status = page.locator('#main p.status');
  const apply = async (query: RegExp): Promise<void> => {
    await tabTo(page, 'form[aria-label="Audit filters"] button:text-is("Apply filters")');
    await page.keyboard.press('Enter');
    await page.waitForURL(query);
  };
  /** Chooses an option of a filter's select by typing its first letters, as a keyboard user does. */
  const choose = async (tt: Test, label: string, typed: string, value: string): Promise<void> => {
    const select = `form[aria-label="Audit filters"] label:has-text("${label}") select`;
    await tabTo(page, select);
    await page.keyboard.type(typed);
    tt.equal(await page.locator(select).inputValue(), value, `${label}: "${typed}" typed chooses ${value || 'all'}`);
  };

  const all = await audit();
  t.equal(all.length, 132, 'the API has the 132 events');
  t.same(all.slice(130).map((e) => e.event_type), ['connection.created', 'platform.created'],
    'the oldest two: the registration\'s administrative events (newest first)');
  t.equal(new Set(all.slice(0, 130).map((e) => e.occurred_at)).size, 130,
    'each decision event at its own time (so each row can be told apart)');

  await t.test('the newest page, then "Load older events" with the keyboard: no row duplicated or missing', async (t) => {
    await page.goto(`${sc.url}/console/audit`);
    await page.getByRole('heading', { level: 1, name: 'Audit' }).waitFor();
    await rowCount(100);
    t.equal(await status.textContent(), '100 events shown.', 'the first page: one API page of 100');
    t.same(await shown(), expected(all.slice(0, 100)), 'the newest 100, in the API\'s order');
    const decisions = all.slice(0, 100).filter((e) => typeof e.details?.decision_id === 'string');
    t.equal(decisions.length, 50, 'the API: 50 decision events with a decision id among them');
    t.same(await page.locator('table.audit tbody tr:has(button:text-is("Why?"))').evaluateAll((rows) => rows.map((r) => r.id)),
      decisions.map((e) => `ev-${e.event_id}`), 'a "Why?" on exactly the decision events (explain.test.ts opens them)');
    const older = page.getByRole('button', { name: 'Load older events' });
    t.ok(await older.isVisible(), 'a "Load older events" button, since there are more');
    t.same(await axeViolations(page), [], 'audit, first page: no serious or critical accessibility violation');
    // Past the filters and a "Why?" on each of the 50 decision events shown.
    await tabTo(page, 'button:text-is("Load older events")', { max: 150 });
    await page.keyboard.press('Enter');
    await rowCount(132);
    await status.filter({ hasText: '32 older events added.' }).waitFor();
    const rows = await shown();
    t.same(rows, expected(all), 'all 132, in order: the same as the API\'s read');
    t.equal(new Set(rows.map((r) => r.join('\u0000'))).size, 132, 'no row twice');
    t.equal(await older.count(), 0, 'nothing older: the button is gone');
    t.match(await focusedOnceOn(page, `#ev-${all[100]!.event_id}`), new RegExp(`^tr#ev-${all[100]!.event_id} `), 'the button is gone: the focus is on the first row it added, not lost');
  });

  await t.test('event type filter', async (t) => {
    await choose(t, 'Event type', 'proof.r', 'proof.rejected');
    await apply(/\/console\/audit\?event_type=proof\.rejected$/);
    const want = await audit({ event_type: 'proof.rejected' });
    t.equal(want.length, 35, 'the API: 20 + 15 denies');
    await rowCount(35);
    t.same(await shown(), expected(want), 'exactly the API\'s proof.rejected events');
    t.equal(await status.textContent(), '35 events shown.');
  });

  await t.test('agent filter', async (t) => {
    await choose(t, 'Event type', 'all', '');
    await choose(t, 'Agent', 'beta', flows['beta-bot']!.agentId);
    await apply(new RegExp(`/console/audit\\?agent_id=${flows['beta-bot']!.agentId}$`));
    const want = await audit({ agent_id: flows['beta-bot']!.agentId });
    t.equal(want.length, 40, 'the API: beta-bot\'s 20 presents and 20 denies');
    await rowCount(40);
    t.same(await shown(), expected(want), 'exactly the API\'s events of beta-bot');
    t.ok((await shown()).every((r) => r[5] === 'beta-bot'), 'every row is beta-bot\'s');
    t.same(await axeViolations(page), [], 'audit by agent: no serious or critical accessibility violation');
  });

  await t.test('time filter (from, to): the middle batch', async (t) => {
    // The bounds are whole minutes (datetime-local): the first after the first batch, the first after the second.
    const ceilMinute = (iso: string): Date => new Date(Math.floor(Date.parse(iso) / MIN) * MIN + MIN);
    const from = ceilMinute(all[70]!.occurred_at); // the first batch's newest event (newest first: 30 + 40 events before it)
    const to = ceilMinute(all[30]!.occurred_at); // the second batch's newest event
    t.ok(Date.parse(all[29]!.occurred_at) > to.getTime(), 'the third batch is after "to"');
    // Typed as a person does in Chromium's datetime-local (month, day, year, Tab, hours, minutes, AM/PM; the page's zone is UTC).
    const typeTime = async (label: string, d: Date): Promise<void> => {
      await tabTo(page, `form[aria-label="Audit filters"] label:text-is("${label}") input`);
      const p = (n: number): string => String(n).padStart(2, '0');
      await page.keyboard.type(`${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${d.getUTCFullYear()}`);
      await page.keyboard.press('Tab');
      await page.keyboard.type(`${p(d.getUTCHours() % 12 || 12)}${p(d.getUTCMinutes())}${d.getUTCHours() < 12 ? 'A' : 'P'}`);
      t.equal(await page.locator(`form[aria-label="Audit filters"] label:text-is("${label}") input`).inputValue(), d.toISOString().slice(0, 16), `${label}: typed`);
    };
    await choose(t, 'Agent', 'all', '');
    await typeTime('From', from);
    await typeTime('To', to);
    await apply(/\/console\/audit\?from=[^&]+&to=[^&]+$/);
    const want = await audit({ from: from.toISOString(), to: to.toISOString() });
    t.equal(want.length, 40, 'the API: the second batch');
    await rowCount(40);
    t.same(await shown(), expected(want), 'exactly the API\'s events in the window');
    t.equal(await page.getByRole('button', { name: 'Load older events' }).count(), 0, 'the "from" bound ends the reading: nothing older to load');
    await check(t, 'audit-filters');
  });

  expectNoProblems(t, b);
});
