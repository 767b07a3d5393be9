/**
 * Operation-bound proofs through the real sidecar (issue 22 part 2): present
 * signs `operation` into the bundle; verify allows it for its own operation
 * only — another route, tool, amount (a body that says another amount), body,
 * method, scope or query string is deny `operation_mismatch`, recorded with the member in
 * the audit row and billed like any deny; a tampered operation breaks the
 * signature. Requiring binding: by certificate (`require_bound_operation`)
 * and by the service (`SIDECAR_REQUIRE_BOUND_OPERATION`), on and off; unbound
 * proofs stay valid where nothing requires binding.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, expectError, usage, verify } from './helpers.js';
import { boundBundle, opOf, payment, presentOp, sha } from '../approvals/helpers.js';

let sc: TestSidecar;
t.before(async () => { sc = await startSidecar(); });
t.teardown(async () => { await sc.close(); });

const SCOPES = ['data:read', 'payments:send'];

t.test('a bound proof allows its own operation and nothing else', async (t) => {
  const f = await specFlow(sc, 'bound@example.com', { approve: SCOPES });
  const pay = payment('12.50');
  const op = opOf(pay.context, 'payments:send');

  const ok = await verify(f.platform, await boundBundle(f, op), 'payments:send', pay.context);
  expectDecision(t, ok, 'allow', 'authorized', undefined, 'its own operation');

  const other = payment('12.50', { path: '/v1/payments/batch' });
  const cases: [string, string, Record<string, string>, string][] = [
    ['another route', 'payments:send', { ...pay.context, path: '/v1/payments/batch', body_sha256: other.context.body_sha256! }, 'path'],
    ['another amount (its body)', 'payments:send', payment('9999.00').context, 'body_sha256'],
    ['another body, same amount', 'payments:send', payment('12.50', { to: 'acct_evil' }).context, 'body_sha256'],
    ['another method', 'payments:send', { ...pay.context, method: 'PUT' }, 'method'],
    ['another scope', 'data:read', pay.context, 'scope'],
    ['no body hash in the context', 'payments:send', { method: 'POST', path: '/v1/payments', amount: '12.50', currency: 'USD' }, 'body_sha256'],
    ['the same request with a query', 'payments:send', { ...pay.context, query_sha256: sha('dry_run=0') }, 'query_sha256'],
  ];
  const before = await usage(f.user);
  for (const [what, scope, ctx, member] of cases) {
    const r = await verify(f.platform, await boundBundle(f, op), scope, ctx);
    expectDecision(t, r, 'deny', 'operation_mismatch', undefined, what);
    const row = (await auditAll(f.user, 'event_type=proof.rejected')).find((e) => e.event_id === r.body.audit_event_id);
    t.equal(row?.details.operation_member, member, `${what}: the audit row names ${member}`);
  }
  const after = await usage(f.user);
  t.equal(after.denies - before.denies, cases.length, 'each mismatch is a recorded, billed deny');

  // Bound to a query: only that query (its hash, as the gateway sends it) passes.
  const queryOp = { ...op, query_sha256: sha('notify=1') };
  expectDecision(t, await verify(f.platform, await boundBundle(f, queryOp), 'payments:send', { ...pay.context, query_sha256: sha('notify=1') }),
    'allow', 'authorized', undefined, 'its own query');
  for (const [what, ctx] of [['another query', { ...pay.context, query_sha256: sha('notify=0') }], ['no query', pay.context]] as const) {
    const r = await verify(f.platform, await boundBundle(f, queryOp), 'payments:send', ctx);
    expectDecision(t, r, 'deny', 'operation_mismatch', undefined, what);
    const row = (await auditAll(f.user, 'event_type=proof.rejected')).find((e) => e.event_id === r.body.audit_event_id);
    t.equal(row?.details.operation_member, 'query_sha256', `${what}: the audit row names query_sha256`);
  }

  // An MCP tool call bound to its tool: the gateway sends the tool (and, for a tool with a resource pointer, that resource as path).
  const rpc = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'send_payment', arguments: { amount: 3 } } });
  const toolOp = { method: 'POST', tool: 'send_payment', body_sha256: sha(rpc) };
  const mcp = { method: 'POST', path: '/accounts/acct_42', tool: 'send_payment', body_sha256: sha(rpc), amount: '3', currency: 'USD' };
  expectDecision(t, await verify(f.platform, await boundBundle(f, toolOp), 'payments:send', mcp), 'allow', 'authorized', undefined, 'its own tool');
  expectDecision(t, await verify(f.platform, await boundBundle(f, toolOp), 'payments:send', { ...mcp, tool: 'refund_payment' }), 'deny', 'operation_mismatch', undefined, 'another tool');
  expectDecision(t, await verify(f.platform, await boundBundle(f, toolOp), 'payments:send', { ...mcp, tool: undefined } as unknown as Record<string, string>),
    'deny', 'operation_mismatch', undefined, 'no tool in the context');

  const presented = (await auditAll(f.user, 'event_type=proof.presented'))[0]!;
  t.same(presented.details.operation, toolOp, 'the present audit row records the bound operation');
});

t.test('the operation is signed: changing it in the bundle is invalid_signature', async (t) => {
  const f = await specFlow(sc, 'tamper-op@example.com', { approve: SCOPES });
  const pay = payment('1.00');
  const b = await boundBundle(f, opOf(pay.context));
  const evil = payment('1.00', { to: 'acct_evil' });
  const forged = { ...b, operation: { ...b.operation, body_sha256: evil.context.body_sha256 } };
  expectError(t, await verify(f.platform, forged, 'payments:send', evil.context), 400, 'invalid_signature', 'operation swapped');
  const { operation: _dropped, ...stripped } = (await boundBundle(f, opOf(pay.context))) as Record<string, unknown>;
  expectError(t, await verify(f.platform, stripped, 'payments:send', evil.context), 400, 'invalid_signature', 'binding removed');
});

t.test('present refuses a malformed operation, naming the member', async (t) => {
  const f = await specFlow(sc, 'bad-op@example.com', { approve: SCOPES });
  const cases: [unknown, string][] = [
    ['POST /x', 'body.operation'],
    [{ method: 'post', path: '/x', body_sha256: sha('') }, 'body.operation.method'],
    [{ method: 'POST', body_sha256: sha('') }, 'body.operation.path'],
    [{ method: 'POST', path: '/a/../b', body_sha256: sha('') }, 'body.operation.path'],
    [{ method: 'POST', path: '/x', body_sha256: 'nope' }, 'body.operation.body_sha256'],
    [{ method: 'POST', path: '/x', body_sha256: sha(''), scope: 'nope:nope:' }, 'body.operation.scope'],
    [{ method: 'POST', path: '/x', body_sha256: sha(''), args: {} }, 'body.operation.args'],
  ];
  for (const [operation, field] of cases) {
    const r = await presentOp(f, operation);
    expectError(t, r, 400, 'invalid_request', field);
    t.equal(r.body?.error?.field, field, `field ${field}`);
  }
  // The challenge of a refused present is not spent: a valid present on a new one works.
  t.equal((await presentOp(f, { method: 'GET', path: '/x', body_sha256: sha('') })).status, 200);
});

t.test('requiring binding by certificate: unbound denied, bound allowed', async (t) => {
  const f = await specFlow(sc, 'require-cert@example.com', { approve: SCOPES, constraints: { require_bound_operation: true } });
  const pay = payment('2.00');
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'payments:send', pay.context), 'deny', 'operation_unbound', undefined, 'unbound');
  expectDecision(t, await verify(f.platform, await boundBundle(f, opOf(pay.context)), 'payments:send', pay.context), 'allow', 'authorized', undefined, 'bound');
  // Not required: unbound proofs keep working (old bundles stay valid).
  const g = await specFlow(sc, 'require-off@example.com', { approve: SCOPES, constraints: { require_bound_operation: false } });
  expectDecision(t, await verify(g.platform, await bundleFor(g), 'payments:send', pay.context), 'allow', 'authorized', undefined, 'not required');
  // A deny for another reason is not turned into a binding deny.
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:write', pay.context), 'deny', 'not_delegated', undefined, 'scope first');
});

t.test('requiring binding by the service (SIDECAR_REQUIRE_BOUND_OPERATION)', async (t) => {
  const strict = await startSidecar({ requireBoundOperation: true });
  t.teardown(() => strict.close());
  const f = await specFlow(strict, 'require-svc@example.com', { approve: SCOPES });
  const get = { method: 'GET', path: '/v1/items/7', body_sha256: sha('') };
  expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read', get), 'deny', 'operation_unbound', undefined, 'unbound, no constraint');
  expectDecision(t, await verify(f.platform, await boundBundle(f, opOf(get)), 'data:read', get), 'allow', 'authorized', undefined, 'bound');
  const off = await specFlow(sc, 'require-svc-off@example.com', { approve: SCOPES });
  expectDecision(t, await verify(off.platform, await bundleFor(off), 'data:read', get), 'allow', 'authorized', undefined, 'setting off');
});
