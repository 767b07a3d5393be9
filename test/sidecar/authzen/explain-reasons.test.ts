/**
 * Every deny reason of the decision table (src/decisions.ts), explained: for
 * each, a real decision (a real proof through verify), its explanation read by
 * `decision_id`, the reason, stage and what it names asserted, then its
 * `would_allow` applied for real (a new delegation, a bound proof, a fresh
 * approval once the settled one stops answering, the next window) after which
 * the same request is allowed. The cases are keyed by reason and the test
 * iterates over DECISION_REASONS: a deny reason added later without a case
 * fails it. The reasons test/sidecar/authzen/explain.test.ts covers are listed
 * by name here.
 */
import t from 'tap';
import type { Test } from 'tap';
import { DECISION_REASONS } from '../../../src/decisions.js';
import type { DecisionReason } from '../../../src/decisions.js';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, Res, TestSidecar } from '../../helpers/sidecar.js';
import { boundBundle, opOf, payment } from '../approvals/helpers.js';
import { bundleFor, verify } from '../decide/helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TTL_MS = 60_000;
let sc: TestSidecar;
let n = 0;
t.before(async () => {
  sc = await startSidecar({ approvalTtlSeconds: TTL_MS / 1000 });
  sc.clock.t = Date.parse('2030-07-01T10:00:00.000Z');
});
t.teardown(async () => { await sc.close(); });

/** A new account, platform, agent and certificate (each case its own, so the shared clock moves safely). */
const flow = (o: Parameters<typeof specFlow>[2]): Promise<Flow> => specFlow(sc, `reasons-${++n}@example.com`, o);

/** Asserts a verify deny with `reason`, reads its explanation (API key and account holder) and returns it. */
async function explainedDeny(t: Test, f: Flow, r: Res, reason: string): Promise<Json> {
  t.equal(r.status, 200, r.text.slice(0, 200));
  t.equal(r.body.decision, 'deny', `${reason}: deny`);
  t.equal(r.body.decision_reason, reason, `${reason}: the reason`);
  const x = await f.platform.get(`/v1/service/decisions/${r.body.decision_id}`);
  t.equal(x.status, 200, `${reason}: explanation read with the API key (${x.text.slice(0, 150)})`);
  const p = await f.user.get(`/v1/service/decisions/personal/${r.body.decision_id}`);
  t.same(p.body, x.body, `${reason}: the account holder reads the same explanation`);
  t.equal(x.body.decision, 'deny');
  t.equal(x.body.reason, reason);
  t.equal(x.body.mode, 'verify');
  t.equal(x.body.agent_id, f.agentId);
  t.notMatch(x.text, /public_key|"sig"|challenge|proof_bundle/, `${reason}: nothing of the proof`);
  return x.body as Json;
}

/** Asserts a verify allow. */
function allowed(t: Test, r: Res, msg: string): void {
  t.equal(r.body?.decision, 'allow', `${msg}: allowed (${r.text.slice(0, 200)})`);
  t.equal(r.body?.decision_reason, 'authorized', msg);
}

/** Approves a new delegation for the flow's agent (its newest certificate from then on). */
async function redelegate(f: Flow, scopes: string[], constraints?: unknown): Promise<void> {
  const sr = await f.user.post('/v1/service/delegations/self-request',
    { connection_id: f.reg.connection_id, agent_id: f.agentId });
  if (sr.status !== 200) throw new Error(`self-request: ${sr.text}`);
  const ap = await f.user.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`,
    { approved_scope: scopes, ...(constraints !== undefined ? { constraints } : {}) });
  if (ap.status !== 200) throw new Error(`approve: ${ap.text}`);
}

const RULE = { require_approval: { scopes: ['payments:send'] } };
const NEW_APPROVAL = 'present a new proof for this action; a person grants the approval it requests';
const BOUND = [{ change: 'bound_proof', detail: 'present a proof bound to exactly this operation' }];

/**
 * A settled approval (`state`) of `pay`: asserts its explanation, that a new proof before `after` is still refused
 * with the same reason (why `after` is there), then applies `new_approval` at `after`: a new proof requests a new
 * approval, the account holder grants it, and the same request is allowed.
 */
async function settledApproval(t: Test, f: Flow, r: Res, reason: string, state: string, id: string,
  settledAt: number): Promise<void> {
  const pay = payment('30.00');
  const x = await explainedDeny(t, f, r, reason);
  const after = new Date(settledAt + TTL_MS).toISOString();
  t.equal(x.stage, 'approval');
  t.same(x.approval, { rule: RULE.require_approval, approval_id: id, state });
  t.same(x.would_allow,
    [{ change: 'new_approval', after, detail: `from ${after} on, ${NEW_APPROVAL}` }]);
  sc.clock.t = settledAt + TTL_MS - 1;
  const early = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
  t.equal(early.body.decision_reason, reason, 'a new proof before `after`: the settled approval still answers');
  sc.clock.t = settledAt + TTL_MS;
  const ask = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
  t.equal(ask.body.decision_reason, 'approval_required', 'at `after`: a new proof requests a new approval');
  t.not(ask.body.approval_id, id, 'a new approval');
  t.equal((await f.user.post(`/v1/service/approvals/${ask.body.approval_id}/approve`)).status, 200);
  allowed(t, await verify(f.platform, await bundleFor(f), 'payments:send', pay.context), 'new_approval applied');
}

/** A case per deny reason: make the decision, explain it, apply `would_allow`, show the same request allowed. */
const CASES: Partial<Record<DecisionReason, (t: Test) => Promise<void>>> = {
  async delegation_expired(t) {
    const f = await flow({ approve: ['data:read'], expiresAt: new Date(sc.clock.t + 5_000).toISOString() });
    const ctx = { method: 'GET', path: '/items' };
    const bundle = await bundleFor(f);
    sc.clock.advance(5_000);
    const x = await explainedDeny(t, f, await verify(f.platform, bundle, 'data:read', ctx), 'delegation_expired');
    t.equal(x.stage, 'delegation');
    t.equal(x.certificate.expires_at, new Date(sc.clock.t).toISOString(), 'the certificate and its expires_at');
    t.same(x.would_allow, [{ change: 'new_delegation', scope: 'data:read' }]);
    await redelegate(f, ['data:read']);
    allowed(t, await verify(f.platform, await bundleFor(f), 'data:read', ctx), 'new_delegation applied');
  },
  async operation_mismatch(t) {
    const f = await flow({ approve: ['payments:send'] });
    const five = payment('5.00');
    const nine = payment('9.00');
    const r = await verify(f.platform, await boundBundle(f, opOf(five.context, 'payments:send')), 'payments:send',
      nine.context);
    const x = await explainedDeny(t, f, r, 'operation_mismatch');
    t.equal(x.stage, 'binding');
    t.same(x.context, nine.context, 'the request verified');
    t.same(x.would_allow, BOUND);
    const ok = await verify(f.platform, await boundBundle(f, opOf(nine.context, 'payments:send')), 'payments:send',
      nine.context);
    allowed(t, ok, 'bound_proof applied');
  },
  async operation_unbound(t) {
    const f = await flow({ approve: ['payments:send'], constraints: { require_bound_operation: true } });
    const pay = payment('5.00');
    const x = await explainedDeny(t, f, await verify(f.platform, await bundleFor(f), 'payments:send', pay.context),
      'operation_unbound');
    t.equal(x.stage, 'binding');
    t.equal(x.certificate.constraints.require_bound_operation, true, 'names the certificate\'s requirement');
    t.same(x.would_allow, BOUND);
    allowed(t, await verify(f.platform, await boundBundle(f, opOf(pay.context)), 'payments:send', pay.context),
      'bound_proof applied');
  },
  async approval_denied(t) {
    const f = await flow({ approve: ['payments:send'], constraints: RULE });
    const pay = payment('30.00');
    const first = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
    t.equal(first.body.decision_reason, 'approval_required');
    const id = first.body.approval_id as string;
    t.equal((await f.user.post(`/v1/service/approvals/${id}/deny`)).status, 200);
    const settledAt = sc.clock.t;
    const r = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
    await settledApproval(t, f, r, 'approval_denied', 'denied', id, settledAt);
  },
  async approval_expired(t) {
    const f = await flow({ approve: ['payments:send'], constraints: RULE });
    const pay = payment('30.00');
    const first = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
    const id = first.body.approval_id as string;
    const settledAt = sc.clock.t + TTL_MS;
    sc.clock.t = settledAt;
    const r = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
    await settledApproval(t, f, r, 'approval_expired', 'expired', id, settledAt);
  },
  async approval_used(t) {
    const f = await flow({ approve: ['payments:send'], constraints: RULE });
    const pay = payment('30.00');
    const id = (await verify(f.platform, await bundleFor(f), 'payments:send', pay.context)).body.approval_id as string;
    t.equal((await f.user.post(`/v1/service/approvals/${id}/approve`)).status, 200);
    allowed(t, await verify(f.platform, await bundleFor(f), 'payments:send', pay.context), 'the approved retry');
    const settledAt = sc.clock.t;
    const r = await verify(f.platform, await bundleFor(f), 'payments:send', pay.context);
    await settledApproval(t, f, r, 'approval_used', 'used', id, settledAt);
  },
  async rate_exceeded(t) {
    const f = await flow({ approve: ['data:read'], constraints: { max_calls: { count: 1, period: 'minute' } } });
    const ctx = { method: 'GET', path: '/items' };
    allowed(t, await verify(f.platform, await bundleFor(f), 'data:read', ctx), 'the one call of the window');
    const x = await explainedDeny(t, f, await verify(f.platform, await bundleFor(f), 'data:read', ctx),
      'rate_exceeded');
    t.equal(x.stage, 'limits');
    t.equal(x.counters.length, 1);
    t.match(x.counters[0], { kind: 'calls', used: 1, this_call: 1, limit: 1 });
    t.same(x.would_allow,
      [{ change: 'raise_limit', constraint: 'max_calls', to: 2 }, { change: 'wait_for_next_window' }]);
    // wait_for_next_window: the same certificate, the next window.
    sc.clock.t = Date.parse(x.counters[0].window_start) + 60_000;
    allowed(t, await verify(f.platform, await bundleFor(f), 'data:read', ctx), 'wait_for_next_window applied');
    t.equal((await verify(f.platform, await bundleFor(f), 'data:read', ctx)).body.decision_reason, 'rate_exceeded',
      'that window full again');
    // raise_limit: a new delegation with max_calls at `to` (a new certificate, so its own counters).
    await redelegate(f, ['data:read'], { max_calls: { count: 2, period: 'minute' } });
    allowed(t, await verify(f.platform, await bundleFor(f), 'data:read', ctx), 'raise_limit applied');
  },
};

/** Deny reasons whose real decision, explanation and applied `would_allow` explain.test.ts already covers. */
const IN_EXPLAIN_TEST: readonly DecisionReason[] = ['not_delegated', 'constraint_denied', 'budget_exceeded',
  'approval_required', 'delegation_revoked'];
/** Deny reasons no real decision can produce, with why. None today: every deny reason is reachable. */
const NOT_PRODUCIBLE: Partial<Record<DecisionReason, string>> = {};

t.test('every deny reason of the decision table has a case', async (t) => {
  const reasons = Object.keys(DECISION_REASONS) as DecisionReason[];
  const deny = reasons.filter((r) => DECISION_REASONS[r].decision === 'deny');
  for (const r of deny) {
    const where = [CASES[r] && 'here', IN_EXPLAIN_TEST.includes(r) && 'explain.test.ts',
      NOT_PRODUCIBLE[r] && 'not producible'].filter(Boolean);
    t.equal(where.length, 1,
      `${r}: exactly one of a case here, explain.test.ts, or not producible (${where.join(', ')})`);
  }
  for (const r of [...Object.keys(CASES), ...IN_EXPLAIN_TEST, ...Object.keys(NOT_PRODUCIBLE)]) {
    t.equal(DECISION_REASONS[r as DecisionReason]?.decision, 'deny', `${r} is a deny reason of the table`);
  }
  // store_unavailable, audit_write_failed, internal_error: indeterminate (store faults, failures), never a deny,
  // and an indeterminate answer has no explanation (docs/authzen.md).
  t.same(reasons.filter((r) => !deny.includes(r)).sort(),
    ['audit_write_failed', 'authorized', 'internal_error', 'store_unavailable']);
});

for (const [reason, run] of Object.entries(CASES)) {
  t.test(`${reason}: explained, and what would allow it does`, run);
}
