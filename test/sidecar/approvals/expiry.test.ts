/**
 * Expiry of step-up approvals with the injectable clock (TestClock of
 * test/helpers/sidecar.ts), through the real sidecar and the receiver
 * library: a pending approval expires `SIDECAR_APPROVAL_TTL_SECONDS` after
 * it was requested, a granted one that long after its grant; both give
 * `approval_expired` (and refuse a late decision with 409), each with the
 * `approval.expired` audit row and signed webhook. Exactly at the boundary
 * the approval is expired; one millisecond before, it is not. One lifetime
 * after it settled, the same operation asks again.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, expectError, verify } from '../decide/helpers.js';
import { startLibraryReceiver } from '../webhooks/fixtures/library-receiver.js';
import type { LibraryReceiver } from '../webhooks/fixtures/library-receiver.js';
import { waitFor } from '../webhooks/fixtures/hooks.js';
import { expireApprovals } from '../../../sidecar/approvals/expiry.js';
import { getApproval, payment } from './helpers.js';

const TTL_MS = 60_000;
let sc: TestSidecar;
let rx: LibraryReceiver;
let f: Flow;

t.before(async () => {
  sc = await startSidecar({ approvalTtlSeconds: TTL_MS / 1000 }, { webhook: { pollIntervalMs: 50 } });
  sc.clock.t = Date.parse('2030-03-01T12:00:00.000Z');
  rx = await startLibraryReceiver(() => sc.clock.t);
  f = await specFlow(sc, 'expiry@example.com', { approve: ['payments:send'], constraints: { require_approval: { scopes: ['payments:send'] } } });
  rx.useSecret(f.reg.webhook_signing_secret);
  await f.user.req('PUT', `/v1/service/platforms/${f.reg.platform_id}/callback`, { callback_url: rx.url });
  t.teardown(async () => {
    await sc.close();
    await rx.close();
  });
});

/** The approval.expired event of `id`, once the receiver accepted it. */
const expiredEvent = (id: string): Promise<Record<string, unknown>> =>
  waitFor(`approval.expired of ${id}`, 10_000, () => rx.events.find((e) => e.event === 'approval.expired' && (e as unknown as { approval_id: string }).approval_id === id) as unknown as Record<string, unknown> | undefined);

t.test('a pending approval expires at its boundary', async (t) => {
  const p = payment('10.00');
  const id = (await verify(f.platform, await bundleFor(f), 'payments:send', p.context)).body.approval_id as string;
  const requestedAt = sc.clock.t;
  sc.clock.t = requestedAt + TTL_MS - 1;
  t.equal((await getApproval(f.user, id)).state, 'pending', 'one millisecond before: pending');
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'payments:send', p.context), 'deny', 'approval_required', undefined, 'still pending');
  sc.clock.t = requestedAt + TTL_MS;
  const a = await getApproval(f.user, id);
  t.match(a, { state: 'expired', settled_at: new Date(requestedAt + TTL_MS).toISOString() }, 'at the boundary: expired');
  expectError(t, await f.user.post(`/v1/service/approvals/${id}/approve`), 409, 'approval_not_pending', 'too late to approve');
  const r = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  expectDecision(t, r, 'deny', 'approval_expired', undefined, 'verify after expiry');
  t.equal(r.body.approval_id, id);
  t.match(await expiredEvent(id), { previous_state: 'pending', expired_at: new Date(requestedAt + TTL_MS).toISOString() });
  t.equal((await auditAll(f.user, 'event_type=approval.expired')).filter((e) => e.details.approval_id === id).length, 1, 'one audit row');

  // One lifetime after it settled, the same operation asks again (a new approval).
  sc.clock.t = requestedAt + 2 * TTL_MS - 1;
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'payments:send', p.context), 'deny', 'approval_expired', undefined, 'within a lifetime of settling');
  sc.clock.t = requestedAt + 2 * TTL_MS;
  const again = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  expectDecision(t, again, 'deny', 'approval_required', undefined, 'a lifetime after settling');
  t.not(again.body.approval_id, id, 'a new approval');
});

t.test('a granted approval lives one lifetime from its grant, and expires unused', async (t) => {
  const p = payment('20.00');
  const id = (await verify(f.platform, await bundleFor(f), 'payments:send', p.context)).body.approval_id as string;
  sc.clock.advance(TTL_MS - 1000);
  const grantedAt = sc.clock.t;
  t.equal((await f.user.post(`/v1/service/approvals/${id}/approve`)).status, 200, 'approved just before the request expired');
  t.equal((await getApproval(f.user, id)).expires_at, new Date(grantedAt + TTL_MS).toISOString(), 'usable one lifetime from the grant');
  sc.clock.t = grantedAt + TTL_MS;
  // No read in between: verify meets the due approval, expires it (with its webhook), then answers.
  const r = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  expectDecision(t, r, 'deny', 'approval_expired', undefined, 'unused until its end');
  t.equal(r.body.approval_id, id);
  t.match(await expiredEvent(id), { previous_state: 'granted' });
  t.equal((await f.platform.get(`/v1/service/approvals/${id}/status`)).body.state, 'expired');
});

t.test('a granted approval used just before its end allows', async (t) => {
  const p = payment('30.00');
  const id = (await verify(f.platform, await bundleFor(f), 'payments:send', p.context)).body.approval_id as string;
  t.equal((await f.user.post(`/v1/service/approvals/${id}/approve`)).status, 200);
  sc.clock.advance(TTL_MS - 1);
  const r = await verify(f.platform, await bundleFor(f), 'payments:send', p.context);
  expectDecision(t, r, 'allow', 'authorized', undefined, 'one millisecond before its end');
  t.equal(r.body.approval_id, id);
});

t.test('the expiry job settles due approvals without any read', async (t) => {
  const ids: string[] = [];
  for (const amount of ['41.00', '42.00', '43.00']) {
    ids.push((await verify(f.platform, await bundleFor(f), 'payments:send', payment(amount).context)).body.approval_id as string);
  }
  t.equal(await expireApprovals(sc.app.ctx), 0, 'nothing due yet');
  sc.clock.advance(TTL_MS);
  t.equal(await expireApprovals(sc.app.ctx), 3, 'the three, in one run');
  t.equal(await expireApprovals(sc.app.ctx), 0, 'idempotent');
  for (const id of ids) t.equal((await expiredEvent(id)).previous_state, 'pending');
});
