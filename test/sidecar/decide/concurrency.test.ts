/**
 * Concurrency on the decision path, through the real server:
 * - one bundle verified 200 times at once: exactly one allow;
 * - 3N concurrent verifies against a balance of N calls: exactly N answers
 *   that are not 402;
 * - verifies racing a revoke: nothing allows after the revoke has answered,
 *   and the audit never records an allow after a revocation-deny.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Res, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, pool, usage, verify } from './helpers.js';

let sc: TestSidecar;
// The production default on two cores (2 workers): verifies race across worker threads too.
t.before(async () => { sc = await startSidecar({ cryptoWorkers: 2 }); });
t.teardown(async () => { await sc.close(); });

t.test('200 concurrent verifies of one bundle: exactly one allow', async (t) => {
  const f = await specFlow(sc, 'race@example.com', { approve: ['data:read'] });
  const b = await bundleFor(f);
  const before = await usage(f.user);
  const rs = await Promise.all(Array.from({ length: 200 }, () => verify(f.platform, b, 'data:read')));
  const allows = rs.filter((r) => r.status === 200 && r.body?.decision === 'allow');
  const spent = rs.filter((r) => r.status === 400 && r.body?.error?.code === 'invalid_challenge');
  t.equal(allows.length, 1, 'one allow');
  t.equal(spent.length, 199, '199 invalid_challenge');
  t.equal(rs.filter((r) => r.status >= 500).length, 0, 'no 5xx');

  const after = await usage(f.user);
  t.equal(after.allows - before.allows, 1, 'one allow counted');
  t.equal(after.denies - before.denies, 0);
  t.equal(after.verify_calls - before.verify_calls, 1, 'only the call that spent the challenge is metered');
  t.equal(before.balance_micros - after.balance_micros, after.price_per_verify_micros, 'balance matches the calls');
  const verified = await auditAll(f.user, 'event_type=proof.verified');
  t.equal(verified.length, 1, 'one proof.verified row');
  t.equal(verified[0]!.event_id, allows[0]!.body.audit_event_id);
});

t.test('distinct bundles verified concurrently: no lost counter updates', async (t) => {
  const f = await specFlow(sc, 'many@example.com', { approve: ['data:read'] });
  const bundles = [];
  for (let i = 0; i < 40; i++) bundles.push(await bundleFor(f));
  const before = await usage(f.user);
  const rs = await Promise.all(bundles.map((b, i) => verify(f.platform, b, i % 2 ? 'data:read' : 'data:write')));
  t.equal(rs.filter((r) => r.body?.decision === 'allow' && r.body.decision_reason === 'authorized').length, 20);
  t.equal(rs.filter((r) => r.body?.decision === 'deny' && r.body.decision_reason === 'not_delegated').length, 20);
  const after = await usage(f.user);
  t.same([after.verify_calls - before.verify_calls, after.allows - before.allows, after.denies - before.denies], [40, 20, 20]);
  t.equal(before.balance_micros - after.balance_micros, 40 * 2000);
  t.equal((await auditAll(f.user)).filter((e) => e.event_type.startsWith('proof.') && e.event_type !== 'proof.presented').length, 40, 'one row per decision');
});

t.test('3N concurrent verifies with a balance of N calls: exactly N are not 402', async (t) => {
  const N = 8;
  const small = await startSidecar({ alphaCreditsMicros: N * 2000, cryptoWorkers: 2 });
  t.teardown(() => small.close());
  const f = await specFlow(small, 'broke@example.com', { approve: ['data:read'] });
  const bundles = [];
  for (let i = 0; i < 3 * N; i++) bundles.push(await bundleFor(f));
  const rs = await Promise.all(bundles.map((b) => verify(f.platform, b, 'data:read')));
  const paid = rs.filter((r) => r.status !== 402);
  t.equal(paid.length, N, 'exactly N answers that are not 402');
  t.ok(paid.every((r) => r.status === 200 && r.body?.decision === 'allow'), 'and they are allows');
  t.ok(rs.filter((r) => r.status === 402).every((r) => r.body?.error?.code === 'credits_exhausted'), 'the rest are credits_exhausted');
  const u = await usage(f.user);
  t.same([u.balance_micros, u.verify_calls, u.allows, u.denies, u.remaining_verify_calls], [0, N, N, 0, 0], 'balance exactly used up, never negative');
  t.equal((await auditAll(f.user, 'event_type=proof.verified')).length, N);
});

t.test('verifies racing a revoke: nothing allows once the revoke has answered', async (t) => {
  const K = 60;
  const f = await specFlow(sc, 'revoke-race@example.com', { approve: ['data:read'] });
  // Warm every cache (certificate, verifier, status) first.
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized', undefined, 'warm-up');
  const bundles = [];
  for (let i = 0; i < K; i++) bundles.push(await bundleFor(f));

  let completed = 0;
  let revokeAnsweredAt = -1; // completions counted when the revoke answered
  let revoke: Promise<Res> | undefined;
  const done: { order: number; startedAfterRevoke: boolean; r: Res }[] = [];
  const deadline = Date.now() + 30_000;
  await pool(bundles, 10, async (b) => {
    if (Date.now() > deadline) throw new Error('revoke race: time limit');
    const startedAfterRevoke = revokeAnsweredAt >= 0;
    const r = await verify(f.platform, b, 'data:read');
    done.push({ order: completed++, startedAfterRevoke, r });
    if (completed === 10 && !revoke) {
      revoke = f.user.post(`/v1/service/delegations/${f.certId}/revoke`, { reason: 'race' });
      void revoke.then(() => { revokeAnsweredAt = completed; });
    }
  });
  const rv = await revoke!;
  t.equal(rv.status, 200, rv.text);
  t.ok(revokeAnsweredAt >= 10, `revoke answered after ${revokeAnsweredAt} completions`);

  t.equal(done.length, K);
  for (const d of done) {
    t.equal(d.r.status, 200, `#${d.order}: a decision`);
    t.ok(['allow:authorized', 'deny:delegation_revoked'].includes(`${d.r.body?.decision}:${d.r.body?.decision_reason}`), `#${d.order}: ${d.r.body?.decision_reason}`);
  }
  // The verifies sent once the revoke had answered. (Not those merely read after it: a verify decided
  // before the revoke committed can have its answer read in the same turn as the revoke's, so the
  // client-side order of completions says nothing about the server's; the audit check below does.)
  const late = done.filter((d) => d.startedAfterRevoke);
  t.ok(late.length > 0, `${late.length} verifies sent after the revoke answered`);
  for (const d of late) expectDecision(t, d.r, 'deny', 'delegation_revoked', undefined, `completion #${d.order} (sent after the revoke)`);
  t.ok(done.filter((d) => d.startedAfterRevoke).every((d) => d.r.body?.decision === 'deny'), 'every verify started after the revoke denies');
  t.comment(`allows: ${done.filter((d) => d.r.body?.decision === 'allow').length}, denies: ${done.filter((d) => d.r.body?.decision === 'deny').length}`);

  // The audit (newest first) never shows an allow newer than a revocation-deny.
  const events = (await auditAll(f.user)).filter((e) => e.event_type.startsWith('proof.') && e.event_type !== 'proof.presented');
  const firstRevokedDeny = events.map((e) => e.details.decision_reason).lastIndexOf('delegation_revoked');
  t.ok(firstRevokedDeny >= 0, 'some verify was denied for revocation');
  const newerAllows = events.slice(0, firstRevokedDeny).filter((e) => e.details.decision === 'allow');
  t.equal(newerAllows.length, 0, 'no allow recorded after the first revocation-deny');
  t.equal(events.length, K + 1, 'every verify left one row');
  t.equal(events.filter((e) => e.details.decision === 'allow').length, done.filter((d) => d.r.body?.decision === 'allow').length + 1,
    'the recorded allows are exactly the answered ones (plus the warm-up)');
});
