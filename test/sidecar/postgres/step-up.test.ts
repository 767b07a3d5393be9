/**
 * Step-up approvals, budgets and rate limits (issue 23) with three sidecar
 * processes (A, B, C) on one real PostgreSQL database.
 *
 * - Budget: exactly N payments of 1.00 in a daily budget of N.00; 3N
 *   concurrent verifies spread over the three replicas (and their presents
 *   too) give exactly N allows and 2N `budget_exceeded`.
 * - Rate limit: `max_calls` of N an hour, 3N concurrent verifies: exactly N
 *   allows and 2N `rate_exceeded`.
 * - The usage read is the same on every replica and agrees with the audit
 *   (the sums of the allows' `budget_debit` and `calls_debit`; the denies
 *   debit nothing).
 * - An approval requested through A, granted through the account holder's
 *   session on B, used exactly once on C; a second use on A is
 *   `approval_used`; a concurrent double use over the three replicas gives
 *   exactly one allow. Each step is one audit row, and the webhooks
 *   (`approval.requested`, `approval.granted`) reach a real receiver once each.
 */
import t from 'tap';
import type { Test } from 'tap';
import { specFlow } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { startPostgres } from '../../helpers/postgres.js';
import { auditAll, challenge, expectDecision, verify } from '../decide/helpers.js';
import type { Bundle } from '../decide/helpers.js';
import { getApproval, opOf, payment } from '../approvals/helpers.js';
import { startLibraryReceiver } from '../webhooks/fixtures/library-receiver.js';
import { waitFor } from '../webhooks/fixtures/hooks.js';
import { newReplicaGroup, platformOn, sameSession, startReplicas } from './replicas.js';
import type { Replica } from './replicas.js';

t.setTimeout(240_000);
const N = 10;

/** Waits (bounded by the margin) until the current UTC window of `periodMs` has at least `marginMs` left, so a burst stays in one window. */
async function inOneWindow(periodMs: number, marginMs: number): Promise<void> {
  const left = periodMs - (Date.now() % periodMs);
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 50));
}

const pgc = await startPostgres(t);
if (pgc) {
  const all = await startReplicas(t, await newReplicaGroup(t, pgc), 3);
  const [A, B, C] = all as [Replica, Replica, Replica];

  /** A bundle whose challenge comes from replica `i % 3` and whose present goes to the next one; `operation` binds it. */
  const bundleVia = async (f: Flow, i: number, operation?: Record<string, string>): Promise<Bundle> => {
    const ch = await challenge(platformOn(all[i % 3]!, f.reg.api_key));
    const pr = await platformOn(all[(i + 1) % 3]!, f.reg.api_key).post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`,
      { challenge: ch, ...(operation ? { operation } : {}) });
    if (pr.status !== 200) throw new Error(`present: ${pr.status} ${pr.text}`);
    return pr.body.proof_bundle as Bundle;
  };
  /** The usage read of the flow's certificate on every replica (the account holder's session); asserts they agree. */
  const usageEverywhere = async (t: Test, f: Flow): Promise<any> => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const reads = await Promise.all(all.map((r) => sameSession(f.user, r).get(`/v1/service/delegations/${f.certId}/usage`)));
    t.same(reads.map((r) => r.status), [200, 200, 200], 'the usage read answers on A, B and C');
    t.same(reads[1]!.body, reads[0]!.body, 'B reads what A reads');
    t.same(reads[2]!.body, reads[0]!.body, 'C reads what A reads');
    return reads[0]!.body;
  };

  await t.test(`budget: N = ${N} payments of 1.00, 3N concurrent verifies over three replicas: exactly N allows`, async (t) => {
    await inOneWindow(86_400_000, 60_000);
    const f = await specFlow(A.sc, 'budget@example.com', { approve: ['payments:send'], constraints: { budget: { amount: `${N}.00`, currency: 'USD', period: 'day' } } });
    const bundles = await Promise.all(Array.from({ length: 3 * N }, (_, i) => bundleVia(f, i)));
    const rs = await Promise.all(bundles.map((b, i) => verify(platformOn(all[(i + 2) % 3]!, f.reg.api_key), b, 'payments:send', payment('1.00', { to: `acct_${i}` }).context)));
    t.equal(rs.filter((r) => r.status !== 200).length, 0, 'no errors');
    t.equal(rs.filter((r) => r.body?.decision === 'allow').length, N, `exactly ${N} allows`);
    t.equal(rs.filter((r) => r.body?.decision === 'deny' && r.body?.decision_reason === 'budget_exceeded').length, 2 * N, `${2 * N} deny budget_exceeded`);
    t.same([0, 1, 2].map((k) => rs.filter((r, i) => i % 3 === k && r.status === 200).length), [N, N, N], 'each replica answered its third (10 each)');
    const day = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000).toISOString();
    const u = await usageEverywhere(t, f);
    t.match(u.budget, { amount: `${N}.00`, currency: 'USD', period: 'day', window_start: day, spent: `${N}.00`, left: '0.00', spent_micros: N * 1_000_000, left_micros: 0 });
    const allows = (await auditAll(f.user, 'event_type=proof.verified')).filter((e) => e.cert_id === f.certId);
    t.equal(allows.length, N, `${N} proof.verified rows`);
    t.equal(allows.reduce((n, e) => n + Math.round(Number((e.details.budget_debit as { amount: string }).amount) * 1_000_000), 0), u.budget.spent_micros,
      'the usage read agrees with the audit: the allows\' budget_debit add up to what is spent');
    const denies = (await auditAll(f.user, 'event_type=proof.rejected')).filter((e) => e.cert_id === f.certId);
    t.equal(denies.length, 2 * N, `${2 * N} proof.rejected rows`);
    t.ok(denies.every((e) => e.details.budget_debit === undefined && e.details.decision_reason === 'budget_exceeded'), 'the denies debit nothing');
  });

  await t.test(`rate limit: max_calls ${N} an hour, 3N concurrent verifies over three replicas: exactly N allows`, async (t) => {
    await inOneWindow(3_600_000, 30_000);
    const f = await specFlow(B.sc, 'rate@example.com', { approve: ['data:read'], constraints: { max_calls: { count: N, period: 'hour' } } });
    const bundles = await Promise.all(Array.from({ length: 3 * N }, (_, i) => bundleVia(f, i)));
    const rs = await Promise.all(bundles.map((b, i) => verify(platformOn(all[(i + 2) % 3]!, f.reg.api_key), b, 'data:read', { method: 'GET' })));
    t.equal(rs.filter((r) => r.status !== 200).length, 0, 'no errors');
    t.equal(rs.filter((r) => r.body?.decision === 'allow').length, N, `exactly ${N} allows`);
    t.equal(rs.filter((r) => r.body?.decision_reason === 'rate_exceeded').length, 2 * N, `${2 * N} deny rate_exceeded`);
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString();
    const u = await usageEverywhere(t, f);
    t.match(u.max_calls, { count: N, period: 'hour', window_start: hour, used: N, left: 0 });
    const allows = (await auditAll(f.user, 'event_type=proof.verified')).filter((e) => e.cert_id === f.certId);
    t.equal(allows.reduce((n, e) => n + (e.details.calls_debit as { count: number }).count, 0), u.max_calls.used, 'the usage read agrees with the audit (calls_debit)');
  });

  await t.test('an approval requested on A, granted on B, used exactly once on C; webhooks once each', async (t) => {
    const rx = await startLibraryReceiver();
    t.teardown(() => rx.close());
    const f = await specFlow(A.sc, 'approvals@example.com', {
      approve: ['payments:send'], constraints: { require_approval: { scopes: ['payments:send'], above: { amount: '100.00', currency: 'USD' } } },
    });
    rx.useSecret(f.reg.webhook_signing_secret);
    const cb = await f.user.req('PUT', `/v1/service/platforms/${f.reg.platform_id}/callback`, { callback_url: rx.url });
    t.equal(cb.status, 200, cb.text);
    const p = payment('120.00');
    const op = opOf(p.context, 'payments:send');
    const onA = platformOn(A, f.reg.api_key);
    const first = await verify(onA, await bundleVia(f, 0, op), 'payments:send', p.context);
    expectDecision(t, first, 'deny', 'approval_required', undefined, 'requested on A');
    const id = first.body.approval_id as string;
    const pendingOnC = await verify(platformOn(C, f.reg.api_key), await bundleVia(f, 1, op), 'payments:send', p.context);
    expectDecision(t, pendingOnC, 'deny', 'approval_required', undefined, 'while pending, on C');
    t.equal(pendingOnC.body.approval_id, id, 'C finds the same pending approval');

    const onB = sameSession(f.user, B);
    t.match(await getApproval(onB, id), { state: 'pending', summary: 'payments:send 120.00 USD: POST /v1/payments' }, 'B shows it in human terms');
    const granted = await onB.post(`/v1/service/approvals/${id}/approve`);
    t.equal(granted.status, 200, granted.text);
    t.equal(granted.body.state, 'granted', 'granted through the session API on B');
    t.equal((await platformOn(C, f.reg.api_key).get(`/v1/service/approvals/${id}/status`)).body.state, 'granted', 'the platform polls it on C');

    const other = payment('121.00');
    expectDecision(t, await verify(platformOn(C, f.reg.api_key), await bundleVia(f, 2, opOf(other.context, 'payments:send')), 'payments:send', other.context),
      'deny', 'approval_required', undefined, 'another amount on C cannot use it');
    const used = await verify(platformOn(C, f.reg.api_key), await bundleVia(f, 0, op), 'payments:send', p.context);
    expectDecision(t, used, 'allow', 'authorized', undefined, 'the retry on C');
    t.equal(used.body.approval_id, id, 'the allow names the approval');
    const again = await verify(onA, await bundleVia(f, 1, op), 'payments:send', p.context);
    expectDecision(t, again, 'deny', 'approval_used', undefined, 'a second retry, on A');
    t.equal((await getApproval(sameSession(f.user, C), id)).state, 'used', 'used, as C reads it');

    for (const type of ['approval.requested', 'approval.granted']) {
      t.equal((await auditAll(f.user, `event_type=${type}`)).filter((e) => e.details.approval_id === id).length, 1, `one ${type} audit row`);
    }
    const delivered = await waitFor('approval.requested and approval.granted', 20_000, () => {
      const mine = rx.events.filter((e) => (e as unknown as { approval_id?: string }).approval_id === id).map((e) => e.event);
      return mine.includes('approval.requested') && mine.includes('approval.granted') ? mine : null;
    });
    await new Promise((r) => setTimeout(r, 500));
    t.same(rx.events.filter((e) => (e as unknown as { approval_id?: string }).approval_id === id).map((e) => e.event).sort(), ['approval.granted', 'approval.requested'],
      `each webhook received once (${delivered.join(', ')}), signed and checked by the receiver library`);
  });

  await t.test('a concurrent double use over three replicas: exactly one allow', async (t) => {
    const f = await specFlow(C.sc, 'double@example.com', {
      approve: ['payments:send'], constraints: { require_approval: { scopes: ['payments:send'], above: { amount: '100.00', currency: 'USD' } } },
    });
    const p = payment('250.00');
    const op = opOf(p.context, 'payments:send');
    const id = (await verify(platformOn(A, f.reg.api_key), await bundleVia(f, 0, op), 'payments:send', p.context)).body.approval_id as string;
    t.equal((await sameSession(f.user, B).post(`/v1/service/approvals/${id}/approve`)).status, 200, 'granted on B');
    const bundles = await Promise.all(Array.from({ length: 12 }, (_, i) => bundleVia(f, i, op)));
    const rs = await Promise.all(bundles.map((b, i) => verify(platformOn(all[(i + 2) % 3]!, f.reg.api_key), b, 'payments:send', p.context)));
    t.equal(rs.filter((r) => r.status !== 200).length, 0, 'no errors');
    t.equal(rs.filter((r) => r.body?.decision === 'allow').length, 1, 'exactly one allow');
    t.equal(rs.filter((r) => r.body?.decision_reason === 'approval_used' && r.body.approval_id === id).length, 11, 'the other 11: approval_used');
    const verified = (await auditAll(f.user, 'event_type=proof.verified')).filter((e) => e.details.approval_id === id);
    t.equal(verified.length, 1, 'one allow in the audit');
  });

  await t.test('no replica crashed', async (t) => {
    for (const r of all) t.equal(r.proc.exitCode, null, `${r.name} is running`);
  });
}
