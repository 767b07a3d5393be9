/**
 * `agent-authz/client/mcp` with the official MCP SDK `Client`, through the
 * REAL gateway (MCP route) to a real SDK MCP server, the REAL sidecar
 * deciding: every HTTP request of the session carries a fresh proof made by
 * the transport; an allowed tool runs; a refused tool call rejects with an
 * AgentAuthzError naming the tool, the JSON-RPC id and the decision reason,
 * and is not retried.
 */

import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { AgentAuthzError } from '../../client/index.js';
import { createAgentMcpTransport } from '../../client/mcp.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, metricSum, startGatewayWithKey } from '../gateway-plugin/helpers.js';
import { startMcpUpstream } from '../gateway-plugin/mcp-helpers.js';

t.setTimeout(60_000);

const sc = await startSidecar();
const server = await startMcpUpstream(true);
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const flow = await specFlow(sc, 'mcp-client@example.com', {
  scopes: ['execute:tool', 'data:read', 'payments:send', 'data:delete'],
  approve: ['execute:tool', 'data:read', 'payments:send'],
  constraints: { max_amount: { amount: '20.00', currency: 'EUR' } },
});
const gw = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
  routes: [{
    method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool',
    mcp: { tools: { get_weather: 'data:read', delete_records: 'data:delete', send_payment: { scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } } } },
  }],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), flow.reg.api_key as string);
t.teardown(() => gw.close());

const client = new Client({ name: 'agent-authz-client-test', version: '1.0.0' });
await client.connect(createAgentMcpTransport(`${gw.url}/mcp`, {
  sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId,
}));
t.teardown(() => client.close());
const count = (outcome: string): Promise<number> => metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_requests_total', { outcome });

t.test('an allowed tool runs, with a proof on every request', async (t) => {
  const allowed = await count('allowed');
  const result = await client.callTool({ name: 'get_weather', arguments: { city: 'Porto' } });
  t.same(result.content, [{ type: 'text', text: 'sunny in Porto' }]);
  t.equal(await count('allowed'), allowed + 1);
  t.equal(await count('401'), 0, 'no request ever went out without a proof');
});

t.test('a refused tool call rejects with the reason, the tool and the id, without a retry', async (t) => {
  const refused = await count('403');
  const err = await client.callTool({ name: 'delete_records', arguments: { table: 'users' } }).catch((e: unknown) => e) as AgentAuthzError;
  t.ok(err instanceof AgentAuthzError, 'an AgentAuthzError');
  t.same([err.code, err.reason, err.tool, err.status, err.source], ['not_delegated', 'not_delegated', 'delete_records', 403, 'gateway']);
  t.type(err.jsonRpcId, 'number', 'the JSON-RPC id of the refused call');
  t.equal(err.operation?.tool, 'delete_records', 'the operation names the tool');
  const over = await client.callTool({ name: 'send_payment', arguments: { amount: 25, currency: 'EUR', to: 'x' } }).catch((e: unknown) => e) as AgentAuthzError;
  t.same([over.code, over.constraint, over.tool], ['constraint_denied', 'max_amount', 'send_payment']);
  t.equal(await count('403'), refused + 2, 'one request per refused call');
  t.notOk(server.runs.some((r) => r.tool === 'delete_records' || (r.tool === 'send_payment' && r.args.amount === 25)), 'neither ran');
  const ok = await client.callTool({ name: 'send_payment', arguments: { amount: 5, currency: 'EUR', to: 'x' } });
  t.same(ok.content, [{ type: 'text', text: 'sent 5 EUR to x' }], 'the session goes on');
});
