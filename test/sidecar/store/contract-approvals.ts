/**
 * Store contract, approvals and usage part (issue 23): a pending approval
 * recorded with a decision (one per certificate and fingerprint, also under
 * concurrency; a second writes nothing), grant and deny (once, not after
 * expiry), expiry with audit rows and outbox events (once each, also when
 * several run it at once and a grant races it), the lookup by
 * operation, listing; spending a granted approval exactly once under
 * concurrency; usage counters debited exactly, never past their limit, and
 * nothing written when any part of a decision fails.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { ApprovalChange, ApprovalRecord, DecisionCommit, Store, UsageDebit } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, approved, audit, challenge, count, ev, seed, storeFor, together, values } from './contract-fixtures.js';
import type { Seeded } from './contract-fixtures.js';

const PRICE = 1_000;

/** A pending approval of the seeded agent's certificate `certId`. */
function pending(x: Seeded, certId: string, o: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    id: randomUUID(), accountId: x.accountId, connectionId: x.c.id, platformId: x.p.id, agentId: x.agentId, certId, scope: 'payments:send',
    fingerprint: 'f'.repeat(64), context: { amount: '120.00', currency: 'USD', method: 'POST' }, operation: { method: 'POST', path: '/p', body_sha256: 'a'.repeat(64) },
    state: 'pending', note: null, createdAt: NOW, expiresAt: NOW + 600_000, decidedAt: null, settledAt: null, ...o,
  };
}
const change = (x: Seeded, a: ApprovalRecord, type: ApprovalChange['audit']['eventType']): ApprovalChange => ({
  audit: audit(x, type, { certId: a.certId, details: { approval_id: a.id } }), event: ev(x.accountId, x.p.id, x.c.id, type),
});

/** Commits a decision on a fresh challenge of `x`. */
async function decide(s: Store, x: Seeded, o: Partial<DecisionCommit>): Promise<string> {
  const ch = challenge(x);
  await s.proofs.insertChallenge(ch);
  return s.proofs.commitDecision({
    challengeId: ch.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: PRICE, decision: 'allow', certId: null,
    audit: audit(x, 'proof.verified'), ...o,
  });
}

/** Balance, audit rows and outbox rows of the seeded account: what a failed commit must leave alone. */
async function footprint(s: Store, x: Seeded): Promise<number[]> {
  return [(await s.accounts.getAccount(x.accountId))!.creditsMicros, (await s.proofs.listAudit({ accountId: x.accountId, limit: 500 })).length,
    (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 500 })).length];
}

/** Runs the approvals and usage part. */
export async function approvalsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('a pending approval is recorded with its decision, once per operation', async (t) => {
    const x = await seed(s, { credits: 100 * PRICE });
    const c = await approved(s, x);
    const a = pending(x, c.id);
    const req = change(x, a, 'approval.requested');
    const explained = (id: string) => ({ id, accountId: x.accountId, connectionId: x.c.id, explanation: { reason: 'approval_required' },
      createdAt: NOW + 20 });
    t.equal(await decide(s, x, { decision: 'deny', audit: audit(x, 'proof.rejected'), effects: { requestApproval: { approval: a, ...req } },
      explanation: explained('with-approval') }), 'committed');
    t.same(await s.decisions.getExplanation('with-approval'), explained('with-approval'), 'its explanation, in the same transaction');
    const read = await s.approvals.getApproval(a.id);
    t.same({ ...read, seq: undefined }, { ...a, seq: undefined }, 'read back as written');
    t.type(read!.seq, 'number');
    t.same(await s.approvals.findForOperation(c.id, a.fingerprint, 0), read, 'found by operation');
    t.equal(await s.approvals.findForOperation(c.id, 'e'.repeat(64), 0), undefined, 'another fingerprint');
    t.ok((await s.proofs.listAudit({ accountId: x.accountId, limit: 10, eventType: 'approval.requested' })).some((r) => r.id === req.audit.id), 'its audit row');
    t.ok(await s.outbox.getDelivery(req.event.id), 'its event');
    const before = await footprint(s, x);
    const dup = pending(x, c.id);
    const r = await decide(s, x, { decision: 'deny', audit: audit(x, 'proof.rejected'),
      effects: { requestApproval: { approval: dup, ...change(x, dup, 'approval.requested') } }, explanation: explained('dup') });
    t.equal(r, 'approval_exists', 'a second pending approval of the operation');
    t.equal(await s.decisions.getExplanation('dup'), undefined, 'and no explanation');
    t.same(await footprint(s, x), before, 'wrote nothing (no debit, audit or event)');
    t.equal(await s.approvals.getApproval(dup.id), undefined);
    const racers = Array.from({ length: 8 }, () => pending(x, c.id, { fingerprint: '9'.repeat(64) }));
    const rs = values(t, await together(8, (i) => decide(s, x, { decision: 'deny', audit: audit(x, 'proof.rejected'),
      effects: { requestApproval: { approval: racers[i]!, ...change(x, racers[i]!, 'approval.requested') } } })));
    t.equal(count(rs, 'committed'), 1, '8 concurrent requests of one operation: one approval');
    t.equal(count(rs, 'approval_exists'), 7);
  });

  await t.test('grant and deny: once, not after expiry, with audit and event', async (t) => {
    const x = await seed(s);
    const c = await approved(s, x);
    const [g, d, late] = [pending(x, c.id, { fingerprint: '1'.repeat(64) }), pending(x, c.id, { fingerprint: '2'.repeat(64) }), pending(x, c.id, { fingerprint: '3'.repeat(64), expiresAt: NOW + 100 })];
    for (const a of [g, d, late]) await decide(s, x, { decision: 'deny', audit: audit(x, 'proof.rejected'), effects: { requestApproval: { approval: a, ...change(x, a, 'approval.requested') } } });
    const gc = change(x, g, 'approval.granted');
    t.equal(await s.approvals.decideApproval(g.id, { state: 'granted', now: NOW + 50, grantExpiresAt: NOW + 9_000, note: null }, gc), true);
    t.match(await s.approvals.getApproval(g.id), { state: 'granted', decidedAt: NOW + 50, expiresAt: NOW + 9_000, settledAt: null });
    t.ok(await s.outbox.getDelivery(gc.event.id), 'the granted event');
    const again = change(x, g, 'approval.denied');
    t.equal(await s.approvals.decideApproval(g.id, { state: 'denied', now: NOW + 60, grantExpiresAt: 0, note: 'x' }, again), false, 'decided once');
    t.equal(await s.outbox.getDelivery(again.event.id), undefined, 'no event for a refused decision');
    t.equal(await s.approvals.decideApproval(d.id, { state: 'denied', now: NOW + 70, grantExpiresAt: NOW + 9_000, note: 'no' }, change(x, d, 'approval.denied')), true);
    t.match(await s.approvals.getApproval(d.id), { state: 'denied', note: 'no', decidedAt: NOW + 70, settledAt: NOW + 70, expiresAt: d.expiresAt });
    t.equal(await s.approvals.decideApproval(late.id, { state: 'granted', now: NOW + 100, grantExpiresAt: NOW + 9_000, note: null }, change(x, late, 'approval.granted')), false, 'at its expiry: too late');
    t.equal(await s.approvals.decideApproval(randomUUID(), { state: 'granted', now: NOW, grantExpiresAt: NOW, note: null }, change(x, late, 'approval.granted')), false, 'unknown');
    const listed = await s.approvals.listApprovals({ accountId: x.accountId, limit: 10 });
    t.same(listed.map((a) => a.id), [late.id, d.id, g.id], 'newest first');
    t.same((await s.approvals.listApprovals({ accountId: x.accountId, limit: 10, state: 'denied' })).map((a) => a.id), [d.id], 'by state');
    t.same((await s.approvals.listApprovals({ accountId: x.accountId, limit: 10, before: listed[0]!.seq! })).map((a) => a.id), [d.id, g.id], 'cursor');
    t.same(await s.approvals.listApprovals({ accountId: randomUUID(), limit: 10 }), [], 'another account');
  });

  await t.test('a granted approval is spent exactly once', async (t) => {
    const x = await seed(s, { credits: 100 * PRICE });
    const c = await approved(s, x);
    const a = pending(x, c.id, { fingerprint: '4'.repeat(64) });
    await decide(s, x, { decision: 'deny', audit: audit(x, 'proof.rejected'), effects: { requestApproval: { approval: a, ...change(x, a, 'approval.requested') } } });
    await s.approvals.decideApproval(a.id, { state: 'granted', now: NOW + 10, grantExpiresAt: NOW + 1_000, note: null }, change(x, a, 'approval.granted'));
    const before = await footprint(s, x);
    const rs = values(t, await together(10, () => decide(s, x, { certId: c.id, effects: { useApproval: a.id } })));
    t.equal(count(rs, 'committed'), 1, '10 concurrent uses: one');
    t.equal(count(rs, 'approval_used'), 9);
    const after = await footprint(s, x);
    t.same([before[0]! - after[0]!, after[1]! - before[1]!], [PRICE, 1], 'only the one use was debited and recorded');
    t.match(await s.approvals.getApproval(a.id), { state: 'used', settledAt: NOW + 20 });
    t.same(await s.approvals.findForOperation(c.id, a.fingerprint, NOW + 19), await s.approvals.getApproval(a.id), 'settled after the cut-off: found');
    t.equal(await s.approvals.findForOperation(c.id, a.fingerprint, NOW + 20), undefined, 'settled at or before the cut-off: not');
    const b = pending(x, c.id, { fingerprint: '5'.repeat(64) });
    await decide(s, x, { decision: 'deny', audit: audit(x, 'proof.rejected'), effects: { requestApproval: { approval: b, ...change(x, b, 'approval.requested') } } });
    await s.approvals.decideApproval(b.id, { state: 'granted', now: NOW + 10, grantExpiresAt: NOW + 20, note: null }, change(x, b, 'approval.granted'));
    t.equal(await decide(s, x, { certId: c.id, effects: { useApproval: b.id } }), 'approval_used', 'at its expiry it cannot be used');
    t.equal(await decide(s, x, { certId: c.id, effects: { useApproval: randomUUID() } }), 'approval_used', 'an unknown approval');
  });

  await t.test('expireDue: pending and granted approvals past their time, with audit and event', async (t) => {
    const fresh = await storeFor(t, open);
    const x = await seed(fresh);
    const c = await approved(fresh, x);
    const [p1, p2, g, live] = ['6', '7', '8', '0'].map((d, i) => pending(x, c.id, { fingerprint: d.repeat(64), expiresAt: NOW + 100 + i }));
    for (const a of [p1!, p2!, g!, live!]) {
      await decide(fresh, x, { decision: 'deny', audit: audit(x, 'proof.rejected'), effects: { requestApproval: { approval: a, ...change(x, a, 'approval.requested') } } });
    }
    await fresh.approvals.decideApproval(g!.id, { state: 'granted', now: NOW + 50, grantExpiresAt: NOW + 102, note: null }, change(x, g!, 'approval.granted'));
    const events: string[] = [];
    const build = (a: ApprovalRecord): ApprovalChange => { const ch = change(x, a, 'approval.expired'); events.push(ch.event.id); return ch; };
    const first = await fresh.approvals.expireDue(NOW + 102, 2, build);
    t.same(first.map((a) => [a.id, a.state]), [[p1!.id, 'pending'], [p2!.id, 'pending']], 'the limit, oldest expiry first, as they were');
    const second = await fresh.approvals.expireDue(NOW + 102, 10, build);
    t.same(second.map((a) => [a.id, a.state]), [[g!.id, 'granted']]);
    t.same(await fresh.approvals.expireDue(NOW + 102, 10, build), [], 'nothing left due');
    t.match(await fresh.approvals.getApproval(g!.id), { state: 'expired', settledAt: NOW + 102 });
    t.match(await fresh.approvals.getApproval(live!.id), { state: 'pending' }, 'not due yet');
    for (const id of events) t.ok(await fresh.outbox.getDelivery(id), 'an event per expiry');
    t.equal((await fresh.proofs.listAudit({ accountId: x.accountId, limit: 50, eventType: 'approval.expired' })).length, 3);
  });

  await t.test('expireDue run by several at once (replicas): each approval expires once; a grant racing it wins or loses whole', async (t) => {
    const fresh = await storeFor(t, open);
    const x = await seed(fresh);
    const c = await approved(fresh, x);
    const due = Array.from({ length: 6 }, (_, i) => pending(x, c.id, { fingerprint: i.toString(16).repeat(64), expiresAt: NOW + 100 }));
    for (const a of due) {
      await decide(fresh, x, { decision: 'deny', audit: audit(x, 'proof.rejected'), effects: { requestApproval: { approval: a, ...change(x, a, 'approval.requested') } } });
    }
    const build = (a: ApprovalRecord): ApprovalChange => change(x, a, 'approval.expired');
    const [grant, ...expiries] = await Promise.all([
      fresh.approvals.decideApproval(due[0]!.id, { state: 'granted', now: NOW + 99, grantExpiresAt: NOW + 500, note: null }, change(x, due[0]!, 'approval.granted')),
      ...Array.from({ length: 4 }, () => fresh.approvals.expireDue(NOW + 200, 3, build)),
    ]) as [boolean, ...ApprovalRecord[][]];
    const expired = expiries.flat().map((a) => a.id);
    t.equal(new Set(expired).size, expired.length, 'no approval expired twice');
    t.same(expired.sort(), due.slice(grant ? 1 : 0).map((a) => a.id).sort(), `every due one expired once (the grant ${grant ? 'won' : 'lost'})`);
    t.same(await fresh.approvals.expireDue(NOW + 200, 10, build), [], 'nothing left due');
    t.match(await fresh.approvals.getApproval(due[0]!.id), { state: grant ? 'granted' : 'expired' });
    t.equal((await fresh.proofs.listAudit({ accountId: x.accountId, limit: 50, eventType: 'approval.expired' })).length, expired.length, 'one audit row per expiry');
  });

  await t.test('usage counters: exact debits, never past the limit, nothing written on failure', async (t) => {
    const x = await seed(s, { credits: 1000 * PRICE });
    const c = await approved(s, x);
    const debit = (o: Partial<UsageDebit> = {}): UsageDebit => ({ certId: c.id, kind: 'budget', windowStart: NOW, amount: 1_000_000, limit: 5_000_000, ...o });
    t.equal(await decide(s, x, { certId: c.id, effects: { debits: [debit({ amount: 3_000_000 }), debit({ kind: 'calls', amount: 1, limit: 10 })] } }), 'committed');
    t.same(await s.usage.usage(c.id, [{ kind: 'budget', windowStart: NOW }, { kind: 'calls', windowStart: NOW }, { kind: 'budget', windowStart: NOW + 1 }]), [3_000_000, 1, 0]);
    const before = await footprint(s, x);
    t.equal(await decide(s, x, { certId: c.id, effects: { debits: [debit({ kind: 'calls', amount: 1, limit: 10 }), debit({ amount: 2_000_001 })] } }), 'budget_exceeded', 'one micro-unit over');
    t.equal(await decide(s, x, { certId: c.id, effects: { debits: [debit({ kind: 'calls', amount: 1, limit: 1 })] } }), 'rate_exceeded');
    t.equal(await decide(s, x, { certId: c.id, effects: { debits: [debit({ windowStart: NOW + 86_400_000, amount: 5_000_001 })] } }), 'budget_exceeded', 'alone above the limit');
    t.same(await footprint(s, x), before, 'the failed commits wrote nothing');
    t.same(await s.usage.usage(c.id, [{ kind: 'budget', windowStart: NOW }, { kind: 'calls', windowStart: NOW }]), [3_000_000, 1], 'counters unchanged');
    const rs = values(t, await together(12, () => decide(s, x, { certId: c.id, effects: { debits: [debit({ windowStart: NOW + 7 }), debit({ kind: 'calls', windowStart: NOW + 7, amount: 1, limit: 100 })] } })));
    t.equal(count(rs, 'committed'), 5, '12 concurrent debits of 1 against 5: five');
    t.equal(count(rs, 'budget_exceeded'), 7);
    t.same(await s.usage.usage(c.id, [{ kind: 'budget', windowStart: NOW + 7 }, { kind: 'calls', windowStart: NOW + 7 }]), [5_000_000, 5], 'the call counter moved only with the committed ones');
  });
}
