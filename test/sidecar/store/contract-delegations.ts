/**
 * Store contract, delegations part: requests and certificates read back as
 * written; approve, deny and revoke each happen once (also when raced), with
 * their event in the same transaction or not at all; the active certificate
 * of an agent; the revoked ids that warm the revocation cache.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { NOW, approved, cert, count, ev, request, seed, storeFor, together, values } from './contract-fixtures.js';

/** Runs the delegations part. */
export async function delegationsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('approve, deny and revoke each happen once, with their event', async (t) => {
    const x = await seed(s);
    const r = request(x);
    await s.delegations.createRequest(r);
    t.same(await s.delegations.getRequest(r.id), r);
    const c1 = cert(r);
    t.equal(await s.delegations.approveRequest(r.id, c1, ev(x.accountId, x.p.id, x.c.id, 'delegation.approved')), true);
    t.equal(await s.delegations.approveRequest(r.id, { ...c1, id: `cert-${randomUUID()}` }, ev(x.accountId, x.p.id, x.c.id, 'delegation.approved')), false, 'approve twice');
    t.equal(await s.delegations.denyRequest(r.id, NOW + 5, ev(x.accountId, x.p.id, x.c.id, 'delegation.denied')), false, 'deny after approve');
    t.same(await s.delegations.getRequest(r.id), { ...r, state: 'approved', certId: c1.id, decidedAt: c1.issuedAt });
    t.same(await s.delegations.getCertificate(c1.id), c1, 'certificate read back as written (JSON constraints included)');
    t.same(await s.delegations.activeCertificateForAgent(x.agentId), { id: c1.id, agentId: x.agentId, certSha256: c1.certSha256, status: 'approved', expiresAt: null });
    t.equal(await s.delegations.revokeCertificate(c1.id, 'done', NOW + 7, ev(x.accountId, x.p.id, x.c.id, 'delegation.revoked')), true);
    t.equal(await s.delegations.revokeCertificate(c1.id, 'again', NOW + 8, ev(x.accountId, x.p.id, x.c.id, 'delegation.revoked')), false, 'revoke twice');
    const rc = await s.delegations.getCertificate(c1.id);
    t.same([rc?.status, rc?.revokeReason, rc?.revokedAt], ['revoked', 'done', NOW + 7]);
    t.equal(await s.delegations.activeCertificateForAgent(x.agentId), undefined, 'no active certificate after the revocation');
    const d = request(x, NOW + 9);
    await s.delegations.createRequest(d);
    t.equal(await s.delegations.denyRequest(d.id, NOW + 9, ev(x.accountId, x.p.id, x.c.id, 'delegation.denied')), true);
    t.equal(await s.delegations.denyRequest(d.id, NOW + 10, ev(x.accountId, x.p.id, x.c.id, 'delegation.denied')), false);
    t.equal(await s.delegations.approveRequest(d.id, cert(d), null), false, 'approve after deny');
    t.same((await s.delegations.getRequest(d.id))?.decidedAt, NOW + 9);
    const types = (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 20 })).map((e) => e.eventType).sort();
    t.same(types, ['delegation.approved', 'delegation.denied', 'delegation.revoked'], 'one event per state change, none for refused ones');
    t.same((await s.delegations.listRequests(x.accountId)).map((q) => q.id), [d.id, r.id], 'requests newest first');
    t.same((await s.delegations.listCertificates(x.accountId)).map((q) => q.id), [c1.id]);
    t.same(await s.delegations.listRequests(randomUUID()), []);
    t.equal(await s.delegations.getRequest(randomUUID()), undefined);
    t.equal(await s.delegations.getCertificate(randomUUID()), undefined);
  });

  await t.test('a request keeps the constraints the platform proposed, read back and listed as written', async (t) => {
    const x = await seed(s);
    const proposed = { methods: ['GET'], path_prefixes: ['/trips'], max_calls: { count: 10, period: 'day' },
      time_window: { start: '08:00', end: '18:00', days: ['mon', 'tue'] } };
    const r = { ...request(x), proposedConstraints: proposed };
    const plain = request(x, NOW + 1);
    await s.delegations.createRequest(r);
    await s.delegations.createRequest(plain);
    t.same((await s.delegations.getRequest(r.id))?.proposedConstraints, proposed, 'JSON read back as written');
    t.equal((await s.delegations.getRequest(plain.id))?.proposedConstraints, null, 'none proposed: null');
    const listed = await s.delegations.listRequests(x.accountId);
    t.same(listed.map((q) => [q.id, q.proposedConstraints]), [[plain.id, null], [r.id, proposed]], 'listed with them');
    const c = { ...cert(r), constraints: { ...proposed, methods: ['GET'], tenants: ['t1'] } };
    t.equal(await s.delegations.approveRequest(r.id, c, null), true);
    const after = await s.delegations.getRequest(r.id);
    t.same([after?.state, after?.proposedConstraints], ['approved', proposed], 'the proposal stays after the approval');
    t.same((await s.delegations.getCertificate(c.id))?.constraints, c.constraints, 'the certificate has the approved ones');
  });

  await t.test('the active certificate is the newest approved one; expiry is not checked', async (t) => {
    const x = await seed(s);
    const old = await approved(s, x, NOW + 1);
    const newer = await approved(s, x, NOW + 50);
    t.equal((await s.delegations.activeCertificateForAgent(x.agentId))?.id, newer.id);
    t.same((await s.delegations.listCertificates(x.accountId)).map((c) => c.id), [newer.id, old.id], 'certificates newest first');
    await s.delegations.revokeCertificate(newer.id, 'r', NOW + 60, null);
    t.equal((await s.delegations.activeCertificateForAgent(x.agentId))?.id, old.id, 'the next newest approved');
    const r = request(x, NOW + 70);
    await s.delegations.createRequest(r);
    const expiring = { ...cert(r, NOW + 71), expiresAt: NOW - 1 };
    await s.delegations.approveRequest(r.id, expiring, null);
    t.same(await s.delegations.activeCertificateForAgent(x.agentId), { id: expiring.id, agentId: x.agentId, certSha256: expiring.certSha256, status: 'approved', expiresAt: NOW - 1 });
    t.equal(await s.delegations.activeCertificateForAgent(randomUUID()), undefined);
    const ids = await s.delegations.revokedCertificateIds();
    t.ok(ids.includes(newer.id) && !ids.includes(old.id) && !ids.includes(expiring.id), 'revoked ids: the revoked only');
  });

  await t.test('races: one approval, one decision, one revocation', async (t) => {
    const x = await seed(s);
    const r = request(x);
    await s.delegations.createRequest(r);
    const certs = Array.from({ length: 8 }, () => cert(r));
    const ok = values(t, await together(8, (i) => s.delegations.approveRequest(r.id, certs[i]!, ev(x.accountId, x.p.id, x.c.id, 'delegation.approved'))));
    t.equal(count(ok, true), 1, '8 concurrent approvals: one');
    t.equal((await s.delegations.listCertificates(x.accountId)).length, 1, 'one certificate stored');
    t.equal((await s.delegations.getRequest(r.id))?.certId, certs[ok.indexOf(true)]!.id, 'the request names the winning certificate');

    const q = request(x, NOW + 3);
    await s.delegations.createRequest(q);
    const mixed = values(t, await together(8, (i) => (i % 2 === 0
      ? s.delegations.approveRequest(q.id, cert(q), null)
      : s.delegations.denyRequest(q.id, NOW + 4, null))));
    t.equal(count(mixed, true), 1, '4 approvals and 4 denials at once: one decision');
    const state = (await s.delegations.getRequest(q.id))?.state;
    t.equal((await s.delegations.listCertificates(x.accountId)).length, state === 'approved' ? 2 : 1, 'a certificate only for an approval');

    const c = certs[ok.indexOf(true)]!;
    const revs = values(t, await together(8, (i) => s.delegations.revokeCertificate(c.id, `r${i}`, NOW + 10 + i, ev(x.accountId, x.p.id, x.c.id, 'delegation.revoked'))));
    t.equal(count(revs, true), 1, '8 concurrent revocations: one');
    const types = (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 50 })).map((e) => e.eventType);
    t.equal(count(types, 'delegation.revoked'), 1, 'one revocation event');
    t.equal(count(types, 'delegation.approved'), 1, 'one approval event');
  });

  await t.test('atomic: a failing approve or revoke writes nothing', async (t) => {
    const x = await seed(s);
    const first = await approved(s, x);
    const r = request(x, NOW + 2);
    await s.delegations.createRequest(r);
    // The certificate id is taken: the request stays pending.
    await t.rejects(s.delegations.approveRequest(r.id, { ...cert(r), id: first.id }, ev(x.accountId, x.p.id, x.c.id, 'delegation.approved')));
    t.equal((await s.delegations.getRequest(r.id))?.state, 'pending', 'still pending');
    t.equal((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10 })).length, 0, 'no event');
    // The event id is taken: no certificate, still pending.
    const e = ev(x.accountId, x.p.id, x.c.id, 'delegation.approved');
    const other = await approved(s, x, NOW + 3);
    await s.delegations.revokeCertificate(other.id, 'x', NOW + 4, e);
    const c = cert(r, NOW + 5);
    await t.rejects(s.delegations.approveRequest(r.id, c, { ...e }));
    t.equal((await s.delegations.getRequest(r.id))?.state, 'pending');
    t.equal(await s.delegations.getCertificate(c.id), undefined, 'no certificate');
    // Revoke with a taken event id: still approved.
    await t.rejects(s.delegations.revokeCertificate(first.id, 'x', NOW + 6, { ...e }));
    t.equal((await s.delegations.getCertificate(first.id))?.status, 'approved', 'still approved');
    t.notOk((await s.delegations.revokedCertificateIds()).includes(first.id));
    // Deny with a taken event id: still pending.
    await t.rejects(s.delegations.denyRequest(r.id, NOW + 7, { ...e }));
    t.equal((await s.delegations.getRequest(r.id))?.state, 'pending');
    t.equal(await s.delegations.approveRequest(r.id, c, null), true, 'and can still be approved');
  });
}
