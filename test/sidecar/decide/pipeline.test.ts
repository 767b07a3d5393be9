/**
 * The decision pipeline as a list of stages (sidecar/decide/pipeline.ts):
 * the stages and their order; the orchestrator's fail-closed mapping (a store
 * read fault → `store_unavailable`, a write fault → `audit_write_failed`,
 * anything else or stages out of order → `internal_error`, each counted in
 * the decisions metric); and billing written once: a refusal from any stage,
 * also one added to the list, is billed exactly when it comes after the
 * challenge stage accepted the caller's own live challenge. Decisions and
 * responses are typed from the reason table (checked by tsc, which npm test
 * runs first).
 *
 * decide() runs in-process against a real sidecar (its context, SQLite store
 * and crypto workers); bundles come from the real HTTP challenge/present.
 */
import t from 'tap';
import { ServiceError } from '../../../src/errors.js';
import { VERIFY_STAGES, decide } from '../../../sidecar/decide/pipeline.js';
import { StoreFault } from '../../../sidecar/decide/stage.js';
import type { Decision, ReasonFor, Stage } from '../../../sidecar/decide/stage.js';
import { DECISION_REASONS } from '../../../src/decisions.js';
import type { VerifyResponse } from '../../../src/protocol.js';
import { VERIFY_PRICE_MICROS } from '../../../sidecar/decide/billing.js';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { bundleFor, expectDecision, expectError, usage, verify } from './helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'pipeline@example.com', { approve: ['data:read'] });
});
t.teardown(async () => { await sc.close(); });

/** VERIFY_STAGES with `stage` inserted after the stage named `after`. */
function withStage(after: string, stage: Stage): Stage[] {
  const list = [...VERIFY_STAGES];
  const at = list.findIndex((s) => s.name === after);
  if (at < 0) throw new Error(`no stage ${after}`);
  list.splice(at + 1, 0, stage);
  return list;
}

/** A stage that always throws `err`. */
const throwing = (name: string, err: unknown): Stage => ({ name, run() { throw err; } });

/** Runs decide() in-process with the flow's key. */
async function run(stages: readonly Stage[], bundle: unknown, scope = 'data:read'): Promise<unknown> {
  try {
    return await decide(sc.app.ctx, f.platform.apiKey, { proof_bundle: bundle, required_scope: scope }, { stages });
  } catch (err) {
    return err;
  }
}

async function indeterminateCount(reason: string): Promise<number> {
  const m = (await sc.app.ctx.metrics.verifyDecisions.get()).values.find((v) => v.labels.decision === 'indeterminate' && v.labels.reason === reason);
  return m?.value ?? 0;
}

t.test('the stages, in order', async (t) => {
  t.same(VERIFY_STAGES.map((s) => s.name),
    ['authenticate', 'meter', 'parse', 'challenge', 'freshness', 'certificate', 'signature', 'delegation', 'chain', 'binding',
      'idempotency', 'limits', 'approval', 'commit']);
  t.ok(Object.isFrozen(VERIFY_STAGES), 'the list cannot be changed at run time');
  t.equal(new Set(VERIFY_STAGES.map((s) => s.name)).size, VERIFY_STAGES.length, 'names are unique');
});

t.test('the default list decides as the HTTP route does', async (t) => {
  const b = await bundleFor(f);
  t.match(await run(VERIFY_STAGES, b), { decision: 'allow', decision_reason: 'authorized', scope: 'data:read', cert_id: f.certId });
  t.match(await run(VERIFY_STAGES, b), { code: 'invalid_challenge', status: 400 }, 'the challenge was spent by the commit');
});

t.test('fails closed: every failure that is not a refusal is indeterminate and counted', async (t) => {
  const cases: [Stage[], string, string][] = [
    [withStage('signature', throwing('boom', new TypeError('a bug'))), 'internal_error', 'an unexpected exception'],
    [withStage('parse', throwing('flaky-read', new StoreFault('read', new Error('SQLITE_IOERR')))), 'store_unavailable', 'a store read fault'],
    [withStage('delegation', throwing('flaky-write', new StoreFault('write', new Error('SQLITE_FULL')))), 'audit_write_failed', 'a store write fault'],
    [withStage('parse', throwing('odd', 'not an Error')), 'internal_error', 'a thrown non-Error'],
    [VERIFY_STAGES.filter((s) => s.name !== 'commit'), 'internal_error', 'no stage answered (commit missing)'],
    [VERIFY_STAGES.filter((s) => s.name !== 'parse'), 'internal_error', 'stages out of order (nothing parsed)'],
  ];
  for (const [stages, reason, what] of cases) {
    const b = await bundleFor(f);
    const before = await usage(f.user);
    const count = await indeterminateCount(reason);
    const got = await run(stages, b) as Record<string, unknown>;
    t.same({ ...got, decision_id: undefined }, { decision: 'indeterminate', decision_reason: reason, decision_id: undefined },
      what);
    t.match(got.decision_id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `${what}: a decision id`);
    t.equal(await indeterminateCount(reason), count + 1, `${what}: counted`);
    t.same(await usage(f.user), before, `${what}: nothing billed or recorded`);
    expectDecision(t, await verify(f.platform, b, 'data:read'), 'allow', 'authorized', undefined, `${what}: the challenge is still usable`);
  }
});

t.test('billing is decided in one place, also for a stage added to the list', async (t) => {
  const refuse = throwing('step-up', new ServiceError('not_delegated', 'An added stage refused.'));
  for (const [after, billed] of [['authenticate', false], ['parse', false], ['challenge', true], ['signature', true], ['delegation', true]] as const) {
    const b = await bundleFor(f);
    const before = await usage(f.user);
    const err = await run(withStage(after, refuse), b);
    t.ok(err instanceof ServiceError && err.code === 'not_delegated', `after ${after}: the stage's refusal is the answer`);
    const after_ = await usage(f.user);
    t.equal(before.balance_micros - after_.balance_micros, billed ? VERIFY_PRICE_MICROS : 0, `after ${after}: ${billed ? 'billed' : 'not billed'}`);
    t.equal(after_.verify_calls - before.verify_calls, billed ? 1 : 0, `after ${after}: counted as a call only when billed`);
    const again = await verify(f.platform, b, 'data:read');
    if (billed) expectError(t, again, 400, 'invalid_challenge', `after ${after}: the billed refusal spent the challenge`);
    else expectDecision(t, again, 'allow', 'authorized', undefined, `after ${after}: the challenge is still usable`);
  }
});

t.test('a refusal before authentication is not billed to anyone', async (t) => {
  const b = await bundleFor(f);
  const before = await usage(f.user);
  const err = await decide(sc.app.ctx, 'aak_000000000000_' + 'A'.repeat(43), { proof_bundle: b, required_scope: 'data:read' }).catch((e: unknown) => e);
  t.match(err, { code: 'invalid_api_key', status: 401 });
  t.same(await usage(f.user), before);
  const invalid = new ServiceError('invalid_request', 'body.required_scope is missing or not valid.', { field: 'body.required_scope' });
  t.equal(await decide(sc.app.ctx, f.platform.apiKey, invalid).catch((e: unknown) => e), invalid, 'a body the route refused is answered after authentication, as is');
});

t.test('decisions and responses are typed from the reason table', async (t) => {
  const fine: Decision[] = [{ decision: 'allow', reason: 'authorized' }, { decision: 'deny', reason: 'constraint_denied', constraint: 'methods' }];
  // @ts-expect-error: a reason outside the table cannot be written
  const unknown: Decision = { decision: 'deny', reason: 'forbidden' };
  // @ts-expect-error: a deny reason cannot come with allow
  const mismatched: Decision = { decision: 'allow', reason: 'not_delegated' };
  // @ts-expect-error: nor can a response carry a reason outside the table
  const response: VerifyResponse = { decision: 'deny', decision_reason: 'nope' };
  // @ts-expect-error: indeterminate has only its own reasons
  const indeterminate: ReasonFor<'indeterminate'> = 'authorized';
  t.equal([...fine, unknown, mismatched, response, indeterminate].length, 6, 'the lines above are compile errors where marked');
  const failClosed = ['store_unavailable', 'audit_write_failed', 'internal_error'] as const satisfies readonly ReasonFor<'indeterminate'>[];
  for (const r of failClosed) t.equal(DECISION_REASONS[r].decision, 'indeterminate', `${r} is an indeterminate reason of the table`);
});
