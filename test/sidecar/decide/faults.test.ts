/**
 * Store faults on the decision path, injected through a store wrapper
 * (test/helpers/store-faults.ts), so they hold for any engine: verify fails
 * closed with 200 `indeterminate`, commits nothing (challenge unconsumed,
 * no audit row, balance unchanged), never answers 5xx, and works again once
 * the fault clears. That a failing `commitDecision` writes nothing at all is
 * the store contract's part (test/sidecar/store/contract-*.ts).
 */
import t from 'tap';
import { specFlow } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { startFaultySidecar } from '../../helpers/store-faults.js';
import type { FaultRule, FaultySidecar } from '../../helpers/store-faults.js';
import { auditAll, bundleFor, expectDecision, expectError, usage, verify } from './helpers.js';
import type { Bundle, T } from './helpers.js';

let sc: FaultySidecar;
let f: Flow;
t.before(async () => {
  sc = await startFaultySidecar();
  f = await specFlow(sc, 'faults@example.com', { approve: ['data:read'] });
});
t.afterEach(() => { sc.faults.clear(); });
t.teardown(async () => { await sc.close(); });

/** Makes every store operation matching `ops` reject with a disk error; counts the hits. */
function faultOn(ops: RegExp | string): FaultRule {
  // Successful API-key authentications are cached for a few seconds: start from an uncached
  // key so that the authentication reads run (and can fail) too.
  sc.app.ctx.caches.apiKeys.clear();
  return sc.faults.fail(ops, { error: () => new Error('disk I/O error (injected)') });
}

/** The committed state an indeterminate answer must leave untouched. */
async function snapshot(flow: Flow) {
  const u = await usage(flow.user);
  const events = await auditAll(flow.user);
  return { balance: u.balance_micros, calls: u.verify_calls, allows: u.allows, denies: u.denies, events: events.map((e) => e.event_id) };
}

async function failsClosed(t: T, flow: Flow, re: RegExp | string, reason: 'store_unavailable' | 'audit_write_failed', bundle?: Bundle, scope = 'data:read'): Promise<void> {
  const b = bundle ?? await bundleFor(flow);
  const before = await snapshot(flow);
  const h = faultOn(re);
  const r = await verify(flow.platform, b, scope);
  sc.faults.clear();
  t.ok(h.hits > 0, `${re}: the fault fired`);
  expectDecision(t, r, 'indeterminate', reason, undefined, String(re));
  t.notOk('agent_id' in (r.body ?? {}) || 'audit_event_id' in (r.body ?? {}), `${re}: an indeterminate answer carries no decision details`);
  t.same(await snapshot(flow), before, `${re}: nothing committed`);
  expectDecision(t, await verify(flow.platform, b, 'data:read'), 'allow', 'authorized', undefined, `${re}: after the fault clears, the same bundle (challenge unconsumed)`);
}

t.test('the decision transaction fails', async (t) => {
  await failsClosed(t, f, 'proofs.commitDecision', 'audit_write_failed');
});

t.test('a deny is indeterminate too when it cannot be recorded', async (t) => {
  const b = await bundleFor(f);
  const before = await snapshot(f);
  faultOn('proofs.commitDecision');
  expectDecision(t, await verify(f.platform, b, 'data:write'), 'indeterminate', 'audit_write_failed');
  sc.faults.clear();
  t.same(await snapshot(f), before);
  expectDecision(t, await verify(f.platform, b, 'data:write'), 'deny', 'not_delegated');
});

t.test('read faults before the decision', async (t) => {
  await failsClosed(t, f, 'proofs.getChallenge', 'store_unavailable');
  await failsClosed(t, f, 'proofs.creditsOf', 'store_unavailable');
  await failsClosed(t, f, 'platforms.getApiKeyByPrefix', 'store_unavailable');
  await failsClosed(t, f, 'platforms.getConnection', 'store_unavailable');
});

t.test('read faults on cold certificate and revocation caches', async (t) => {
  // Fresh delegations: their certificate and status were never loaded by verify.
  const g = await specFlow(sc, 'faults-cold@example.com', { approve: ['data:read'] });
  await failsClosed(t, g, 'delegations.getCertificate', 'store_unavailable');
  const h = await specFlow(sc, 'faults-cold2@example.com', { approve: ['data:read'] });
  await failsClosed(t, h, 'accounts.getAccount', 'store_unavailable');
});

t.test('every statement failing: still a 200 indeterminate, never a 5xx', async (t) => {
  const b = await bundleFor(f);
  const before = await snapshot(f);
  const h = faultOn(/./);
  const r = await verify(f.platform, b, 'data:read');
  sc.faults.clear();
  t.ok(h.hits > 0);
  expectDecision(t, r, 'indeterminate', 'store_unavailable');
  t.same(await snapshot(f), before);
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized');
});

t.test('a transient fault (first attempt only)', async (t) => {
  const b = await bundleFor(f);
  sc.faults.fail('proofs.commitDecision', { times: 1, error: () => new Error('database is locked (injected, once)') });
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'indeterminate', 'audit_write_failed');
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized', undefined, 'retry with the same bundle');
  expectError(t, await verify(f.platform, b, 'data:read'), 400, 'invalid_challenge', 'then it is spent');
});

t.test('faults while metering a refused call: the 400 stands, no 5xx', async (t) => {
  const b = await bundleFor(f);
  const h = faultOn('proofs.consumeAndDebit');
  expectError(t, await verify(f.platform, 'garbage', 'data:read'), 400, 'invalid_proof', 'garbage bundle');
  expectError(t, await verify(f.platform, { ...b, aud: crypto.randomUUID() }, 'data:read'), 400, 'invalid_challenge', 'foreign audience');
  expectError(t, await verify(f.platform, { ...b, presented_at: '2000-01-01T00:00:00.000Z' }, 'data:read'), 400, 'proof_stale', 'stale (would burn the challenge)');
  expectError(t, await verify(f.platform, b, 'data:*'), 400, 'invalid_scopes', 'bad scope');
  sc.faults.clear();
  t.ok(h.hits > 0, 'metering was attempted and failed');
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized');
});
