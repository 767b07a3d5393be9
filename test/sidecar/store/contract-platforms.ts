/**
 * Store contract, platforms part: createPlatform (atomic with its connection,
 * key and event; the platform limit checked inside the transaction, also under
 * concurrency), callbacks, connections, key rotation (grace only for the
 * newest previous key; one active key after concurrent rotations), connection
 * removal (once, with every side effect, or nothing; the audit rows of creating, rotating and removing
 * written with the change, in two chains for a removal), agents, and editing a platform (name and
 * description with its audit row in one transaction; a published platform keeps a description and a callback).
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { ApiKeyRecord, AuditEventRecord, ConnectionRecord, PlatformRecord } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import {
  NOW, approved, auditRow, chainOf, count, ev, newPrefix, request, seed, storeFor, together, values,
} from './contract-fixtures.js';

/** Runs the platforms part. */
export async function platformsContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('createPlatform: atomic with its event; the limit holds under concurrency', async (t) => {
    const x = await seed(s);
    t.equal(await s.platforms.countPlatforms(x.accountId), 1);
    t.same(await s.platforms.getPlatform(x.p.id), x.p, 'platform read back as written');
    t.same(await s.platforms.getConnection(x.c.id), x.c);
    t.same(await s.platforms.getApiKeyByPrefix(x.k.prefix), x.k);
    const mk = (n: number): [PlatformRecord, ConnectionRecord, ApiKeyRecord] => {
      const p = { ...x.p, id: randomUUID(), name: `p${n}`, createdAt: NOW + n };
      const c = { ...x.c, id: randomUUID(), platformId: p.id, createdAt: NOW + n };
      return [p, c, { ...x.k, id: randomUUID(), connectionId: c.id, prefix: newPrefix() }];
    };
    const made = (p: PlatformRecord) => [auditRow(x.accountId, 'platform.created', { platform_id: p.id })];
    const results = values(t, await together(6, (i) => { const [p, c, k] = mk(i + 1); return s.platforms.createPlatform(p, c, k, ev(x.accountId, p.id, c.id, 'connection.created'), 3, made(p)); }));
    t.equal(count(results, true), 2, '6 concurrent creates with a limit of 3 (1 exists): exactly 2');
    t.equal(await s.platforms.countPlatforms(x.accountId), 3);
    t.equal((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 50 })).length, 2, 'one event per created platform, none for refused ones');
    t.same((await s.platforms.listPlatforms(x.accountId)).map((p) => p.createdAt), [...(await s.platforms.listPlatforms(x.accountId)).map((p) => p.createdAt)].sort((a, b) => a - b), 'listed oldest first');
    t.equal((await s.platforms.listConnections(x.accountId)).length, 3);
    const created = (await s.platforms.listPlatforms(x.accountId)).slice(1).map((p) => p.id).sort();
    t.same((await chainOf(s, x.accountId)).map(([type, d]) => [type, d.platform_id]).sort(),
      created.map((id) => ['platform.created', id]), 'one audit row per created platform, none for refused ones');

    // Fails late (the key prefix is taken): no platform, connection or event remains.
    const [p, c, k] = mk(9);
    await t.rejects(s.platforms.createPlatform(p, c, { ...k, prefix: x.k.prefix }, ev(x.accountId, p.id, c.id, 'connection.created'), 10, made(p)));
    t.equal(await s.platforms.getPlatform(p.id), undefined, 'no platform');
    t.equal(await s.platforms.getConnection(c.id), undefined, 'no connection');
    t.equal(await s.platforms.countPlatforms(x.accountId), 3);
    t.equal((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 50 })).length, 2, 'no event');
    t.equal((await chainOf(s, x.accountId)).length, 2, 'no audit row');
  });

  await t.test('callbacks: set (re-enables), disable once', async (t) => {
    const x = await seed(s);
    await s.platforms.setCallbackUrl(x.p.id, 'https://example.com/hook');
    t.equal((await s.platforms.getPlatform(x.p.id))?.callbackUrl, 'https://example.com/hook');
    await s.platforms.disableCallback(x.p.id, NOW + 5);
    await s.platforms.disableCallback(x.p.id, NOW + 6);
    t.equal((await s.platforms.getPlatform(x.p.id))?.callbackDisabledAt, NOW + 5, 'disabled once; the first time is kept');
    await s.platforms.setCallbackUrl(x.p.id, 'https://example.com/new');
    const p = await s.platforms.getPlatform(x.p.id);
    t.same([p?.callbackUrl, p?.callbackDisabledAt], ['https://example.com/new', null], 'a new URL re-enables');
    t.equal(await s.platforms.setCallbackUrl(x.p.id, null), true);
    t.equal((await s.platforms.getPlatform(x.p.id))?.callbackUrl, null);
  });

  await t.test('rotateApiKey: grace for the newest previous key only; atomic; one active key after a race', async (t) => {
    const x = await seed(s);
    const k2: ApiKeyRecord = { ...x.k, id: randomUUID(), prefix: newPrefix(), digest: 'b'.repeat(64) };
    const rotated = (pp: string | null) => [auditRow(x.accountId, 'connection.key_rotated', { previous_prefix: pp })];
    const prev = await s.platforms.rotateApiKey(x.c.id, k2, NOW + 5_000, (pp) => ev(x.accountId, x.p.id, x.c.id, `rotated:${pp}`), rotated);
    t.same(prev, x.k, 'returns the previous key');
    t.same(await s.platforms.getApiKeyByPrefix(x.k.prefix), { ...x.k, status: 'rotated', validUntil: NOW + 5_000 });
    const k3: ApiKeyRecord = { ...x.k, id: randomUUID(), prefix: newPrefix() };
    await s.platforms.rotateApiKey(x.c.id, k3, NOW + 6_000, (pp) => ev(x.accountId, x.p.id, x.c.id, `rotated:${pp}`), rotated);
    t.equal((await s.platforms.getApiKeyByPrefix(x.k.prefix))?.validUntil, null, 'the older rotated key lost its grace');
    t.same(await s.platforms.getApiKeyByPrefix(k2.prefix), { ...k2, status: 'rotated', validUntil: NOW + 6_000 });
    t.equal((await s.platforms.getApiKeyByPrefix(k3.prefix))?.status, 'active');
    const types = (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10 })).map((d) => d.eventType).sort();
    t.same(types, [`rotated:${k2.prefix}`, `rotated:${x.k.prefix}`].sort(), 'one event each, built from the previous prefix');
    const rows = [['connection.key_rotated', { previous_prefix: x.k.prefix }],
      ['connection.key_rotated', { previous_prefix: k2.prefix }]];
    t.same(await chainOf(s, x.accountId), rows, 'one audit row each, built from the previous prefix');

    // Fails late (the new prefix is taken): the active key stays, no event.
    await t.rejects(s.platforms.rotateApiKey(x.c.id, { ...k3, id: randomUUID() }, null, () => ev(x.accountId, x.p.id, x.c.id, 'rotated:bad'), rotated));
    t.equal((await s.platforms.getApiKeyByPrefix(k3.prefix))?.status, 'active', 'still active');
    t.equal((await s.platforms.getApiKeyByPrefix(k2.prefix))?.validUntil, NOW + 6_000, 'grace unchanged');
    t.equal((await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10 })).length, 2, 'no event');
    t.same(await chainOf(s, x.accountId), rows, 'no audit row');

    const y = await seed(s);
    const next = Array.from({ length: 6 }, () => ({ ...y.k, id: randomUUID(), prefix: newPrefix() }));
    const prevs = values(t, await together(6, (i) => s.platforms.rotateApiKey(y.c.id, next[i]!, null, (pp) => ev(y.accountId, y.p.id, y.c.id, `rotated:${pp}`), () => [])));
    const statuses = await Promise.all([y.k, ...next].map(async (k) => (await s.platforms.getApiKeyByPrefix(k.prefix))?.status));
    t.equal(count(statuses, 'active'), 1, '6 concurrent rotations: exactly one active key');
    t.equal(count(statuses, 'rotated'), 6);
    t.equal(new Set(prevs.map((p) => p?.prefix)).size, 6, 'each rotation replaced a different key (serialized)');
  });

  await t.test('removeConnection: every side effect once, or nothing', async (t) => {
    const x = await seed(s);
    const c1 = await approved(s, x);
    const pending = request(x, NOW + 2);
    await s.delegations.createRequest(pending);
    // Fails late (an event id is taken): nothing changes.
    const taken = ev(x.accountId, x.p.id, x.c.id, 'taken');
    await s.platforms.setCallbackUrl(x.p.id, null);
    await s.delegations.revokeCertificate((await approved(s, x, NOW + 3)).id, 'setup', NOW + 3, taken);
    // The audit rows go to two chains: the connection's workspace's and (here) a publisher's.
    const publisher = await seed(s);
    const removedRows = (certs: { certId: string }[]) => [
      auditRow(x.accountId, 'connection.removed', { revoked: certs.map((c) => c.certId) }),
      auditRow(publisher.accountId, 'connection.removed', { workspace_id: x.accountId })];
    await t.rejects(s.platforms.removeConnection(x.c.id, NOW + 8, () => [{ ...taken }], removedRows));
    t.equal((await s.platforms.getConnection(x.c.id))?.status, 'active', 'connection still active');
    t.equal((await s.platforms.getApiKeyByPrefix(x.k.prefix))?.status, 'active', 'key still active');
    t.equal((await s.delegations.getCertificate(c1.id))?.status, 'approved', 'certificate still approved');
    t.equal((await s.delegations.getRequest(pending.id))?.state, 'pending', 'request still pending');
    t.same([await chainOf(s, x.accountId), await chainOf(s, publisher.accountId)], [[], []], 'no audit row');

    const outcomes = values(t, await together(4, (i) => s.platforms.removeConnection(x.c.id, NOW + 9 + i, (certs, denied) => [
      ...certs.map((c) => ev(x.accountId, x.p.id, x.c.id, `revoked:${c.certId}`)),
      ...denied.map((d) => ev(x.accountId, x.p.id, x.c.id, `denied:${d.requestId}`)),
      ev(x.accountId, x.p.id, x.c.id, 'connection.removed'),
    ], removedRows)));
    const winners = outcomes.filter((o) => o !== undefined);
    t.equal(winners.length, 1, '4 concurrent removals: one');
    t.same(winners[0], [{ certId: c1.id, agentId: x.agentId }], 'returns the certificates it revoked');
    const conn = await s.platforms.getConnection(x.c.id);
    t.equal(conn?.status, 'removed');
    t.ok(conn?.removedAt !== null && conn!.removedAt >= NOW + 9);
    t.same(await s.platforms.getApiKeyByPrefix(x.k.prefix), { ...x.k, status: 'removed', validUntil: null });
    const rc = await s.delegations.getCertificate(c1.id);
    t.same([rc?.status, rc?.revokeReason], ['revoked', 'connection_removed']);
    t.equal((await s.delegations.getRequest(pending.id))?.state, 'denied');
    t.equal(await s.delegations.activeCertificateForAgent(x.agentId), undefined);
    const types = (await s.outbox.listDeliveries({ accountId: x.accountId, limit: 10 })).map((d) => d.eventType).sort();
    t.same(types, ['connection.removed', `denied:${pending.id}`, `revoked:${c1.id}`, 'taken'].sort());
    t.ok((await s.delegations.revokedCertificateIds()).includes(c1.id));
    t.same(await chainOf(s, x.accountId), [['connection.removed', { revoked: [c1.id] }]], 'one row in the workspace\'s chain');
    t.same(await chainOf(s, publisher.accountId), [['connection.removed', { workspace_id: x.accountId }]],
      'and one in the publisher\'s');
    t.equal(await s.platforms.rotateApiKey(x.c.id, { ...x.k, id: randomUUID(), prefix: newPrefix() }, null, () => ev(x.accountId, x.p.id, x.c.id, 'x'), () => [auditRow(x.accountId, 'connection.key_rotated')]), undefined, 'no rotation after removal');
    t.equal((await chainOf(s, x.accountId)).length, 1, 'and no audit row');
  });

  await t.test('agents: created, read, listed by account and by connection', async (t) => {
    const x = await seed(s);
    const a = await s.platforms.getAgent(x.agentId);
    t.same(a && { ...a, secretEnc: Array.from(a.secretEnc) }, {
      id: x.agentId, connectionId: x.c.id, accountId: x.accountId, name: 'agent', agentType: 'api_agent', custodyMode: 'custodial',
      publicKey: '{"pk":1}', secretEnc: [7, 7, 7], createdAt: NOW,
    });
    const second = { ...a!, id: randomUUID(), name: 'second', createdAt: NOW + 1 };
    await s.platforms.createAgent(second);
    await t.rejects(s.platforms.createAgent(second), 'a duplicate id is refused');
    t.same((await s.platforms.listAgents({ connectionId: x.c.id })).map((g) => g.id), [x.agentId, second.id], 'by connection, oldest first');
    t.same((await s.platforms.listAgents({ accountId: x.accountId })).map((g) => g.id), [x.agentId, second.id], 'by account');
    t.same(await s.platforms.listAgents({ accountId: randomUUID() }), []);
    t.equal(await s.platforms.getAgent(randomUUID()), undefined);
  });

  await t.test('updatePlatform: name and description with the audit row; a published platform keeps a description',
    async (t) => {
      const x = await seed(s, { callbackUrl: 'https://example.com/hook' });
      const audit = (b: PlatformRecord, a: PlatformRecord): AuditEventRecord[] => [{
        id: randomUUID(), accountId: x.accountId, eventType: 'platform.updated', connectionId: null, agentId: null,
        certId: null, requiredScope: null, details: { platform_id: b.id, from: b.name, to: a.name }, createdAt: NOW,
      }];
      const chain = async (): Promise<unknown[]> =>
        (await s.audit.readChain(x.accountId, 0, 100)).map((r) => [r.eventType, r.details]);
      const other = await seed(s);
      t.same(await s.platforms.updatePlatform(x.p.id, other.accountId, { name: 'stolen' }, audit),
        { outcome: 'not_found' }, 'only the workspace\'s own platform');
      t.same(await s.platforms.updatePlatform(randomUUID(), x.accountId, { name: 'n' }, audit), { outcome: 'not_found' });
      t.same(await chain(), [], 'a refused edit writes no audit row');

      const r = await s.platforms.updatePlatform(x.p.id, x.accountId, { name: 'Renamed' }, audit);
      t.match(r, { outcome: 'updated', before: { name: 'p', description: 'd' }, after: { name: 'Renamed', description: 'd' } });
      t.same(await s.platforms.getPlatform(x.p.id), { ...x.p, name: 'Renamed' }, 'only the name changed');
      t.same(await chain(), [['platform.updated', { platform_id: x.p.id, from: 'p', to: 'Renamed' }]]);
      t.equal((await s.platforms.getPlatform(other.p.id))?.name, 'p', 'the other workspace\'s platform is untouched');

      await s.platforms.updatePlatform(x.p.id, x.accountId, { description: '' }, () => []);
      t.equal((await s.platforms.getPlatform(x.p.id))?.description, '', 'a draft\'s description can be emptied');
      t.equal(await s.publishing.setPublishState(x.p.id, x.accountId, 'draft', 'published', []), false,
        'no publishing without a description');
      await s.platforms.updatePlatform(x.p.id, x.accountId, { description: 'Does things.' }, () => []);
      t.equal(await s.publishing.setPublishState(x.p.id, x.accountId, 'draft', 'published', []), true);
      t.same(await s.platforms.updatePlatform(x.p.id, x.accountId, { name: 'X', description: '' }, audit),
        { outcome: 'description_required' });
      t.match(await s.platforms.getPlatform(x.p.id), { name: 'Renamed', description: 'Does things.' }, 'nothing changed');
      t.equal((await chain()).length, 1, 'and no audit row');
    });

  await t.test('a published platform keeps a callback; publishing re-checks it in its statement', async (t) => {
    const x = await seed(s);
    t.equal(await s.publishing.setPublishState(x.p.id, x.accountId, 'draft', 'published', []), false,
      'no publishing without a callback');
    t.equal(await s.platforms.setCallbackUrl(x.p.id, 'https://example.com/hook'), true);
    t.equal(await s.publishing.setPublishState(x.p.id, x.accountId, 'draft', 'published', []), true);
    t.equal(await s.platforms.setCallbackUrl(x.p.id, null), false, 'clearing it is refused');
    t.equal((await s.platforms.getPlatform(x.p.id))?.callbackUrl, 'https://example.com/hook', 'nothing changed');
    t.equal(await s.platforms.setCallbackUrl(x.p.id, 'https://example.com/new'), true, 'another one is fine');
    t.equal(await s.publishing.setPublishState(x.p.id, x.accountId, 'published', 'unpublished', []), true);
    t.equal(await s.platforms.setCallbackUrl(x.p.id, null), true, 'unpublished, it can be cleared');
    t.equal(await s.publishing.setPublishState(x.p.id, x.accountId, 'unpublished', 'published', []), false,
      'and it cannot be published again without one');
  });
}
