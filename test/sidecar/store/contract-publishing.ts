/**
 * Store contract, publishing part (issue 32): a claim and its checks (verified, taken by another
 * organisation, unreachable changing nothing, absent or mismatch lapsing and unpublishing in the
 * same write, a stale token ignored), the re-check's due list, publish-state moves, and the
 * directory listing only published platforms with a live verification; the audit rows of each change
 * written with it (two chains for a connection), and none for a change refused.
 */
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { randomUUID } from 'node:crypto';
import { NOW, auditRow, chainOf, count, ev, newPrefix, seed, storeFor, together, values } from './contract-fixtures.js';
import type { AuditEventRecord, DomainCheckResult } from '../../../sidecar/store/types.js';

/** Runs the publishing part. */
export async function publishingContract(t: Test, open: OpenStore): Promise<void> {
  /** Published platforms keep a callback URL (docs/organisations.md). */
  const HOOK = 'https://example.com/hook';
  const s = await storeFor(t, open);

  await t.test('claim, verify, take, lapse, directory', async (t) => {
    const [a, b] = [await seed(s, { callbackUrl: HOOK }), await seed(s, { callbackUrl: HOOK })];
    // The audit rows each change asks for: what the store passed, to see it in the chain.
    const claimed = (orgId: string) => (unpublished: string[]): AuditEventRecord[] =>
      [auditRow(orgId, 'domain.claimed', { unpublished })];
    const checked = (orgId: string) => (r: DomainCheckResult, unpublished: string[]): AuditEventRecord[] =>
      [auditRow(orgId, r === 'verified' ? 'domain.verified' : 'domain.lapsed', { result: r, unpublished })];
    const moved = (orgId: string) => [auditRow(orgId, 'platform.published')];
    const claim = await s.publishing.claimDomain(a.accountId, 'pub.example.org', 'tok-a', NOW, claimed(a.accountId));
    t.same(claim, { orgId: a.accountId, domain: 'pub.example.org', token: 'tok-a', claimedAt: NOW, verifiedAt: null,
      lapsedAt: null, checkedAt: null, lastOutcome: null });
    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a', 'absent', NOW + 1, checked(a.accountId)), 'unchanged', 'not verified yet: nothing lapses');
    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a', 'verified', NOW + 2, checked(a.accountId)), 'verified');
    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a', 'verified', NOW + 3, checked(a.accountId)), 'unchanged');
    t.match(await s.publishing.domainOf(a.accountId), { verifiedAt: NOW + 2, checkedAt: NOW + 3, lastOutcome: 'verified' });
    t.equal(await s.publishing.recordCheck(a.accountId, 'old-token', 'absent', NOW + 4, checked(a.accountId)), 'stale');

    await s.publishing.claimDomain(b.accountId, 'pub.example.org', 'tok-b', NOW, claimed(b.accountId));
    t.equal(await s.publishing.recordCheck(b.accountId, 'tok-b', 'verified', NOW + 5, checked(b.accountId)), 'taken');
    t.equal((await s.publishing.domainOf(b.accountId))?.verifiedAt, null);

    t.equal(await s.publishing.setPublishState(a.p.id, b.accountId, 'draft', 'published', moved(b.accountId)), false, 'only its owner moves it');
    t.equal(await s.publishing.setPublishState(a.p.id, a.accountId, 'published', 'unpublished', moved(a.accountId)), false, 'only from its state');
    t.equal(await s.publishing.setPublishState(a.p.id, a.accountId, 'draft', 'published', moved(a.accountId)), true);
    t.same((await s.publishing.directory(10)).map((e) => [e.platformId, e.domain, e.orgId]), [[a.p.id, 'pub.example.org', a.accountId]]);
    t.same((await s.publishing.domainsDue(NOW + 3, 10)).map((d) => d.orgId), [a.accountId], 'due when checked at or before');
    t.same(await s.publishing.domainsDue(NOW + 2, 10), []);

    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a', 'unreachable', NOW + 6, checked(a.accountId)), 'unchanged');
    t.equal((await s.platforms.getPlatform(a.p.id))?.publishState, 'published', 'an outage unpublishes nothing');
    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a', 'mismatch', NOW + 7, checked(a.accountId)), 'lapsed');
    t.equal((await s.platforms.getPlatform(a.p.id))?.publishState, 'unpublished', 'the lapse unpublished it');
    t.match(await s.publishing.domainOf(a.accountId), { lapsedAt: NOW + 7, lastOutcome: 'mismatch' });
    t.same(await s.publishing.directory(10), []);
    t.equal(await s.publishing.recordCheck(b.accountId, 'tok-b', 'verified', NOW + 8, checked(b.accountId)), 'verified', 'free again');

    // Re-verifying restores the claim; a new claim unpublishes at once.
    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a', 'verified', NOW + 9, checked(a.accountId)), 'taken', 'b holds it now');
    await s.publishing.claimDomain(a.accountId, 'other.example.org', 'tok-a2', NOW + 10, claimed(a.accountId));
    t.equal(await s.publishing.recordCheck(a.accountId, 'tok-a2', 'verified', NOW + 11, checked(a.accountId)), 'verified');
    t.equal(await s.publishing.setPublishState(a.p.id, a.accountId, 'unpublished', 'published', moved(a.accountId)), true);
    await s.publishing.claimDomain(a.accountId, 'third.example.org', 'tok-a3', NOW + 12, claimed(a.accountId));
    t.equal((await s.platforms.getPlatform(a.p.id))?.publishState, 'unpublished', 'a new claim unpublishes');
    t.match(await s.publishing.domainOf(a.accountId), { domain: 'third.example.org', verifiedAt: null, lapsedAt: null });

    // The audit rows: written with each change that changed something (a check that changed nothing, a
    // stale or taken one, a refused move: none), with the platforms a lapse or a claim unpublished.
    const ids = { unpublished: [] };
    t.same(await chainOf(s, a.accountId), [
      ['domain.claimed', ids], ['domain.verified', { result: 'verified', ...ids }], ['platform.published', {}],
      ['domain.lapsed', { result: 'lapsed', unpublished: [a.p.id] }],
      ['domain.claimed', ids], ['domain.verified', { result: 'verified', ...ids }], ['platform.published', {}],
      ['domain.claimed', { unpublished: [a.p.id] }],
    ]);
    t.same(await chainOf(s, b.accountId), [['domain.claimed', ids], ['domain.verified', { result: 'verified', ...ids }]]);
  });

  await t.test('connecting: only to a published platform, once per workspace, with its key and event', async (t) => {
    const [pub, user] = [await seed(s, { callbackUrl: HOOK }), await seed(s)];
    const attempt = () => {
      const c = { id: randomUUID(), platformId: pub.p.id, accountId: user.accountId, allowedScopes: ['data:read'],
        status: 'active' as const, removedAt: null, createdAt: NOW };
      const k = { id: randomUUID(), connectionId: c.id, prefix: newPrefix(), digest: 'b'.repeat(64), status: 'active' as const,
        validUntil: NOW + 1e9, createdAt: NOW };
      return s.publishing.connect(c, k, ev(pub.accountId, pub.p.id, c.id, 'connection.created'), [
        auditRow(user.accountId, 'connection.created', { connection_id: c.id }),
        auditRow(pub.accountId, 'connection.created', { connection_id: c.id, workspace_id: user.accountId })]);
    };
    t.equal(await attempt(), 'not_published');
    await s.publishing.setPublishState(pub.p.id, pub.accountId, 'draft', 'published', [auditRow(pub.accountId, 'platform.published')]);
    const rs = values(t, await together(5, attempt));
    t.equal(count(rs, 'connected'), 1, 'one of five concurrent connects');
    t.equal(count(rs, 'already_connected'), 4);
    const conns = (await s.platforms.listConnections(user.accountId)).filter((c) => c.platformId === pub.p.id);
    t.equal(conns.length, 1);
    const events = (await s.outbox.listDeliveries({ accountId: pub.accountId, limit: 50 }))
      .filter((d) => d.connectionId === conns[0]!.id).map((d) => d.eventType);
    t.same(events, ['connection.created'], 'its connection.created is in the outbox, once');
    t.same(await chainOf(s, user.accountId), [['connection.created', { connection_id: conns[0]!.id }]],
      'one audit row in the connecting workspace\'s chain (none for the refused connects)');
    t.same(await chainOf(s, pub.accountId), [['platform.published', {}],
      ['connection.created', { connection_id: conns[0]!.id, workspace_id: user.accountId }]], 'and one in the publisher\'s');
  });
}
