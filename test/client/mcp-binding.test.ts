/**
 * Tool-bound proofs and step-up approvals over MCP with the official SDK on
 * both sides (issues 22 §2 and 23): a real SDK `Client` through
 * `createAgentMcpTransport`, the REAL standalone gateway (an MCP route), a
 * real SDK MCP server, and the REAL sidecar, for a certificate that requires
 * operation binding and a person's approval of `data:delete` tools.
 *
 * - The transport binds each tool call's proof to its tool and body (the
 *   gateway sends `context.tool`, so the binding verifies); protocol
 *   messages (initialize, tools/list) bind the endpoint's path.
 * - A proof bound to another tool, or to other arguments, is denied
 *   `operation_mismatch`; an unbound one `operation_unbound`: neither runs.
 * - A tool needing approval rejects with the approval id (JSON-RPC
 *   `error.data`), or, with `waitForApproval`, runs once after a person
 *   approves it through the session API while the client waits.
 */

import t from 'tap';
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { AgentAuthzError } from '../../client/index.js';
import { createAgentMcpTransport } from '../../client/mcp.js';
import type { AgentMcpTransportOptions } from '../../client/mcp.js';
import { challenge } from '../sidecar/decide/helpers.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, send, startGatewayWithKey } from '../gateway-plugin/helpers.js';
import { startMcpUpstream } from '../gateway-plugin/mcp-helpers.js';

t.setTimeout(90_000);

const sc = await startSidecar();
const server = await startMcpUpstream(true);
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const flow = await specFlow(sc, 'mcp-binding@example.com', {
  scopes: ['execute:tool', 'data:read', 'data:delete'], approve: ['execute:tool', 'data:read', 'data:delete'],
  constraints: { require_bound_operation: true, require_approval: { scopes: ['data:delete'] } },
});
const gw = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
  routes: [{ method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool', mcp: { tools: { get_weather: 'data:read', delete_records: 'data:delete' } } }],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), flow.reg.api_key as string);
t.teardown(() => gw.close());

const agent = (extra: Partial<AgentMcpTransportOptions> = {}): AgentMcpTransportOptions => ({
  sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId, ...extra,
});
async function connect(extra: Partial<AgentMcpTransportOptions> = {}): Promise<Client> {
  const client = new Client({ name: 'binding-test', version: '1.0.0' });
  await client.connect(createAgentMcpTransport(`${gw.url}/mcp`, agent(extra)));
  t.teardown(() => client.close());
  return client;
}
const presented = async (): Promise<Array<{ details: { operation?: Record<string, string> } }>> =>
  (await flow.user.get('/v1/service/audit/personal?event_type=proof.presented&limit=5')).body.events;

t.test('tool calls bind their tool; the binding verifies through the gateway', async (t) => {
  const client = await connect();
  const ops = (await presented()).map((e) => e.details.operation);
  t.ok(ops.some((o) => o?.method === 'POST' && o.path === '/mcp' && o.tool === undefined), 'initialize was bound to the endpoint');
  const result = await client.callTool({ name: 'get_weather', arguments: { city: 'Porto' } });
  t.same(result.content, [{ type: 'text', text: 'sunny in Porto' }]);
  const op = (await presented())[0]?.details.operation;
  t.match(op, { method: 'POST', tool: 'get_weather', body_sha256: /^[0-9a-f]{64}$/ }, 'the tool call was bound to its tool and body');
  t.equal(op?.path, undefined, 'not to the path');
});

t.test('a proof bound to another tool or other arguments, or unbound, is refused before the server', async (t) => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'get_weather', arguments: { city: 'Braga' } } });
  const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
  const proofFor = async (operation: unknown): Promise<string> => {
    const path = `/v1/service/connections/${flow.reg.connection_id}/agents/${flow.agentId}/present`;
    const r = await flow.platform.post(path, { challenge: await challenge(flow.platform), ...(operation === undefined ? {} : { operation }) });
    return r.body.proof_header as string;
  };
  const headers = async (operation: unknown): Promise<Record<string, string>> => ({
    'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-service-proof': await proofFor(operation),
  });
  const runs = server.runs.length;
  const cases: Array<[string, unknown, string]> = [
    ['another tool', { method: 'POST', tool: 'delete_records', body_sha256: sha(body) }, 'operation_mismatch'],
    ['other arguments', { method: 'POST', tool: 'get_weather', body_sha256: sha(body.replace('Braga', 'Faro')) }, 'operation_mismatch'],
    ['the endpoint path instead of the tool, other body', { method: 'POST', path: '/mcp', body_sha256: sha('{}') }, 'operation_mismatch'],
    ['unbound', undefined, 'operation_unbound'],
  ];
  for (const [what, operation, reason] of cases) {
    const res = await send(gw.url, '/mcp', { method: 'POST', headers: await headers(operation), body });
    t.equal(res.status, 403, `${what}: status`);
    t.match(res.json, { id: 3, error: { data: { code: 'proof_rejected', reason, tool: 'get_weather' } } }, `${what}: ${reason}`);
  }
  t.equal(server.runs.length, runs, 'no tool ran');
  const right = await send(gw.url, '/mcp', { method: 'POST', headers: await headers({ method: 'POST', tool: 'get_weather', body_sha256: sha(body) }), body });
  t.equal(right.status, 200, 'the right binding passes');
});

t.test('a tool that needs approval: the refusal names it; with waitForApproval it runs once after a person approves', async (t) => {
  const client = await connect();
  const err = await client.callTool({ name: 'delete_records', arguments: { table: 'audit_tmp' } }).catch((e: unknown) => e) as AgentAuthzError;
  t.ok(err instanceof AgentAuthzError);
  t.same([err.reason, err.tool, err.approvalState], ['approval_required', 'delete_records', 'pending']);
  t.match(err.approvalId, /^[0-9a-f-]{36}$/);

  const waiting = await connect({
    waitForApproval: {
      pollIntervalMs: 100, timeoutMs: 20_000,
      onPending: (refusal) => { setTimeout(() => void flow.user.post(`/v1/service/approvals/${refusal.approvalId}/approve`), 300); },
    },
  });
  const result = await waiting.callTool({ name: 'delete_records', arguments: { table: 'sessions' } });
  t.same(result.content, [{ type: 'text', text: 'deleted sessions' }], 'the approved tool ran');
  t.equal(server.runs.filter((r) => r.tool === 'delete_records' && r.args.table === 'sessions').length, 1, 'exactly once');
  t.equal(server.runs.filter((r) => r.tool === 'delete_records' && r.args.table === 'audit_tmp').length, 0, 'the unapproved one never ran');
});
