/**
 * Store contract, sub-delegation chains part (docs/certificates.md): a
 * sub-delegated certificate is issued with its request and event in one
 * transaction, only while its parent is approved; a revocation takes every
 * approved descendant with it, one event each, leaving the parent and the
 * siblings; a revocation raced with an issue under the same parent never
 * leaves an approved child of a revoked parent.
 */
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { NOW, approved, cert, ev, request, seed, storeFor, together } from './contract-fixtures.js';
import type { Seeded } from './contract-fixtures.js';
import type { CertificateRecord, DelegationRequestRecord, Store } from '../../../sidecar/store/types.js';

/** A sub-delegation of `parent` (request recorded approved), as the route builds it. */
function child(x: Seeded, parent: CertificateRecord,
  at = NOW + 20): { q: DelegationRequestRecord; c: CertificateRecord } {
  const q = { ...request(x, at), state: 'approved' as const };
  const c = { ...cert(q, at), parentCertId: parent.id, depth: parent.depth + 1, maxDelegationDepth: 0 };
  return { q: { ...q, certId: c.id, decidedAt: at }, c };
}

/** Issues a child of `parent`; throws when refused. */
async function issue(s: Store, x: Seeded, parent: CertificateRecord, at?: number): Promise<CertificateRecord> {
  const { q, c } = child(x, parent, at);
  if (!(await s.delegations.issueSubDelegation(q, c, ev(x.accountId, x.p.id, x.c.id, 'delegation.approved')))) {
    throw new Error('issue refused');
  }
  return c;
}

/** Runs the chains part. */
export async function chainsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('a sub-delegation is issued with its request and event, only under an approved parent', async (t) => {
    const x = await seed(s);
    const root = await approved(s, x);
    const { q, c } = child(x, root);
    t.equal(await s.delegations.issueSubDelegation(q, c, ev(x.accountId, x.p.id, x.c.id, 'delegation.approved')), true);
    t.same(await s.delegations.getCertificate(c.id), c, 'read back as written (parent, depth, right)');
    t.same(await s.delegations.getRequest(q.id), q, 'its request, recorded approved');
    t.same((await s.delegations.childCertificates(root.id)).map((r) => r.id), [c.id]);
    await s.delegations.revokeCertificate(root.id, 'r', NOW + 30, null);
    const late = child(x, root, NOW + 40);
    const lateEvent = ev(x.accountId, x.p.id, x.c.id, 'delegation.approved');
    t.equal(await s.delegations.issueSubDelegation(late.q, late.c, lateEvent),
      false, 'refused under a revoked parent');
    t.equal(await s.delegations.getCertificate(late.c.id), undefined, 'nothing written');
    t.equal(await s.delegations.getRequest(late.q.id), undefined);
    const types = (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 20 })).map((e) => e.eventType);
    t.same(types, ['delegation.approved'], 'one event, for the issued one');
    await t.rejects(s.delegations.issueSubDelegation(late.q, { ...late.c, parentCertId: null }, null), TypeError);
  });

  await t.test('a revocation takes every descendant, one event each, and leaves parent and siblings', async (t) => {
    const x = await seed(s);
    const root = await approved(s, x);
    const a = await issue(s, x, root);
    const sibling = await issue(s, x, root);
    const b = await issue(s, x, a);
    const c = await issue(s, x, b);
    const events: string[] = [];
    const out = await s.delegations.revokeTree(a.id, 'stop', NOW + 50, (r, why) => {
      events.push(`${r.id}:${why}`);
      return ev(x.accountId, x.p.id, r.connectionId, 'delegation.revoked');
    });
    t.same(out.map((r) => [r.id, r.depth]), [[a.id, 1], [b.id, 2], [c.id, 3]], 'the named one first, then down');
    t.same(events, [`${a.id}:stop`, `${b.id}:ancestor_revoked`, `${c.id}:ancestor_revoked`]);
    for (const id of [a.id, b.id, c.id]) t.equal((await s.delegations.getCertificate(id))?.status, 'revoked', id);
    for (const id of [root.id, sibling.id]) t.equal((await s.delegations.getCertificate(id))?.status, 'approved', id);
    t.equal((await s.delegations.getCertificate(b.id))?.revokeReason, 'ancestor_revoked');
    const revoked = (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 50 }))
      .filter((e) => e.eventType === 'delegation.revoked');
    t.equal(revoked.length, 3, 'three delegation.revoked');
    t.same(await s.delegations.revokeTree(a.id, 'again', NOW + 60, () => null), [], 'again: nothing');
    const rest = await s.delegations.revokeTree(root.id, 'all', NOW + 70, () => null);
    t.same(rest.map((r) => r.id), [root.id, sibling.id], 'the root then: itself and what was left');
    t.same((await s.delegations.revokedCertificateIds()).filter((id) => [root.id, a.id, b.id, c.id, sibling.id]
      .includes(id)).length, 5);
  });

  await t.test('a certificate revoked alone: revoking it again revokes what is left below it', async (t) => {
    const x = await seed(s);
    const root = await approved(s, x);
    const a = await issue(s, x, root);
    const b = await issue(s, x, a);
    await s.delegations.revokeCertificate(a.id, 'alone', NOW + 50, null);
    const out = await s.delegations.revokeTree(a.id, 'again', NOW + 60, () => null);
    t.same(out.map((r) => r.id), [b.id], 'only the descendant still approved');
    t.equal((await s.delegations.getCertificate(a.id))?.revokeReason, 'alone', 'the first revocation stays');
    t.equal((await s.delegations.getCertificate(root.id))?.status, 'approved');
  });

  await t.test('a revocation raced with issues under the same parent leaves no approved child of it', async (t) => {
    for (let round = 0; round < 5; round++) {
      const x = await seed(s);
      const root = await approved(s, x);
      const parent = await issue(s, x, root);
      const results = await together(6, async (i) => {
        if (i === 0) return s.delegations.revokeTree(parent.id, 'race', NOW + 90, () => null);
        const { q, c } = child(x, parent, NOW + 80 + i);
        return (await s.delegations.issueSubDelegation(q, c, null)) ? c.id : null;
      });
      t.ok(results.every((r) => r.status === 'fulfilled'), `round ${round}: no failure`);
      const kids = await s.delegations.childCertificates(parent.id);
      t.same(kids.filter((k) => k.status === 'approved').map((k) => k.id), [],
        `round ${round}: ${kids.length} issued, every one revoked with its parent`);
      t.equal((await s.delegations.getCertificate(root.id))?.status, 'approved', 'the root untouched');
    }
  });
}
