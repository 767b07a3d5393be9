/**
 * Store contract, audit reads and exports: the read filters (time range,
 * decision, reason, scope, certificate, with type, agent and cursor), the
 * chain range of a time window, the push-export cursors (claims with leases,
 * moves that only go forward from where they were, the backlog) and the
 * service key (the first stored wins).
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import type { ServiceKeyRecord } from '../../../sidecar/store/types.js';
import type { OpenStore } from './contract.js';
import { NOW, seed, storeFor, together, values } from './contract-fixtures.js';
import { decideOnce } from './contract-audit.js';

/** Runs the audit reads and exports part. */
export async function auditExportContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);

  await t.test('audit read filters', async (t) => {
    const x = await seed(s);
    const ids: string[] = [];
    const make = async (at: number, decision: 'allow' | 'deny', reason: string, scope: string, certId: string | null): Promise<void> => {
      ids.push(await decideOnce(s, x, {
        createdAt: NOW + at, decision,
        audit: {
          id: randomUUID(), accountId: x.accountId, eventType: decision === 'allow' ? 'proof.verified' : 'proof.rejected', connectionId: x.c.id, agentId: x.agentId,
          certId, requiredScope: scope, details: { decision, decision_reason: reason }, createdAt: NOW + at,
        },
      }));
    };
    await make(10, 'allow', 'delegation_valid', 'data:read', 'cert-a');
    await make(20, 'deny', 'scope_not_granted', 'data:write', 'cert-a');
    await make(30, 'deny', 'delegation_revoked', 'data:read', 'cert-b');
    await make(40, 'allow', 'delegation_valid', 'data:read', null);
    const q = async (f: Record<string, unknown>): Promise<string[]> =>
      (await s.proofs.listAudit({ accountId: x.accountId, limit: 10, ...f })).map((r) => r.id);
    t.same(await q({ from: NOW + 20, to: NOW + 40 }), [ids[2], ids[1]], 'from inclusive, to exclusive');
    t.same(await q({ decision: 'deny' }), [ids[2], ids[1]], 'decision');
    t.same(await q({ reason: 'delegation_valid' }), [ids[3], ids[0]], 'reason');
    t.same(await q({ scope: 'data:write' }), [ids[1]], 'scope');
    t.same(await q({ certId: 'cert-a' }), [ids[1], ids[0]], 'certificate');
    t.same(await q({ certId: 'cert-a', decision: 'allow' }), [ids[0]], 'filters combine');
    const all = await s.proofs.listAudit({ accountId: x.accountId, limit: 10 });
    t.same(await q({ decision: 'deny', before: all[1]!.seq }), [ids[1]], 'with the cursor');
    t.same(await q({ eventType: 'proof.rejected', scope: 'data:read' }), [ids[2]], 'with the type');
  });

  await t.test('chain range of a time window: contiguous positions', async (t) => {
    const x = await seed(s);
    for (const at of [10, 30, 20, 40]) await decideOnce(s, x, { createdAt: NOW + at });
    t.same(await s.audit.chainRange(x.accountId, NOW + 20, NOW + 35), { first: 2, last: 3 }, 'first row at or after from, last row before to');
    t.same(await s.audit.chainRange(x.accountId, NOW, NOW + 1000), { first: 1, last: 4 });
    t.equal(await s.audit.chainRange(x.accountId, NOW + 50, NOW + 60), undefined, 'none in the window');
    t.equal(await s.audit.chainRange(randomUUID(), NOW, NOW + 60), undefined, 'no chain');
  });

  await t.test('export cursors: leases, forward-only moves, backlog', async (t) => {
    const sink = `sink-${randomUUID()}`;
    const x = await seed(s);
    const y = await seed(s);
    for (let i = 0; i < 3; i++) await decideOnce(s, x);
    await decideOnce(s, y);
    const base = await s.audit.exportBacklog(sink);
    t.ok(base >= 4, 'the backlog counts every account\'s rows');
    const mine = <T extends { accountId: string }>(cs: T[]): T[] => cs.filter((c) => c.accountId === x.accountId || c.accountId === y.accountId);
    const claimed = mine(await s.audit.claimExport(sink, NOW, 1000, 10_000));
    t.same(claimed.map((c) => [c.accountId, c.after, c.head]).sort(), [[x.accountId, 0, 3], [y.accountId, 0, 1]].sort(), 'both accounts, from 0');
    t.same(mine(await s.audit.claimExport(sink, NOW + 500, 1000, 10_000)), [], 'leased: not claimed again');
    await s.audit.advanceExport(sink, [{ accountId: x.accountId, from: 0, to: 2 }]);
    await s.audit.advanceExport(sink, [{ accountId: x.accountId, from: 0, to: 1 }]);
    t.equal(await s.audit.exportBacklog(sink), base - 2, 'a move from a stale position is ignored');
    await s.audit.releaseExport(sink, [y.accountId]);
    const again = mine(await s.audit.claimExport(sink, NOW + 600, 1000, 10_000));
    t.same(again.map((c) => [c.accountId, c.after, c.head]).sort(), [[x.accountId, 2, 3], [y.accountId, 0, 1]].sort(), 'moved and released cursors are claimable');
    t.same(mine(await s.audit.claimExport(sink, NOW + 2000, 1000, 10_000)).length, 2, 'a lease runs out');
    await s.audit.advanceExport(sink, [{ accountId: x.accountId, from: 2, to: 3 }, { accountId: y.accountId, from: 0, to: 1 }]);
    t.equal(await s.audit.exportBacklog(sink), base - 4);
    t.same(mine(await s.audit.claimExport(sink, NOW + 5000, 1000, 10_000)), [], 'nothing past the heads');
    const other = `sink-${randomUUID()}`;
    t.equal(await s.audit.exportBacklog(other), base, 'cursors are per sink');
    const racing = values(t, await together(6, () => s.audit.claimExport(`race-${sink}`, NOW, 1000, 10_000)));
    t.equal(racing.flatMap((r) => mine(r)).length, 2, 'concurrent claims: each account leased once');
  });

  await t.test('service keys: the first stored for a purpose wins', async (t) => {
    const key = (id: string, purpose: string): ServiceKeyRecord => ({ id, purpose, publicKey: `{"k":"${id}"}`, secretEnc: new Uint8Array([1, 2, id.length]), createdAt: NOW });
    const purpose = `p-${randomUUID()}`;
    const got = values(t, await together(5, (i) => s.audit.ensureServiceKey(key(`key-${i}-${randomUUID()}`, purpose))));
    t.equal(new Set(got.map((k) => k.id)).size, 1, 'every caller gets the same key');
    t.same(await s.audit.ensureServiceKey(key('late', purpose)), got[0]);
    t.ok((await s.audit.serviceKeys()).some((k) => k.id === got[0]!.id && k.purpose === purpose));
  });
}
