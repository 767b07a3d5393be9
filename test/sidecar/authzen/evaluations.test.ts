/**
 * AuthZEN 1.0 access evaluations (boxcarring), from its text: decisions in
 * the request's order; top-level subject, action, resource and context as
 * defaults that an item overrides; the three `evaluations_semantic` values
 * with their short-circuit (the answer ends with the deciding item, and the
 * items after it are not evaluated: no audit event); no or an empty
 * `evaluations` array behaves as one evaluation; a failed item is
 * `decision: false` with an error in its context; the bounded batch size.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll } from '../decide/helpers.js';
import { ANY, PATHS, action, agent, http, pdp } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'batch@example.com', { approve: ['data:read', 'payments:send'],
    constraints: { methods: ['GET'] } });
});
t.teardown(async () => { await sc.close(); });

const ALLOW = { action: action('data:read'), resource: http('GET', '/a') };
const DENY = { action: action('data:write'), resource: http('GET', '/b') };
const reasons = (b: { evaluations: { decision: boolean; context?: { reason?: string } }[] }): string[] =>
  b.evaluations.map((e) => `${e.decision}:${e.context?.reason ?? 'error'}`);
const evaluatedCount = async (): Promise<number> =>
  (await auditAll(f.user)).filter((e) => e.event_type === 'access.evaluated').length;

t.test('execute_all (the default): every item, in order, with the top-level defaults', async (t) => {
  const before = await evaluatedCount();
  const r = await pdp(f.platform, PATHS.evaluations, {
    subject: agent(f.agentId), action: action('data:read'),
    evaluations: [
      { resource: http('GET', '/1') }, { action: action('data:write'), resource: http('GET', '/2') },
      { resource: http('POST', '/3') }, { resource: ANY, action: action('payments:send'), context: { amount: '1.00' } },
      { resource: http('GET', '/5') },
    ],
  });
  t.equal(r.status, 200, r.text.slice(0, 300));
  t.same(reasons(r.body), ['true:authorized', 'false:not_delegated', 'false:constraint_denied', 'false:constraint_denied',
    'true:authorized'], 'defaults applied, each override taking precedence');
  t.equal(r.body.decision, undefined, 'no top-level decision with evaluations');
  const ids = r.body.evaluations.map((e: { context: { decision_id: string } }) => e.context.decision_id);
  t.equal(new Set(ids).size, 5, 'a decision id per item');
  t.equal(await evaluatedCount() - before, 5, 'one audit event per evaluated item');
  const explicit = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId),
    options: { evaluations_semantic: 'execute_all' }, evaluations: [{ ...ALLOW }, { ...DENY }, { ...ALLOW }] });
  t.same(reasons(explicit.body), ['true:authorized', 'false:not_delegated', 'true:authorized']);
});

t.test('the top-level context is a default that an item\'s context replaces', async (t) => {
  const r = await pdp(f.platform, PATHS.evaluations, {
    subject: agent(f.agentId), action: action('data:read'), resource: ANY, context: { tenant: 'acme' },
    evaluations: [{ resource: http('GET', '/x') }, { resource: http('GET', '/y'), context: { tenant: 'other' } }],
  });
  t.same(reasons(r.body), ['true:authorized', 'true:authorized']);
});

t.test('deny_on_first_deny: stops after the first false; later items are not evaluated', async (t) => {
  const before = await evaluatedCount();
  const r = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId),
    options: { evaluations_semantic: 'deny_on_first_deny' }, evaluations: [ALLOW, ALLOW, DENY, ALLOW, DENY] });
  t.same(reasons(r.body), ['true:authorized', 'true:authorized', 'false:not_delegated']);
  t.equal(await evaluatedCount() - before, 3, 'three evaluated');
  const failed = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId),
    options: { evaluations_semantic: 'deny_on_first_deny' },
    evaluations: [ALLOW, { ...ALLOW, subject: agent('agt_unknown') }, ALLOW] });
  t.same(failed.body.evaluations.map((e: { decision: boolean }) => e.decision), [true, false], 'an error is a denial');
  t.equal(failed.body.evaluations[1].context.error.code, 'agent_not_found');
  const all = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId),
    options: { evaluations_semantic: 'deny_on_first_deny' }, evaluations: [ALLOW, ALLOW] });
  t.same(reasons(all.body), ['true:authorized', 'true:authorized'], 'no deny: all');
});

t.test('permit_on_first_permit: stops after the first true', async (t) => {
  const before = await evaluatedCount();
  const r = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId),
    options: { evaluations_semantic: 'permit_on_first_permit' }, evaluations: [DENY, DENY, ALLOW, DENY, ALLOW] });
  t.same(reasons(r.body), ['false:not_delegated', 'false:not_delegated', 'true:authorized']);
  t.equal(await evaluatedCount() - before, 3, 'three evaluated');
  const none = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId),
    options: { evaluations_semantic: 'permit_on_first_permit' }, evaluations: [DENY, DENY] });
  t.same(reasons(none.body), ['false:not_delegated', 'false:not_delegated'], 'no permit: all');
});

t.test('without evaluations (absent or empty) it is one evaluation', async (t) => {
  for (const extra of [{}, { evaluations: [] }]) {
    const r = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId), ...ALLOW, ...extra });
    t.equal(r.status, 200);
    t.equal(r.body.decision, true);
    t.equal(r.body.evaluations, undefined);
  }
});

t.test('malformed batches are 400 and evaluate nothing', async (t) => {
  const before = await evaluatedCount();
  const cases: [unknown, string][] = [
    [{ evaluations: [{ ...ALLOW }] }, 'evaluations[0].subject'],
    [{ subject: agent(f.agentId), evaluations: [ALLOW, { resource: ANY }] }, 'action'],
    [{ subject: agent(f.agentId), evaluations: [ALLOW, 7] }, 'evaluations[1]'],
    [{ subject: agent(f.agentId), evaluations: {} }, 'evaluations'],
    [{ subject: agent(f.agentId), evaluations: [ALLOW], options: { evaluations_semantic: 'first' } },
      'options.evaluations_semantic'],
  ];
  for (const [body, field] of cases) {
    const r = await pdp(f.platform, PATHS.evaluations, body);
    t.equal(r.status, 400, `${field}: 400`);
    t.equal(r.body?.error?.code, 'invalid_request', `${field}: invalid_request`);
    t.equal(r.body?.error?.field, field.startsWith('evaluations[0].') ? 'subject' : field, `${field}: named`);
  }
  t.equal(await evaluatedCount(), before, 'nothing evaluated');
});

t.test('the batch is bounded: 100 items are answered, 101 are 400 batch_too_large', async (t) => {
  const ok = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId), ...ALLOW,
    evaluations: Array.from({ length: 100 }, () => ({})) });
  t.equal(ok.status, 200);
  t.equal(ok.body.evaluations.length, 100);
  const over = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId), ...ALLOW,
    evaluations: Array.from({ length: 101 }, () => ({})) });
  t.equal(over.status, 400);
  t.equal(over.body.error.code, 'batch_too_large');
  t.equal(over.body.error.max, 100);
});

t.test('a failed item inside a batch is false with an error; the others are decided', async (t) => {
  const r = await pdp(f.platform, PATHS.evaluations, { subject: agent(f.agentId), evaluations: [
    ALLOW, { action: action('not a scope'), resource: ANY }, { action: action('data:read'), resource: { type: 'book', id: '1' } },
    ALLOW] });
  t.equal(r.status, 200);
  const d = r.body.evaluations;
  t.same(d.map((e: { decision: boolean }) => e.decision), [true, false, false, true]);
  t.equal(d[1].context.error.code, 'invalid_scopes');
  t.equal(d[1].context.error.status, 400);
  t.equal(d[2].context.error.code, 'invalid_request');
  t.equal(d[2].context.error.field, 'resource.type');
});
