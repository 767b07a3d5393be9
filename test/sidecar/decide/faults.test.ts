/**
 * Store faults on the decision path (SqliteStore.injectFault): verify fails
 * closed with 200 `indeterminate`, commits nothing (challenge unconsumed,
 * no audit row, balance unchanged), never answers 5xx, and works again once
 * the fault clears.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import type { SqliteStore } from '../../../sidecar/store/index.js';
import { auditAll, bundleFor, expectDecision, expectError, usage, verify } from './helpers.js';
import type { Bundle, T } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
let store: SqliteStore;
t.before(async () => {
  sc = await startSidecar();
  store = sc.app.ctx.store as SqliteStore;
  f = await specFlow(sc, 'faults@example.com', { approve: ['data:read'] });
});
t.afterEach(() => { store.injectFault(undefined); });
t.teardown(async () => { await sc.close(); });

/** Throws a disk error for every statement matching `re`; counts the hits. */
function faultOn(re: RegExp): { hits: number } {
  const h = { hits: 0 };
  // Successful API-key authentications are cached for a few seconds: start from an uncached
  // key so that the authentication SELECTs run (and can fail) too.
  sc.app.ctx.caches.apiKeys.clear();
  store.injectFault((sql) => {
    if (re.test(sql)) { h.hits++; throw new Error('SQLITE_IOERR: disk I/O error'); }
  });
  return h;
}

/** The committed state an indeterminate answer must leave untouched. */
async function snapshot(flow: Flow) {
  const u = await usage(flow.user);
  const events = await auditAll(flow.user);
  return { balance: u.balance_micros, calls: u.verify_calls, allows: u.allows, denies: u.denies, events: events.map((e) => e.event_id) };
}

async function failsClosed(t: T, flow: Flow, re: RegExp, reason: 'store_unavailable' | 'audit_write_failed', bundle?: Bundle, scope = 'data:read'): Promise<void> {
  const b = bundle ?? await bundleFor(flow);
  const before = await snapshot(flow);
  const h = faultOn(re);
  const r = await verify(flow.platform, b, scope);
  store.injectFault(undefined);
  t.ok(h.hits > 0, `${re}: the fault fired`);
  expectDecision(t, r, 'indeterminate', reason, undefined, String(re));
  t.notOk('agent_id' in (r.body ?? {}) || 'audit_event_id' in (r.body ?? {}), `${re}: an indeterminate answer carries no decision details`);
  t.same(await snapshot(flow), before, `${re}: nothing committed`);
  expectDecision(t, await verify(flow.platform, b, 'data:read'), 'allow', 'authorized', undefined, `${re}: after the fault clears, the same bundle (challenge unconsumed)`);
}

t.test('write faults inside the decision transaction', async (t) => {
  await failsClosed(t, f, /^INSERT INTO audit_events/, 'audit_write_failed');
  await failsClosed(t, f, /^UPDATE challenges SET consumed_at/, 'audit_write_failed');
  await failsClosed(t, f, /^UPDATE accounts SET credits_micros/, 'audit_write_failed');
  await failsClosed(t, f, /^SELECT status FROM certificates/, 'audit_write_failed');
  await failsClosed(t, f, /^BEGIN IMMEDIATE$/, 'audit_write_failed');
  await failsClosed(t, f, /^COMMIT$/, 'audit_write_failed');
});

t.test('a deny is indeterminate too when it cannot be recorded', async (t) => {
  const b = await bundleFor(f);
  const before = await snapshot(f);
  faultOn(/^INSERT INTO audit_events/);
  expectDecision(t, await verify(f.platform, b, 'data:write'), 'indeterminate', 'audit_write_failed');
  store.injectFault(undefined);
  t.same(await snapshot(f), before);
  expectDecision(t, await verify(f.platform, b, 'data:write'), 'deny', 'not_delegated');
});

t.test('read faults before the decision', async (t) => {
  await failsClosed(t, f, /^SELECT \* FROM challenges/, 'store_unavailable');
  await failsClosed(t, f, /^SELECT credits_micros/, 'store_unavailable');
  await failsClosed(t, f, /^SELECT \* FROM api_keys/, 'store_unavailable');
  await failsClosed(t, f, /^SELECT \* FROM connections/, 'store_unavailable');
});

t.test('read faults on cold certificate and revocation caches', async (t) => {
  // Fresh delegations: their certificate and status were never loaded by verify.
  const g = await specFlow(sc, 'faults-cold@example.com', { approve: ['data:read'] });
  await failsClosed(t, g, /^SELECT \* FROM certificates WHERE id/, 'store_unavailable');
  const h = await specFlow(sc, 'faults-cold2@example.com', { approve: ['data:read'] });
  await failsClosed(t, h, /^SELECT \* FROM accounts WHERE id/, 'store_unavailable');
});

t.test('every statement failing: still a 200 indeterminate, never a 5xx', async (t) => {
  const b = await bundleFor(f);
  const before = await snapshot(f);
  const h = faultOn(/./);
  const r = await verify(f.platform, b, 'data:read');
  store.injectFault(undefined);
  t.ok(h.hits > 0);
  expectDecision(t, r, 'indeterminate', 'store_unavailable');
  t.same(await snapshot(f), before);
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized');
});

t.test('a transient fault (first attempt only)', async (t) => {
  const b = await bundleFor(f);
  let n = 0;
  store.injectFault((sql) => { if (/^INSERT INTO audit_events/.test(sql) && n++ === 0) throw new Error('SQLITE_BUSY: database is locked'); });
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'indeterminate', 'audit_write_failed');
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized', undefined, 'retry with the same bundle');
  expectError(t, await verify(f.platform, b, 'data:read'), 400, 'invalid_challenge', 'then it is spent');
});

t.test('faults while metering a refused call: the 400 stands, no 5xx', async (t) => {
  const b = await bundleFor(f);
  faultOn(/^UPDATE (accounts|challenges)/);
  expectError(t, await verify(f.platform, 'garbage', 'data:read'), 400, 'invalid_proof', 'garbage bundle');
  expectError(t, await verify(f.platform, { ...b, aud: crypto.randomUUID() }, 'data:read'), 400, 'invalid_challenge', 'foreign audience');
  expectError(t, await verify(f.platform, { ...b, presented_at: '2000-01-01T00:00:00.000Z' }, 'data:read'), 400, 'proof_stale', 'stale (would burn the challenge)');
  expectError(t, await verify(f.platform, b, 'data:*'), 400, 'invalid_scopes', 'bad scope');
  store.injectFault(undefined);
  expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized');
});
