/**
 * Store contract, audit chain part: every audit row (present and verify) is
 * linked into its account's chain inside its own transaction (positions 1..n
 * without gaps, each hash the rule of src/audit-chain.ts), under real
 * concurrency too; a refused commit moves no head; checkpoints are stored only
 * for the head they name; retention removes whole prefixes and leaves its
 * anchor.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { AuditCheckpointRecord, DecisionCommit, Store } from '../../../sidecar/store/types.js';
import { GENESIS_HASH, rowHash } from '../../../src/audit-chain.js';
import type { OpenStore } from './contract.js';
import { NOW, audit, challenge, count, seed, storeFor, together, values } from './contract-fixtures.js';
import type { Seeded } from './contract-fixtures.js';

const SIG = { ed25519: 'e'.repeat(86), ml_dsa_65: 'm'.repeat(10) };

/** A checkpoint record (the store does not check signatures). */
export const checkpoint = (accountId: string, position: number, head: string, o: Partial<AuditCheckpointRecord> = {}): AuditCheckpointRecord =>
  ({ id: randomUUID(), accountId, position, head, kind: 'periodic', keyId: 'k'.repeat(32), createdAt: NOW + 100, signature: SIG, ...o });

/** Commits one decision with a fresh challenge; returns the audit id. */
export async function decideOnce(s: Store, x: Seeded, o: Partial<DecisionCommit> & { createdAt?: number } = {}): Promise<string> {
  const ch = challenge(x);
  await s.proofs.insertChallenge(ch);
  const { createdAt, ...rest } = o;
  const a = o.audit ?? audit(x, 'proof.verified', { createdAt: createdAt ?? NOW + 10 });
  const r = await s.proofs.commitDecision({
    challengeId: ch.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: 1, decision: 'allow', certId: null, ...rest, audit: a,
  });
  if (r !== 'committed') throw new Error(`decideOnce: ${r}`);
  return a.id;
}

/** Checks that the account's stored chain is 1..n, linked, and matches its head. */
async function chainOk(t: Test, s: Store, accountId: string, n: number, what: string): Promise<void> {
  const rows = await s.audit.readChain(accountId, 0, 10_000);
  t.same(rows.map((r) => r.position), Array.from({ length: n }, (_, i) => i + 1), `${what}: positions 1..${n}`);
  let prev = GENESIS_HASH;
  let ok = true;
  for (const r of rows) {
    ok &&= r.prevHash === prev && r.hash === rowHash(r);
    prev = r.hash;
  }
  t.ok(ok, `${what}: every row links to the one before and carries its own hash`);
  const head = await s.audit.getHead(accountId);
  t.same(head && [head.position, head.hash], n === 0 ? undefined : [n, prev], `${what}: the head is the last row`);
}

/** Runs the audit chain part. */
export async function auditContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('present and verify rows are chained per account, in their own transaction', async (t) => {
    const x = await seed(s);
    const y = await seed(s);
    t.equal(await s.audit.getHead(x.accountId), undefined, 'no head before the first row');
    const ch = challenge(x);
    await s.proofs.insertChallenge(ch);
    t.ok(await s.proofs.claimChallenge(ch.id, x.c.id, NOW + 5));
    await s.proofs.recordPresentation(audit(x, 'proof.presented'));
    await decideOnce(s, x);
    await decideOnce(s, y);
    await decideOnce(s, x);
    await chainOk(t, s, x.accountId, 3, 'account x');
    await chainOk(t, s, y.accountId, 1, 'account y (its own chain)');
    const [first] = await s.audit.readChain(x.accountId, 0, 1);
    t.equal(first!.prevHash, GENESIS_HASH, 'the first row starts from the genesis hash');
    t.equal(first!.eventType, 'proof.presented');
    t.same((await s.audit.readChain(x.accountId, 1, 1)).map((r) => r.position), [2], 'readChain after a position, limited');

    // Refusals move nothing.
    const spent = challenge(x);
    await s.proofs.insertChallenge(spent);
    await s.proofs.commitDecision({ challengeId: spent.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: 1, decision: 'allow', certId: null, audit: audit(x, 'proof.verified') });
    const dup = audit(x, 'proof.verified');
    t.equal(await s.proofs.commitDecision({ challengeId: spent.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: 1, decision: 'allow', certId: null, audit: dup }), 'invalid_challenge');
    const other = challenge(x);
    await s.proofs.insertChallenge(other);
    const taken = (await s.audit.readChain(x.accountId, 0, 1))[0]!;
    await t.rejects(s.proofs.commitDecision({ challengeId: other.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: 1, decision: 'allow', certId: null, audit: { ...audit(x, 'proof.verified'), id: taken.id } }), 'a duplicate audit id fails the commit');
    await chainOk(t, s, x.accountId, 4, 'after refusals');
    // A row that cannot be encoded canonically is refused, and the commit with it.
    const floaty = challenge(x);
    await s.proofs.insertChallenge(floaty);
    await t.rejects(s.proofs.commitDecision({ challengeId: floaty.id, audienceConnectionId: x.c.id, now: NOW + 20, accountId: x.accountId, priceMicros: 1, decision: 'allow', certId: null, audit: audit(x, 'proof.verified', { details: { ratio: 0.5 } }) }));
    t.equal((await s.proofs.getChallenge(floaty.id))?.consumedAt, null, 'the challenge stays unspent');
    await chainOk(t, s, x.accountId, 4, 'after an unencodable row');
  });

  await t.test('concurrent appends to one account stay one linear chain', async (t) => {
    const x = await seed(s, { credits: 1_000_000 });
    const y = await seed(s, { credits: 1_000_000 });
    const rs = values(t, await together(40, (i) => decideOnce(s, i % 4 === 0 ? y : x)));
    t.equal(rs.length, 40);
    await chainOk(t, s, x.accountId, 30, 'account x after 30 concurrent commits');
    await chainOk(t, s, y.accountId, 10, 'account y after 10');
  });

  await t.test('checkpoints: stored only for the head they name, once per position and kind; due heads', async (t) => {
    const x = await seed(s);
    for (let i = 0; i < 3; i++) await decideOnce(s, x);
    const rows = await s.audit.readChain(x.accountId, 0, 10);
    t.equal(await s.audit.insertCheckpoint(checkpoint(x.accountId, 2, rows[0]!.hash)), false, 'a head that is not the row at that position');
    t.equal(await s.audit.insertCheckpoint(checkpoint(x.accountId, 9, rows[2]!.hash)), false, 'a position without a row');
    const cp = checkpoint(x.accountId, 2, rows[1]!.hash);
    t.equal(await s.audit.insertCheckpoint(cp), true);
    t.equal(await s.audit.insertCheckpoint(checkpoint(x.accountId, 2, rows[1]!.hash)), false, 'one per position and kind');
    t.same(await s.audit.listCheckpoints({ accountId: x.accountId }), [cp], 'read back as written');
    t.same(await s.audit.listCheckpoints({ accountId: x.accountId, fromPosition: 3 }), []);
    const head = (await s.audit.getHead(x.accountId))!;
    t.same([head.checkpointPosition, head.checkpointAt], [2, NOW + 100], 'the head remembers the checkpoint');
    const due = async (rowsN: number, olderThan: number): Promise<boolean> =>
      (await s.audit.headsDue({ rows: rowsN, olderThan, limit: 1000 })).some((h) => h.accountId === x.accountId);
    t.equal(await due(2, NOW), false, 'one row since the checkpoint, made at NOW+100: not due');
    t.equal(await due(1, NOW), true, 'due by rows');
    t.equal(await due(5, NOW + 100), true, 'due by time');
    t.equal(await s.audit.insertCheckpoint(checkpoint(x.accountId, 3, rows[2]!.hash, { createdAt: NOW + 200 })), true);
    t.equal(await due(1, NOW + 1000), false, 'nothing after the last checkpoint: never due');
    const parallel = values(t, await together(8, () => s.audit.insertCheckpoint(checkpoint(x.accountId, 1, rows[0]!.hash))));
    t.equal(count(parallel, true), 1, 'concurrent checkpoints of one position: one stored');
  });

  await t.test('retention removes whole prefixes and leaves the anchor', async (t) => {
    const x = await seed(s);
    // created_at is the decision time, not in position order: 10, 30, 20, 40.
    for (const at of [10, 30, 20, 40]) await decideOnce(s, x, { createdAt: NOW + at });
    const rows = await s.audit.readChain(x.accountId, 0, 10);
    t.equal(await s.audit.insertCheckpoint(checkpoint(x.accountId, 1, rows[0]!.hash)), true);
    const mine = async (cut: number) => (await s.audit.prunePoints(cut, 1000)).filter((p) => p.accountId === x.accountId);
    t.same(await mine(NOW + 10), [], 'nothing older than the cut-off');
    t.same(await mine(NOW + 25), [{ accountId: x.accountId, position: 1, hash: rows[0]!.hash }], 'row 3 is older but row 2 is not: only the prefix 1');
    t.same(await mine(NOW + 35), [{ accountId: x.accountId, position: 3, hash: rows[2]!.hash }], 'the prefix 1..3');
    t.equal(await s.audit.pruneTo(checkpoint(x.accountId, 3, rows[1]!.hash, { kind: 'anchor' })), -1, 'an anchor with the wrong head removes nothing');
    t.equal((await s.audit.readChain(x.accountId, 0, 10)).length, 4);
    const anchor = checkpoint(x.accountId, 3, rows[2]!.hash, { kind: 'anchor' });
    t.equal(await s.audit.pruneTo(anchor), 3, 'rows 1..3 removed');
    t.same((await s.audit.readChain(x.accountId, 0, 10)).map((r) => r.position), [4], 'row 4 stays');
    t.same(await s.audit.listCheckpoints({ accountId: x.accountId }), [anchor], 'the anchor stays; checkpoints below it go');
    t.same(await mine(NOW + 35), [], 'nothing left to prune at that cut-off');
    await decideOnce(s, x);
    const after = await s.audit.readChain(x.accountId, 0, 10);
    t.same(after.map((r) => r.position), [4, 5], 'the chain goes on after retention');
    t.equal(after[1]!.prevHash, after[0]!.hash);
    t.equal(after[0]!.prevHash, anchor.head, 'the first remaining row links to the anchor');
    const everything = checkpoint(x.accountId, 5, after[1]!.hash, { kind: 'anchor' });
    t.equal(await s.audit.pruneTo(everything), 2, 'all rows removed');
    t.same((await s.audit.getHead(x.accountId))?.position, 5, 'the head stays');
    await decideOnce(s, x);
    t.same((await s.audit.readChain(x.accountId, 0, 10)).map((r) => [r.position, r.prevHash]), [[6, everything.head]], 'the next row links to the anchor');
  });
}
