/**
 * `agent-authz/client` with operation-bound proofs and step-up approvals,
 * against the REAL sidecar (in process, SQLite, real signatures) and the
 * REAL standalone gateway in front of a recording upstream (issues 22 and 23):
 *
 * - every proof is bound to the request it goes out with, so a certificate
 *   that requires binding (`require_bound_operation`) passes; the bound
 *   operation is the gateway's normalized path (`/v1/items/%61bc` binds
 *   `/v1/items/abc`); `bind: false` is denied `operation_unbound`;
 * - without `waitForApproval`, `approval_required` is thrown at once with
 *   its `approvalId` (state `pending`);
 * - with it, the client polls the approval's status while a person approves
 *   through the session API, then retries once with a fresh proof: the
 *   upstream sees the action exactly once; a denial (with its note), an
 *   expiry (clock moved), the end of the wait, and an abort surface as typed
 *   errors; nothing reaches the upstream then.
 */

import t from 'tap';
import { AgentAuthzError, createAgentFetch } from '../../client/index.js';
import type { AgentFetchOptions } from '../../client/index.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey, startUpstream } from '../gateway-plugin/helpers.js';

t.setTimeout(90_000);

const sc = await startSidecar();
const up = await startUpstream();
t.teardown(async () => {
  await up.close();
  await sc.close();
});
const flow = await specFlow(sc, 'client-approvals@example.com', {
  scopes: ['data:read', 'data:delete'], approve: ['data:read', 'data:delete'],
  constraints: { require_bound_operation: true, require_approval: { scopes: ['data:delete'] } },
});
const gw = await startGatewayWithKey(gatewayConfig(up.url, sc.url, {
  routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }, { method: 'DELETE', path: '/v1/items/:id', scope: 'data:delete' }],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), flow.reg.api_key as string);
t.teardown(() => gw.close());

/** Counts the client's status polls (through its `fetch` option). */
let polls = 0;
const counting: typeof fetch = async (input, init) => {
  if (String(input instanceof Request ? input.url : input).endsWith('/status')) polls += 1;
  return fetch(input, init);
};
const options = (extra: Partial<AgentFetchOptions> = {}): AgentFetchOptions => ({
  sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId, fetch: counting, ...extra,
});
const deletes = (path: string): number => up.received.filter((r) => r.method === 'DELETE' && r.url === path).length;
const failure = async (p: Promise<unknown>): Promise<AgentAuthzError> => {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof AgentAuthzError)) throw new Error(`expected an AgentAuthzError, got ${String(err)}`);
  return err;
};

t.test('proofs are bound to their request: a certificate that requires binding passes', async (t) => {
  const agentFetch = createAgentFetch(options());
  const res = await agentFetch(`${gw.url}/v1/items/%61bc?full=1`);
  t.equal(res.status, 200);
  t.equal(up.received.at(-1)?.url, '/v1/items/abc?full=1');
  const presented = (await flow.user.get('/v1/service/audit/personal?event_type=proof.presented&limit=1')).body.events[0];
  t.match(presented.details.operation, { method: 'GET', path: '/v1/items/abc', body_sha256: /^[0-9a-f]{64}$/ }, 'the normalized path was signed into the proof');
  const unbound = await failure(createAgentFetch(options({ bind: false }))(`${gw.url}/v1/items/1`));
  t.same([unbound.code, unbound.reason, unbound.status], ['proof_rejected', 'operation_unbound', 403], 'bind: false is refused under require_bound_operation');
});

t.test('without waitForApproval: approval_required is thrown at once, with the approval id', async (t) => {
  const err = await failure(createAgentFetch(options())(`${gw.url}/v1/items/10`, { method: 'DELETE' }));
  t.same([err.code, err.reason, err.approvalState], ['proof_rejected', 'approval_required', 'pending']);
  t.match(err.approvalId, /^[0-9a-f-]{36}$/);
  const pending = (await flow.user.get('/v1/service/approvals?state=pending')).body.approvals as Array<{ approval_id: string }>;
  t.ok(pending.some((a) => a.approval_id === err.approvalId), 'the id the person sees');
  t.equal(deletes('/v1/items/10'), 0);
});

t.test('waitForApproval: a person approves through the session API while the client waits; one retry passes', async (t) => {
  let seen: AgentAuthzError | undefined;
  polls = 0;
  const agentFetch = createAgentFetch(options({
    waitForApproval: {
      pollIntervalMs: 100, timeoutMs: 20_000,
      onPending: (refusal) => {
        seen = refusal;
        // The person decides a little later, while the client polls.
        setTimeout(() => void flow.user.post(`/v1/service/approvals/${refusal.approvalId}/approve`), 400);
      },
    },
  }));
  const res = await agentFetch(`${gw.url}/v1/items/11`, { method: 'DELETE' });
  t.equal(res.status, 200, 'the approved action passed');
  t.equal(seen?.reason, 'approval_required', 'onPending saw the refusal');
  t.ok(polls >= 2, `the client polled the status (${polls} reads) before the person decided`);
  t.equal(deletes('/v1/items/11'), 1, 'the upstream saw the action exactly once');
  const status = (await flow.platform.get(`/v1/service/approvals/${seen?.approvalId}/status`)).body;
  t.equal(status.state, 'used', 'the approval was spent by that retry');
  const again = await failure(createAgentFetch(options())(`${gw.url}/v1/items/11`, { method: 'DELETE' }));
  t.same([again.reason, again.approvalId], ['approval_used', seen?.approvalId], 'a second retry is refused');
});

t.test('a denial surfaces as approval_denied with the note; nothing reaches the upstream', async (t) => {
  const agentFetch = createAgentFetch(options({
    waitForApproval: { pollIntervalMs: 100, onPending: (r) => void flow.user.post(`/v1/service/approvals/${r.approvalId}/deny`, { note: 'Not this table.' }) },
  }));
  const err = await failure(agentFetch(`${gw.url}/v1/items/12`, { method: 'DELETE' }));
  t.same([err.code, err.reason, err.approvalState, err.note, err.status], ['proof_rejected', 'approval_denied', 'denied', 'Not this table.', 403]);
  t.equal(deletes('/v1/items/12'), 0);
});

t.test('an expired approval surfaces as approval_expired', async (t) => {
  const agentFetch = createAgentFetch(options({
    waitForApproval: { pollIntervalMs: 100, onPending: () => sc.clock.advance(601_000) },
  }));
  const err = await failure(agentFetch(`${gw.url}/v1/items/13`, { method: 'DELETE' }));
  t.same([err.reason, err.approvalState], ['approval_expired', 'expired']);
  t.equal(deletes('/v1/items/13'), 0);
});

t.test('the wait is bounded, and an abort ends it', async (t) => {
  const started = Date.now();
  const err = await failure(createAgentFetch(options({ waitForApproval: { pollIntervalMs: 100, timeoutMs: 500 } }))(`${gw.url}/v1/items/14`, { method: 'DELETE' }));
  t.same([err.reason, err.approvalState], ['approval_required', 'pending'], 'still pending at the deadline: the original refusal');
  t.ok(Date.now() - started < 10_000, 'within the deadline (plus the requests)');
  const controller = new AbortController();
  const aborted = await createAgentFetch(options({ waitForApproval: { pollIntervalMs: 100, onPending: () => setTimeout(() => controller.abort(), 200) } }))(
    `${gw.url}/v1/items/15`, { method: 'DELETE', signal: controller.signal },
  ).then(() => undefined, (e: unknown) => e);
  t.equal((aborted as Error).name, 'AbortError', 'the request signal ends the wait');
  t.equal(deletes('/v1/items/14') + deletes('/v1/items/15'), 0);
});

t.test('options are checked', async (t) => {
  const bad: Array<[unknown, RegExp]> = [
    [{ ...options(), bind: 'yes' }, /^agent fetch options: bind: must be true or false$/],
    [{ ...options(), waitForApproval: 'always' }, /^agent fetch options: waitForApproval: must be true, false or/],
    [{ ...options(), waitForApproval: { pollIntervalMs: 10 } }, /^agent fetch options: waitForApproval\.pollIntervalMs: must be an integer of at least 50$/],
    [{ ...options(), waitForApproval: { timeoutMs: 0 } }, /^agent fetch options: waitForApproval\.timeoutMs: must be an integer of at least 1$/],
    [{ ...options(), waitForApproval: { onPending: 'x' } }, /^agent fetch options: waitForApproval\.onPending: must be a function$/],
    [{ ...options(), waitForApproval: { retries: 3 } }, /^agent fetch options: waitForApproval\.retries: unknown option$/],
  ];
  for (const [o, message] of bad) t.throws(() => createAgentFetch(o as AgentFetchOptions), { name: 'TypeError', message });
  t.doesNotThrow(() => createAgentFetch(options({ waitForApproval: true })));
});
