/**
 * Step-up approval through the real sidecar (issue 23), with the platform's
 * webhook endpoint built on the project's receiver library: below the
 * threshold no approval; above it verify answers deny `approval_required`
 * with an `approval_id` (the same one while it is pending), the account holder
 * lists, reads (in human terms), approves or denies with a note, the agent's
 * platform polls the status with its API key; an approval allows exactly one
 * later verify of the same operation (another amount or body cannot use it;
 * a second use, also a concurrent one, is `approval_used`); a denial is
 * `approval_denied`. Every step is an audit row and a signed webhook.
 */
import t from 'tap';
import { Client, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, expectError, verify } from '../decide/helpers.js';
import { startLibraryReceiver } from '../webhooks/fixtures/library-receiver.js';
import type { LibraryReceiver } from '../webhooks/fixtures/library-receiver.js';
import { transportProblems, waitFor } from '../webhooks/fixtures/hooks.js';
import { boundBundle, getApproval, opOf, payment } from './helpers.js';

const RULE = { require_approval: { scopes: ['payments:send'], above: { amount: '100.00', currency: 'USD' } } };
let sc: TestSidecar;
let rx: LibraryReceiver;
let f: Flow;

t.before(async () => {
  sc = await startSidecar({}, { webhook: { pollIntervalMs: 50 } });
  // The harness clock is frozen; keep it on real time so webhook timestamps are "now".
  const ticker = setInterval(() => { sc.clock.t = Math.max(sc.clock.t, Date.now()); }, 20);
  ticker.unref();
  rx = await startLibraryReceiver(() => sc.clock.t);
  f = await specFlow(sc, 'approvals@example.com', { approve: ['payments:send', 'data:read'], constraints: RULE });
  rx.useSecret(f.reg.webhook_signing_secret);
  const cb = await f.user.req('PUT', `/v1/service/platforms/${f.reg.platform_id}/callback`, { callback_url: rx.url });
  if (cb.status !== 200) throw new Error(`callback: ${cb.status} ${cb.text}`);
  t.teardown(async () => {
    clearInterval(ticker);
    await sc.close();
    await rx.close();
  });
});

/** The approval.* events received for `approvalId`, by type. */
const eventsOf = (approvalId: string): Record<string, Record<string, unknown>> =>
  Object.fromEntries(rx.events.filter((e) => (e as unknown as { approval_id?: string }).approval_id === approvalId).map((e) => [e.event, e as unknown as Record<string, unknown>]));

t.test('at or below the threshold no approval is needed', async (t) => {
  const p = payment('100.00');
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'payments:send', p.context), 'allow', 'authorized');
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read', { method: 'GET', path: '/v1/items' }), 'allow', 'authorized', undefined, 'another scope');
});

t.test('request, approve, exactly one allowed retry, a second retry refused', async (t) => {
  const p = payment('120.00');
  const op = opOf(p.context, 'payments:send');
  const first = await verify(f.platform, await boundBundle(f, op), 'payments:send', p.context);
  expectDecision(t, first, 'deny', 'approval_required', undefined, 'first verify');
  const id = first.body.approval_id as string;
  t.match(id, /^[0-9a-f-]{36}$/, 'approval_id');
  const again = await verify(f.platform, await boundBundle(f, op), 'payments:send', p.context);
  expectDecision(t, again, 'deny', 'approval_required', undefined, 'while pending');
  t.equal(again.body.approval_id, id, 'the same approval while it is pending');

  const list = await f.user.get('/v1/service/approvals?state=pending');
  t.equal(list.status, 200);
  t.same(list.body.approvals.map((a: { approval_id: string }) => a.approval_id), [id], 'listed as pending');
  const a = await getApproval(f.user, id);
  t.match(a, {
    state: 'pending', scope: 'payments:send', summary: 'payments:send 120.00 USD: POST /v1/payments', agent_id: f.agentId, cert_id: f.certId,
    action: { method: 'POST', path: '/v1/payments', tool: null, amount: '120.00', currency: 'USD', bound: true }, operation: op,
  }, 'read in human terms');
  const status = await f.platform.get(`/v1/service/approvals/${id}/status`);
  t.match(status.body, { approval_id: id, state: 'pending', decided_at: null }, 'the agent\'s platform polls it');

  const granted = await f.user.post(`/v1/service/approvals/${id}/approve`);
  t.equal(granted.status, 200, granted.text);
  t.equal(granted.body.state, 'granted');
  expectError(t, await f.user.post(`/v1/service/approvals/${id}/approve`), 409, 'approval_not_pending', 'approving twice');
  t.equal((await f.platform.get(`/v1/service/approvals/${id}/status`)).body.state, 'granted');

  const other = payment('121.00');
  const otherAmount = await verify(f.platform, await boundBundle(f, opOf(other.context, 'payments:send')), 'payments:send', other.context);
  expectDecision(t, otherAmount, 'deny', 'approval_required', undefined, 'another amount');
  t.not(otherAmount.body.approval_id, id, 'another amount is another approval');
  const otherBody = payment('120.00', { to: 'acct_evil' });
  const evil = await verify(f.platform, await bundleFor(f), 'payments:send', otherBody.context);
  expectDecision(t, evil, 'deny', 'approval_required', undefined, 'same amount, another body (unbound proof)');
  t.not(evil.body.approval_id, id);
  const unbound = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  expectDecision(t, unbound, 'deny', 'approval_required', undefined, 'same context but an unbound proof: another operation');

  const used = await verify(f.platform, await boundBundle(f, op), 'payments:send', p.context);
  expectDecision(t, used, 'allow', 'authorized', undefined, 'the retry');
  t.equal(used.body.approval_id, id, 'the allow names the approval it used');
  const second = await verify(f.platform, await boundBundle(f, op), 'payments:send', p.context);
  expectDecision(t, second, 'deny', 'approval_used', undefined, 'a second retry');
  t.equal(second.body.approval_id, id);
  t.equal((await getApproval(f.user, id)).state, 'used');

  const verified = (await auditAll(f.user, 'event_type=proof.verified')).find((e) => e.event_id === used.body.audit_event_id);
  t.equal(verified?.details.approval_id, id, 'the allow\'s audit row names the approval');
  t.same((await auditAll(f.user, 'event_type=approval.requested')).filter((e) => e.details.approval_id === id).length, 1, 'one approval.requested row');
  t.same((await auditAll(f.user, 'event_type=approval.granted')).filter((e) => e.details.approval_id === id).length, 1, 'one approval.granted row');

  const ev = await waitFor('approval.requested and approval.granted', 10_000, () => { const e = eventsOf(id); return e['approval.requested'] && e['approval.granted'] ? e : null; });
  t.match(ev['approval.requested'], {
    approval_id: id, connection_id: f.reg.connection_id, agent_id: f.agentId, cert_id: f.certId, scope: 'payments:send',
    action: { amount: '120.00', currency: 'USD', method: 'POST', path: '/v1/payments', bound: true }, expires_at: String,
  });
  t.match(ev['approval.granted'], { approval_id: id, expires_at: String });
});

t.test('denial with a note', async (t) => {
  const p = payment('500.00');
  const r = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  const id = r.body.approval_id as string;
  expectError(t, await f.user.post(`/v1/service/approvals/${id}/deny`, { note: 'no\u0000pe' }), 400, 'invalid_request', 'a control character in the note');
  const denied = await f.user.post(`/v1/service/approvals/${id}/deny`, { note: '  Too much for one payment.  ' });
  t.equal(denied.status, 200, denied.text);
  t.match(denied.body, { state: 'denied', note: 'Too much for one payment.' });
  expectError(t, await f.user.post(`/v1/service/approvals/${id}/approve`), 409, 'approval_not_pending', 'approving a denied one');
  const after = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  expectDecision(t, after, 'deny', 'approval_denied', undefined, 'verify after the denial');
  t.equal(after.body.approval_id, id);
  t.match((await f.platform.get(`/v1/service/approvals/${id}/status`)).body, { state: 'denied', note: 'Too much for one payment.' });
  const ev = await waitFor('approval.denied', 10_000, () => eventsOf(id)['approval.denied']);
  t.equal(ev.note, 'Too much for one payment.');
  const empty = await verify(f.platform, await bundleFor(f), 'payments:send', payment('501.00').context);
  const d2 = await f.user.post(`/v1/service/approvals/${empty.body.approval_id}/deny`);
  t.match(d2.body, { state: 'denied', note: null }, 'deny without a body');
});

t.test('a concurrent double use: exactly one allow', async (t) => {
  const p = payment('250.00');
  const id = (await verify(f.platform, await bundleFor(f), 'payments:send', p.context)).body.approval_id as string;
  t.equal((await f.user.post(`/v1/service/approvals/${id}/approve`)).status, 200);
  const bundles = [];
  for (let i = 0; i < 12; i++) bundles.push(await bundleFor(f));
  const rs = await Promise.all(bundles.map((b) => verify(f.platform, b, 'payments:send', p.context)));
  t.equal(rs.filter((r) => r.body?.decision === 'allow').length, 1, 'one allow');
  t.equal(rs.filter((r) => r.body?.decision_reason === 'approval_used' && r.body.approval_id === id).length, 11, 'the others: approval_used');
  t.equal(rs.filter((r) => r.status !== 200).length, 0, 'no errors');
});

t.test('concurrent first verifies of one operation create one approval', async (t) => {
  const p = payment('333.00');
  const bundles = [];
  for (let i = 0; i < 8; i++) bundles.push(await bundleFor(f));
  const rs = await Promise.all(bundles.map((b) => verify(f.platform, b, 'payments:send', p.context)));
  const ids = new Set(rs.map((r) => r.body?.approval_id));
  t.equal(ids.size, 1, 'one approval_id');
  t.ok(rs.every((r) => r.body?.decision_reason === 'approval_required'));
  const [id] = [...ids] as string[];
  const listed = (await f.user.get('/v1/service/approvals?state=pending&limit=200')).body.approvals.filter((a: { approval_id: string }) => a.approval_id === id);
  t.equal(listed.length, 1);
  await waitFor('approval.requested', 10_000, () => eventsOf(id!)['approval.requested']);
  t.equal(rx.events.filter((e) => e.event === 'approval.requested' && (e as unknown as { approval_id: string }).approval_id === id).length, 1, 'one webhook');
});

t.test('access: other accounts, CSRF, other API keys', async (t) => {
  const p = payment('150.00');
  const id = (await verify(f.platform, await bundleFor(f), 'payments:send', p.context)).body.approval_id as string;
  const stranger = await specFlow(sc, 'stranger@example.com', { approve: ['payments:send'] });
  expectError(t, await stranger.user.get(`/v1/service/approvals/${id}`), 404, 'approval_not_found', 'another account reads');
  expectError(t, await stranger.user.post(`/v1/service/approvals/${id}/approve`), 404, 'approval_not_found', 'another account approves');
  expectError(t, await stranger.platform.get(`/v1/service/approvals/${id}/status`), 404, 'approval_not_found', 'another platform polls');
  expectError(t, await f.user.post(`/v1/service/approvals/${id}/approve`, undefined, { csrf: false }), 403, 'csrf_required', 'no CSRF');
  expectError(t, await new Client(sc.url).get(`/v1/service/approvals/${id}/status`), 401, 'invalid_api_key', 'no key');
  expectError(t, await f.user.get('/v1/service/approvals?state=nope'), 400, 'invalid_request', 'unknown state');
  t.equal((await getApproval(f.user, id)).state, 'pending', 'unchanged');
});

t.test('every approval webhook was signed and verified by the receiver', async (t) => {
  await waitFor('the approval events delivered', 10_000, () => rx.hits.filter((h) => String(h.body.event).startsWith('approval.') && h.answer === 204).length >= 6);
  const hits = rx.hits.filter((h) => String(h.body.event).startsWith('approval.') && h.answer === 204);
  for (const h of hits) t.same(transportProblems(h, f.reg.webhook_signing_secret, sc.clock.t), [], `${String(h.body.event)} ${String(h.body.delivery_id)}: signed`);
  t.ok(rx.events.some((e) => e.event === 'approval.denied'), 'the library accepted approval.denied');
});
