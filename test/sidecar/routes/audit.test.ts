/**
 * GET /v1/service/audit/personal (spec endpoint 14) and the usage read:
 * event fields, newest-first order, cursor pagination, filters, limit
 * bounds, authentication and account isolation. Each trail starts with the registration's two
 * administrative events (platform.created, connection.created), the decision events after them.
 */
import t from 'tap';
import { Client, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, auditPage, bundleFor, expectDecision, expectError, verify } from '../decide/helpers.js';
import type { AuditEvent } from '../decide/helpers.js';

const AUDIT = '/v1/service/audit/personal';

let sc: TestSidecar;
let f: Flow;
let other: Flow;
let all: AuditEvent[];
/** The decision events: all but the oldest two (the registration's). */
let decisions: AuditEvent[];
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'audit@example.com', { approve: ['data:read'] });
  other = await specFlow(sc, 'audit-other@example.com', { approve: ['data:read'] });
  // 6 presents, 3 allows, 2 denies, 1 refused (400, no row); one second apart.
  const plan = ['data:read', 'data:write', 'data:read', 'data:write', 'data:read', 'data:*'];
  for (const scope of plan) {
    const b = await bundleFor(f);
    sc.clock.advance(1000);
    await verify(f.platform, b, scope);
    sc.clock.advance(1000);
  }
  expectDecision(t, await verify(other.platform, await bundleFor(other), 'data:read'), 'allow', 'authorized');
  all = await auditAll(f.user);
  decisions = all.slice(0, -2);
});
t.teardown(async () => { await sc.close(); });

t.test('events: fields, order, decision details', async (t) => {
  t.equal(all.length, 13, 'the registration\'s 2, then 6 presented + 5 decisions');
  t.same(all.map((e) => e.event_type).reverse(), ['platform.created', 'connection.created',
    'proof.presented', 'proof.verified', 'proof.presented', 'proof.rejected', 'proof.presented', 'proof.verified',
    'proof.presented', 'proof.rejected', 'proof.presented', 'proof.verified', 'proof.presented',
  ]);
  for (let i = 1; i < all.length; i++) t.ok(all[i - 1]!.occurred_at >= all[i]!.occurred_at, `newest first (${i})`);
  for (let i = 1; i < decisions.length; i++) {
    t.ok(decisions[i - 1]!.occurred_at > decisions[i]!.occurred_at, `decisions one second apart (${i})`);
  }
  for (const e of decisions) {
    t.same(Object.keys(e).sort(), ['agent_id', 'cert_id', 'connection_id', 'details', 'event_id', 'event_type', 'occurred_at', 'required_scope']);
    t.equal(e.agent_id, f.agentId);
    t.equal(e.cert_id, f.certId);
    t.equal(e.connection_id, f.reg.connection_id);
    if (e.event_type === 'proof.presented') {
      t.equal(e.required_scope, null);
      t.notOk('decision' in e.details || 'decision_reason' in e.details, 'presented: no decision fields');
    } else if (e.event_type === 'proof.verified') {
      t.equal(e.required_scope, 'data:read');
      t.same(e.details, { decision: 'allow', decision_reason: 'authorized', decision_id: e.event_id });
    } else {
      t.equal(e.required_scope, 'data:write');
      t.same(e.details, { decision: 'deny', decision_reason: 'not_delegated', decision_id: e.event_id });
    }
  }
  const def = await auditPage(f.user, '');
  t.equal(def.events.length, 13, 'default limit covers 13');
});

t.test('cursor pagination', async (t) => {
  const seen: AuditEvent[] = [];
  let cursor: string | null = null;
  const sizes: number[] = [];
  for (let i = 0; i < 10; i++) {
    const p = await auditPage(f.user, `limit=4${cursor ? `&cursor=${cursor}` : ''}`);
    sizes.push(p.events.length);
    seen.push(...p.events);
    cursor = p.next_cursor;
    if (!cursor) break;
    t.match(cursor, /^\d+$/, 'opaque numeric cursor');
  }
  t.same(sizes, [4, 4, 4, 1]);
  t.same(seen.map((e) => e.event_id), all.map((e) => e.event_id), 'pages concatenate to the whole list');
  const exact = await auditPage(f.user, 'limit=13');
  t.equal(exact.next_cursor, null, 'no cursor when the page holds the rest');
  const one = await auditPage(f.user, 'limit=1');
  t.equal(one.events[0]!.event_id, all[0]!.event_id);
  const beyond = await auditPage(f.user, 'cursor=1');
  t.same(beyond, { events: [], next_cursor: null }, 'nothing before the first row');
});

t.test('filters: event_type and agent_id, with pagination', async (t) => {
  for (const [type, n] of [['proof.presented', 6], ['proof.verified', 3], ['proof.rejected', 2]] as const) {
    const ev = await auditAll(f.user, `event_type=${type}`);
    t.equal(ev.length, n, type);
    t.ok(ev.every((e) => e.event_type === type));
    t.same(ev.map((e) => e.event_id), all.filter((e) => e.event_type === type).map((e) => e.event_id), `${type}: same order`);
  }
  const p1 = await auditPage(f.user, 'event_type=proof.presented&limit=4');
  t.equal(p1.events.length, 4);
  const p2 = await auditPage(f.user, `event_type=proof.presented&limit=4&cursor=${p1.next_cursor}`);
  t.equal(p2.events.length, 2);
  t.equal(p2.next_cursor, null);
  t.ok(p2.events.every((e) => e.event_type === 'proof.presented'));

  t.equal((await auditAll(f.user, `agent_id=${f.agentId}`)).length, 11, 'own agent');
  t.equal((await auditAll(f.user, `agent_id=${other.agentId}`)).length, 0, 'another account\'s agent: nothing');
  t.equal((await auditAll(f.user, `agent_id=${crypto.randomUUID()}`)).length, 0, 'unknown agent');
  t.equal((await auditAll(f.user, `agent_id=${f.agentId}&event_type=proof.verified`)).length, 3, 'combined');
});

t.test('limit bounds and bad parameters', async (t) => {
  t.equal((await auditPage(f.user, 'limit=200')).events.length, 13, 'limit=200 is accepted');
  t.equal((await auditPage(f.user, 'limit=25')).events.length, 13, 'limit=25 is accepted');
  for (const q of ['limit=201', 'limit=1000', 'limit=99999', 'limit=0', 'limit=-1', 'limit=1.5', 'limit=abc', 'limit=', 'limit=1e2']) {
    const r = await f.user.get(`${AUDIT}?${q}`);
    expectError(t, r, 400, 'invalid_request', q);
    t.equal(r.body?.error?.field, 'querystring.limit', `${q}: field`);
  }
  for (const q of ['cursor=abc', 'cursor=-5', 'cursor=1.5', 'event_type=proof.deleted', 'event_type=PROOF.VERIFIED', 'sort=asc', `agent_id=${'a'.repeat(200)}`]) {
    expectError(t, await f.user.get(`${AUDIT}?${q}`), 400, 'invalid_request', q);
  }
});

t.test('authentication and isolation', async (t) => {
  expectError(t, await new Client(sc.url).get(`${AUDIT}?limit=25`), 401, 'auth_required', 'no session');
  const keyOnly = new Client(sc.url);
  keyOnly.apiKey = f.reg.api_key;
  expectError(t, await keyOnly.get(`${AUDIT}?limit=25`), 401, 'auth_required', 'an API key is not a session');
  expectError(t, await keyOnly.get('/v1/service/usage/personal'), 401, 'auth_required', 'usage needs a session too');
  const theirs = await auditAll(other.user);
  t.equal(theirs.length, 4, 'the other account sees only its own four events (registration, present, verify)');
  t.notOk(theirs.some((e) => all.some((x) => x.event_id === e.event_id)));
  const forged = new Client(sc.url);
  forged.jar.set('service_session', 'x'.repeat(43));
  expectError(t, await forged.get(`${AUDIT}?limit=25`), 401, 'auth_required', 'forged session cookie');
});

t.test('usage read', async (t) => {
  const r = await f.user.get('/v1/service/usage/personal');
  t.equal(r.status, 200);
  const u = r.body;
  t.equal(u.price_per_verify_micros, 2000);
  t.same([u.verify_calls, u.allows, u.denies], [5, 3, 2], 'the invalid_scopes 400 spent no challenge and is not billed');
  t.equal(u.balance_micros, sc.config.alphaCreditsMicros - 5 * 2000);
  t.equal(u.balance_dollars, (u.balance_micros / 1e6).toFixed(6));
  t.equal(u.remaining_verify_calls, Math.floor(u.balance_micros / 2000));
});
