/**
 * Store contract, proofs part: challenges and presentation (claimed once,
 * before signing; then its audit row), the verify commit (consume + debit + count + audit in one
 * transaction, or nothing; the certificate re-read for an allow), metering of
 * refused calls, exact single use and exact credits under concurrency, a
 * revocation racing allows, audit reads, and the challenge purge.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { DecisionCommit, Store } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, approved, audit, challenge, count, seed, storeFor, together, values } from './contract-fixtures.js';
import type { Seeded } from './contract-fixtures.js';

const PRICE = 1_000;

const commit = (x: Seeded, challengeId: string, o: Partial<DecisionCommit> = {}): DecisionCommit => ({
  challengeId, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: PRICE, decision: 'allow', certId: null,
  audit: audit(x, 'proof.verified'), ...o,
});

/** The account's metering state. */
async function meter(s: Store, x: Seeded): Promise<number[]> {
  const a = await s.accounts.getAccount(x.accountId);
  return [a!.creditsMicros, a!.verifyCalls, a!.verifyAllows, a!.verifyDenies];
}

/** Runs the proofs part. */
export async function proofsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('challenges and presentation', async (t) => {
    const x = await seed(s);
    const ch = challenge(x);
    await s.proofs.insertChallenge(ch);
    t.same(await s.proofs.getChallenge(ch.id), ch);
    t.equal(await s.proofs.getChallenge('f'.repeat(64)), undefined);
    await t.rejects(s.proofs.insertChallenge(ch), 'a duplicate challenge is refused');
    const claims = values(t, await together(10, () => s.proofs.claimChallenge(ch.id, x.c.id, NOW + 5)));
    t.equal(claims.filter((c) => c !== undefined).length, 1, '10 concurrent claims: one');
    t.same(claims.find((c) => c !== undefined), { ...ch, presentedAt: NOW + 5 }, 'the winner gets the challenge, marked presented');
    t.equal((await s.proofs.getChallenge(ch.id))?.presentedAt, NOW + 5);
    t.equal(await s.proofs.claimChallenge(ch.id, x.c.id, NOW + 6), undefined, 'a claimed challenge cannot be claimed again');
    t.same(await s.proofs.listAudit({ accountId: x.accountId, limit: 50, eventType: 'proof.presented' }), [], 'a claim writes no audit row');
    const a = audit(x, 'proof.presented');
    await s.proofs.recordPresentation(a);
    const written = await s.proofs.listAudit({ accountId: x.accountId, limit: 50, eventType: 'proof.presented' });
    t.same(written.map(({ seq: _s, ...r }) => r), [a], 'the presentation row as written');
    await t.rejects(s.proofs.recordPresentation({ ...a }), 'a row that cannot be written rejects');
    t.equal((await s.proofs.listAudit({ accountId: x.accountId, limit: 50, eventType: 'proof.presented' })).length, 1, 'and writes nothing');

    const other = challenge(x);
    await s.proofs.insertChallenge(other);
    t.equal(await s.proofs.claimChallenge(other.id, randomUUID(), NOW + 5), undefined, 'another audience');
    t.equal((await s.proofs.getChallenge(other.id))?.presentedAt, null, 'is refused without claiming it');
    const expired = challenge(x, { expiresAt: NOW + 5 });
    await s.proofs.insertChallenge(expired);
    t.equal(await s.proofs.claimChallenge(expired.id, x.c.id, NOW + 5), undefined, 'expired');
    t.equal(await s.proofs.claimChallenge(randomUUID(), x.c.id, NOW), undefined, 'unknown');
    const spent = challenge(x);
    await s.proofs.insertChallenge(spent);
    t.equal(await s.proofs.commitDecision(commit(x, spent.id)), 'committed');
    t.equal(await s.proofs.claimChallenge(spent.id, x.c.id, NOW + 30), undefined, 'consumed');
    // A claimed challenge is still the verify's to consume (present, then verify).
    const claimed = challenge(x);
    await s.proofs.insertChallenge(claimed);
    t.ok(await s.proofs.claimChallenge(claimed.id, x.c.id, NOW + 5));
    t.equal(await s.proofs.commitDecision(commit(x, claimed.id)), 'committed', 'a claimed challenge is consumed by verify');
  });

  await t.test('commitDecision: one transaction; every refusal writes nothing', async (t) => {
    const x = await seed(s, { credits: 10 * PRICE });
    const c = await approved(s, x);
    const ch = challenge(x);
    await s.proofs.insertChallenge(ch);
    const a = audit(x, 'proof.verified', { certId: c.id });
    t.equal(await s.proofs.commitDecision(commit(x, ch.id, { certId: c.id, audit: a })), 'committed');
    t.same(await meter(s, x), [9 * PRICE, 1, 1, 0], 'debited and counted as an allow');
    t.equal((await s.proofs.getChallenge(ch.id))?.consumedAt, NOW + 20, 'consumed');
    t.same((await s.proofs.listAudit({ accountId: x.accountId, limit: 10 }))[0], { ...a, seq: (await s.proofs.listAudit({ accountId: x.accountId, limit: 1 }))[0]!.seq });
    t.equal(await s.proofs.creditsOf(x.accountId), 9 * PRICE);
    t.equal(await s.proofs.creditsOf(randomUUID()), 0, 'an unknown account has none');
    const before = await meter(s, x);
    const auditCount = (await s.proofs.listAudit({ accountId: x.accountId, limit: 100 })).length;
    const unchanged = async (what: string): Promise<void> => {
      t.same(await meter(s, x), before, `${what}: balance and counters unchanged`);
      t.equal((await s.proofs.listAudit({ accountId: x.accountId, limit: 100 })).length, auditCount, `${what}: no audit row`);
    };
    t.equal(await s.proofs.commitDecision(commit(x, ch.id)), 'invalid_challenge', 'replay');
    await unchanged('replay');
    const other = challenge(x);
    await s.proofs.insertChallenge(other);
    t.equal(await s.proofs.commitDecision(commit(x, other.id, { audienceConnectionId: randomUUID() })), 'invalid_challenge', 'another audience');
    t.equal(await s.proofs.commitDecision(commit(x, other.id, { now: other.expiresAt })), 'invalid_challenge', 'expired');
    t.equal(await s.proofs.commitDecision(commit(x, randomUUID())), 'invalid_challenge', 'unknown');
    await unchanged('bad challenges');
    // The audit id is taken: the challenge stays unconsumed and nothing is debited.
    await t.rejects(s.proofs.commitDecision(commit(x, other.id, { audit: { ...a } })));
    await unchanged('failed audit write');
    t.equal((await s.proofs.getChallenge(other.id))?.consumedAt, null, 'challenge not consumed by the failed commit');
    // Revoked: an allow commits nothing; a deny still commits.
    await s.delegations.revokeCertificate(c.id, 'r', NOW + 21, null);
    t.equal(await s.proofs.commitDecision(commit(x, other.id, { certId: c.id })), 'certificate_revoked');
    await unchanged('revoked certificate');
    t.equal((await s.proofs.getChallenge(other.id))?.consumedAt, null);
    t.equal(await s.proofs.commitDecision(commit(x, other.id, { certId: c.id, decision: 'deny', audit: audit(x, 'proof.rejected') })), 'committed', 'a deny commits');
    t.same(await meter(s, x), [8 * PRICE, 2, 1, 1], 'counted as a deny');
    // Out of credits: nothing consumed.
    const poor = await seed(s, { credits: PRICE - 1 });
    const pc = challenge(poor);
    await s.proofs.insertChallenge(pc);
    t.equal(await s.proofs.commitDecision(commit(poor, pc.id)), 'credits_exhausted');
    t.equal((await s.proofs.getChallenge(pc.id))?.consumedAt, null, 'challenge kept');
    t.same(await meter(s, poor), [PRICE - 1, 0, 0, 0]);
  });

  await t.test('consumeAndDebit: metering without an audit row', async (t) => {
    const x = await seed(s, { credits: 3 * PRICE });
    const ch = challenge(x);
    await s.proofs.insertChallenge(ch);
    t.equal(await s.proofs.consumeAndDebit(ch.id, x.c.id, NOW + 20, x.accountId, PRICE), 'committed');
    t.equal(await s.proofs.consumeAndDebit(ch.id, x.c.id, NOW + 21, x.accountId, PRICE), 'invalid_challenge');
    t.equal(await s.proofs.consumeAndDebit(null, x.c.id, NOW + 22, x.accountId, PRICE), 'committed', 'no challenge to consume');
    t.same(await meter(s, x), [PRICE, 2, 0, 0], 'calls counted, neither allows nor denies');
    t.same(await s.proofs.listAudit({ accountId: x.accountId, limit: 10 }), []);
    t.equal(await s.proofs.consumeAndDebit(null, x.c.id, NOW + 23, x.accountId, 2 * PRICE), 'credits_exhausted');
    const c2 = challenge(x);
    await s.proofs.insertChallenge(c2);
    t.equal(await s.proofs.consumeAndDebit(c2.id, x.c.id, NOW + 24, x.accountId, 2 * PRICE), 'credits_exhausted');
    t.equal((await s.proofs.getChallenge(c2.id))?.consumedAt, null, 'not consumed without the debit');
  });

  await t.test('exact under concurrency: one use per challenge, N uses for N credits', async (t) => {
    const x = await seed(s, { credits: 100 * PRICE });
    const ch = challenge(x);
    await s.proofs.insertChallenge(ch);
    const once = values(t, await together(30, () => s.proofs.commitDecision(commit(x, ch.id, { audit: audit(x, 'proof.verified') }))));
    t.equal(count(once, 'committed'), 1, '30 concurrent commits of one challenge: one');
    t.equal(count(once, 'invalid_challenge'), 29);
    t.same(await meter(s, x), [99 * PRICE, 1, 1, 0]);

    const n = 7;
    const poor = await seed(s, { credits: n * PRICE });
    const chs = Array.from({ length: 3 * n }, () => challenge(poor));
    for (const c of chs) await s.proofs.insertChallenge(c);
    const rs = values(t, await together(3 * n, (i) => s.proofs.commitDecision(commit(poor, chs[i]!.id, { audit: audit(poor, 'proof.verified') }))));
    t.equal(count(rs, 'committed'), n, `${3 * n} concurrent commits for ${n} credits: ${n} committed`);
    t.equal(count(rs, 'credits_exhausted'), 2 * n);
    t.same(await meter(s, poor), [0, n, n, 0]);
    t.equal((await s.proofs.listAudit({ accountId: poor.accountId, limit: 100 })).length, n, 'one audit row per committed call');
    const consumed = (await Promise.all(chs.map((c) => s.proofs.getChallenge(c.id)))).filter((c) => c?.consumedAt !== null).length;
    t.equal(consumed, n, 'only the paid challenges are consumed');
  });

  await t.test('a revocation racing allows: none commits after the revocation did', async (t) => {
    const x = await seed(s, { credits: 100 * PRICE });
    const c = await approved(s, x);
    const chs = Array.from({ length: 20 }, () => challenge(x));
    for (const ch of chs) await s.proofs.insertChallenge(ch);
    let revokedAt = 0;
    const results = values(t, await together(21, async (i) => {
      if (i === 10) { await s.delegations.revokeCertificate(c.id, 'race', NOW + 30, null); revokedAt = performance.now(); return 'revoke'; }
      const j = i < 10 ? i : i - 1;
      return s.proofs.commitDecision(commit(x, chs[j]!.id, { certId: c.id, audit: audit(x, 'proof.verified', { certId: c.id }) }));
    }));
    const allows = count(results, 'committed');
    t.equal(allows + count(results, 'certificate_revoked'), 20, 'every allow either committed or saw the revocation');
    t.same((await meter(s, x)).slice(1, 3), [allows, allows], 'counters match the committed allows');
    t.equal((await s.proofs.listAudit({ accountId: x.accountId, limit: 100 })).length, allows, 'an audit row per committed allow');
    const late = challenge(x);
    await s.proofs.insertChallenge(late);
    t.ok(revokedAt > 0);
    t.equal(await s.proofs.commitDecision(commit(x, late.id, { certId: c.id })), 'certificate_revoked', 'after the revocation returned: refused');
  });

  await t.test('audit reads: newest first, cursor, filters, per account; purges', async (t) => {
    const x = await seed(s);
    const y = await seed(s);
    const rows = [
      audit(x, 'proof.presented', { createdAt: NOW + 1 }), audit(x, 'proof.verified', { createdAt: NOW + 2, agentId: 'agent-b' }),
      audit(x, 'proof.rejected', { createdAt: NOW + 3 }), audit(x, 'proof.verified', { createdAt: NOW + 4 }),
    ];
    for (const [i, r] of rows.entries()) {
      const ch = challenge(x);
      await s.proofs.insertChallenge(ch);
      if (i === 0) {
        await s.proofs.claimChallenge(ch.id, x.c.id, NOW + 1);
        await s.proofs.recordPresentation(r);
      }
      else await s.proofs.commitDecision(commit(x, ch.id, { audit: r, decision: r.eventType === 'proof.rejected' ? 'deny' : 'allow' }));
    }
    const yc = challenge(y);
    await s.proofs.insertChallenge(yc);
    await s.proofs.commitDecision(commit(y, yc.id, { audit: audit(y, 'proof.verified') }));
    const all = await s.proofs.listAudit({ accountId: x.accountId, limit: 10 });
    t.same(all.map((r) => r.id), rows.map((r) => r.id).reverse(), 'newest first, this account only');
    t.ok(all.every((r, i) => i === 0 || r.seq! < all[i - 1]!.seq!), 'seq decreases');
    t.same(all.map(({ seq: _s, ...r }) => r), [...rows].reverse(), 'rows read back as written');
    t.same((await s.proofs.listAudit({ accountId: x.accountId, limit: 2 })).map((r) => r.id), [rows[3]!.id, rows[2]!.id], 'limit');
    t.same((await s.proofs.listAudit({ accountId: x.accountId, limit: 10, before: all[1]!.seq! })).map((r) => r.id), [rows[1]!.id, rows[0]!.id], 'before a cursor');
    t.same((await s.proofs.listAudit({ accountId: x.accountId, limit: 10, eventType: 'proof.verified' })).map((r) => r.id), [rows[3]!.id, rows[1]!.id], 'by type');
    t.same((await s.proofs.listAudit({ accountId: x.accountId, limit: 10, agentId: 'agent-b' })).map((r) => r.id), [rows[1]!.id], 'by agent');

    const fresh = await storeFor(t, open);
    const z = await seed(fresh);
    const spent = challenge(z, { createdAt: NOW });
    const live = challenge(z, { expiresAt: NOW + 10_000_000 });
    const expired = challenge(z, { expiresAt: NOW + 100 });
    for (const ch of [spent, live, expired]) await fresh.proofs.insertChallenge(ch);
    await fresh.proofs.commitDecision(commit(z, spent.id, { now: NOW + 50, audit: audit(z, 'proof.verified', { createdAt: NOW + 50 }) }));
    t.equal(await fresh.proofs.purgeChallenges(NOW + 40), 0, 'nothing spent or expired before the cut-off');
    t.equal(await fresh.proofs.purgeChallenges(NOW + 200), 2, 'the spent and the expired one');
    t.ok(await fresh.proofs.getChallenge(live.id), 'the live one stays');
    t.equal(await fresh.proofs.getChallenge(spent.id), undefined);
    // Audit retention (with its signed anchor) is in contract-audit.ts.
  });
}
