/**
 * Store contract, the verify commit's rules as one table of cases. The rules
 * exist twice: in TypeScript for SQLite (sidecar/store/sqlite/proofs.ts) and in
 * PL/pgSQL for PostgreSQL's single round trip (`authz_commit_decision` and
 * `authz_decide`, postgres/migrations.ts). Every case runs on every engine
 * (the contract), and on each twice: as the usual commit, and with a new
 * pending approval requested too (PostgreSQL's other path, `authz_decide` and
 * then TypeScript), so one table holds both implementations of both paths to
 * the same result, the same order of checks, and the same footprint (a
 * refusal writes nothing; a commit debits, counts and appends exactly once).
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { ApprovalRecord, DecisionCommit, DecisionCommitResult, Store, UsageDebit } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, approved, audit, challenge, ev, seed, storeFor } from './contract-fixtures.js';
import type { Seeded } from './contract-fixtures.js';

const PRICE = 1_000;

/** What a case starts from: a seeded account with an approved certificate and a fresh challenge. */
interface Given { s: Store; x: Seeded; certId: string; challengeId: string }
/** One rule: the commit it makes (changes to the default allow) and the result it must give. */
interface Case { name: string; credits?: number; commit(g: Given): Promise<Partial<DecisionCommit>>; result: DecisionCommitResult }

function approval(g: Given, o: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    id: randomUUID(), accountId: g.x.accountId, connectionId: g.x.c.id, platformId: g.x.p.id, agentId: g.x.agentId, certId: g.certId,
    scope: 'payments:send', fingerprint: randomUUID().replace(/-/g, ''), context: {}, operation: null, state: 'pending', note: null,
    createdAt: NOW, expiresAt: NOW + 600_000, decidedAt: null, settledAt: null, ...o,
  };
}
const requested = (g: Given, a: ApprovalRecord) => ({
  approval: a, audit: audit(g.x, 'approval.requested', { details: { approval_id: a.id } }), event: ev(g.x.accountId, g.x.p.id, g.x.c.id, 'approval.requested'),
});
/** A granted approval of the certificate, usable until `until`. */
async function granted(g: Given, until = NOW + 1_000): Promise<string> {
  const a = approval(g);
  const ch = challenge(g.x);
  await g.s.proofs.insertChallenge(ch);
  await g.s.proofs.commitDecision({ challengeId: ch.id, audienceConnectionId: g.x.c.id, now: NOW + 5, accountId: g.x.accountId, priceMicros: 0,
    decision: 'deny', certId: null, audit: audit(g.x, 'proof.rejected'), effects: { requestApproval: requested(g, a) } });
  const change = { audit: audit(g.x, 'approval.granted'), event: ev(g.x.accountId, g.x.p.id, g.x.c.id, 'approval.granted') };
  await g.s.approvals.decideApproval(a.id, { state: 'granted', now: NOW + 10, grantExpiresAt: until, note: null }, change);
  return a.id;
}
const debit = (g: Given, o: Partial<UsageDebit> = {}): UsageDebit => ({ certId: g.certId, kind: 'budget', windowStart: NOW, amount: 10, limit: 100, ...o });

/** The rules, in the order the commit checks them. */
export const COMMIT_RULES: Case[] = [
  { name: 'an allow commits', commit: async () => ({}), result: 'committed' },
  { name: 'a deny commits', commit: async () => ({ decision: 'deny' }), result: 'committed' },
  { name: 'an allow with the certificate approved commits', commit: async (g) => ({ certId: g.certId }), result: 'committed' },
  { name: 'an allow of a revoked certificate: refused before anything else', credits: 0, commit: async (g) => {
    await g.s.delegations.revokeCertificate(g.certId, 'test', NOW + 2, null);
    return { certId: g.certId, challengeId: randomUUID() };
  }, result: 'certificate_revoked' },
  { name: 'a deny of a revoked certificate commits', commit: async (g) => {
    await g.s.delegations.revokeCertificate(g.certId, 'test', NOW + 2, null);
    return { certId: g.certId, decision: 'deny' };
  }, result: 'committed' },
  { name: 'an unknown challenge, before credits', credits: 0, commit: async () => ({ challengeId: randomUUID() }), result: 'invalid_challenge' },
  { name: 'a challenge of another audience', commit: async () => ({ audienceConnectionId: randomUUID() }), result: 'invalid_challenge' },
  { name: 'a challenge at its expiry', commit: async () => ({ now: NOW + 300_000 }), result: 'invalid_challenge' },
  { name: 'a challenge already consumed', commit: async (g) => {
    await g.s.proofs.consumeAndDebit(g.challengeId, g.x.c.id, NOW + 1, g.x.accountId, 0);
    return {};
  }, result: 'invalid_challenge' },
  { name: 'credits short of the price, before the effects', credits: PRICE - 1, commit: async () => ({ effects: { useApproval: randomUUID() } }),
    result: 'credits_exhausted' },
  { name: 'credits exactly the price commit', credits: PRICE, commit: async () => ({}), result: 'committed' },
  { name: 'a granted approval is spent', commit: async (g) => ({ effects: { useApproval: await granted(g) } }), result: 'committed' },
  { name: 'an unknown approval, before the debits', commit: async (g) => ({ effects: { useApproval: randomUUID(), debits: [debit(g, { amount: 101 })] } }),
    result: 'approval_used' },
  { name: 'an approval at its expiry', commit: async (g) => ({ effects: { useApproval: await granted(g, NOW + 20) } }), result: 'approval_used' },
  { name: 'debits within their limits commit', commit: async (g) => ({ effects: { debits: [debit(g), debit(g, { kind: 'calls', amount: 1, limit: 1 })] } }),
    result: 'committed' },
  { name: 'a budget debit past its limit', commit: async (g) => ({ effects: { debits: [debit(g, { amount: 101 })] } }), result: 'budget_exceeded' },
  { name: 'a call debit past its limit', commit: async (g) => ({ effects: { debits: [debit(g, { kind: 'calls', amount: 2, limit: 1 })] } }),
    result: 'rate_exceeded' },
  { name: 'a debit of nothing', commit: async (g) => ({ effects: { debits: [debit(g, { amount: 0 })] } }), result: 'budget_exceeded' },
];

/** Credits, calls, allows, denies, audit rows and outbox rows of the account. */
async function footprint(s: Store, x: Seeded): Promise<number[]> {
  const a = (await s.accounts.getAccount(x.accountId))!;
  return [a.creditsMicros, a.verifyCalls, a.verifyAllows, a.verifyDenies, (await s.proofs.listAudit({ accountId: x.accountId, limit: 500 })).length,
    (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 500 })).length];
}

/** Runs the table on `open`'s engine. */
export async function commitRulesContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);
  for (const withRequest of [false, true]) {
    for (const c of COMMIT_RULES) {
      await t.test(`${c.name}${withRequest ? ' (with a new approval requested)' : ''}`, async (t) => {
        const x = await seed(s, { credits: c.credits ?? 100 * PRICE });
        const cert = await approved(s, x);
        const ch = challenge(x);
        await s.proofs.insertChallenge(ch);
        const g: Given = { s, x, certId: cert.id, challengeId: ch.id };
        const o = await c.commit(g);
        const a = approval(g);
        const commit: DecisionCommit = {
          challengeId: ch.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: PRICE, decision: 'allow', certId: null,
          ...o, audit: audit(x, o.decision === 'deny' ? 'proof.rejected' : 'proof.verified'),
          ...(withRequest ? { effects: { ...o.effects, requestApproval: requested(g, a) } } : {}),
        };
        const before = await footprint(s, x);
        t.equal(await s.proofs.commitDecision(commit), c.result, 'the result');
        const after = await footprint(s, x);
        const d = after.map((v, i) => v - before[i]!);
        if (c.result !== 'committed') {
          t.same(d, [0, 0, 0, 0, 0, 0], 'a refusal writes nothing');
          if (withRequest) t.equal(await s.approvals.getApproval(a.id), undefined, 'nor the approval');
          return;
        }
        const allow = commit.decision === 'allow' ? 1 : 0;
        t.same(d, [-PRICE, 1, allow, 1 - allow, withRequest ? 2 : 1, withRequest ? 1 : 0], 'debited, counted and recorded once');
        if (withRequest) t.match(await s.approvals.getApproval(a.id), { state: 'pending' }, 'the approval is recorded');
      });
    }
  }
}
