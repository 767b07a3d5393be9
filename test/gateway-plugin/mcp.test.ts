/**
 * MCP-aware routes end to end, with the official TypeScript MCP SDK on both
 * sides: a real MCP server (5 tools, Streamable HTTP) as the upstream, a real
 * MCP `Client` through the real gateway, and the REAL sidecar (in process,
 * SQLite, real signatures) deciding.
 *
 * - protocol methods (initialize, notifications/initialized, tools/list) pass
 *   with a proof for the route's scope; `ping` is public;
 * - an allowed tool runs (get_weather);
 * - an undelegated tool (delete_records → data:delete) is refused 403
 *   not_delegated before the server sees it;
 * - an unmapped tool (admin_shell) is refused 403 tool_not_mapped, without a
 *   verify call, before the server sees it;
 * - send_payment over the certificate's max_amount is 403 constraint_denied
 *   (max_amount), under it runs;
 * - read_file's path argument is the context path: inside the certificate's
 *   path_prefixes runs, outside is constraint_denied (path_prefixes);
 * - refusals are JSON-RPC error objects with the request's id, the reason and
 *   the tool; a missing proof is 401 with WWW-Authenticate and a challenge.
 */

import t from 'tap';
import type { Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { delegateAgent, present, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, metricSum, proofHeader, send, startGatewayWithKey } from './helpers.js';
import { proofFetch, startMcpUpstream } from './mcp-helpers.js';
import type { Refused } from './mcp-helpers.js';

t.setTimeout(60_000);

const sc = await startSidecar();
const mcpServer = await startMcpUpstream();
t.teardown(async () => {
  await mcpServer.close();
  await sc.close();
});

const payer: Flow = await specFlow(sc, 'mcp-owner@example.com', {
  scopes: ['execute:tool', 'data:read', 'payments:send', 'files:read', 'data:delete'],
  approve: ['execute:tool', 'data:read', 'payments:send'],
  constraints: { max_amount: { amount: '50.00', currency: 'USD' } },
});
const reader: Flow = await delegateAgent(payer, 'file-reader', { approve: ['execute:tool', 'files:read'], constraints: { path_prefixes: ['/mcp', '/reports'] } });

const MCP_ROUTE = {
  method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool',
  mcp: {
    public: ['ping'],
    tools: {
      get_weather: 'data:read',
      send_payment: { scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } },
      read_file: { scope: 'files:read', context: { resource: '/path' } },
      delete_records: 'data:delete',
    },
  },
};
const gw = await startGatewayWithKey(gatewayConfig(mcpServer.url, sc.url, { routes: [MCP_ROUTE], verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000 }), payer.reg.api_key as string);
t.teardown(() => gw.close());

/** An MCP client through the gateway whose every HTTP request carries a fresh proof of `flow`'s agent. */
async function connect(flow: Flow, refused: Refused[]): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
    fetch: proofFetch(async () => proofHeader(await present(flow)), refused),
  });
  const client = new Client({ name: 'agent-authz-test-agent', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

const refused: Refused[] = [];
const client = await connect(payer, refused);
t.teardown(() => client.close());

await t.test('protocol methods pass with a proof; tools/list lists the server\'s tools', async (t) => {
  const { tools } = await client.listTools();
  t.same(tools.map((x) => x.name).sort(), ['admin_shell', 'delete_records', 'get_weather', 'read_file', 'send_payment']);
  t.ok(mcpServer.received.some((r) => r.body.includes('"initialize"')), 'initialize reached the server');
});

await t.test('an allowed tool runs', async (t) => {
  const runs = mcpServer.runs.length;
  const result = await client.callTool({ name: 'get_weather', arguments: { city: 'Lisbon' } });
  t.same(result.content, [{ type: 'text', text: 'sunny in Lisbon' }]);
  t.same(mcpServer.runs.slice(runs), [{ tool: 'get_weather', args: { city: 'Lisbon' } }]);
});

/** Calls a tool that must be refused; returns the gateway's answer. */
async function refusedCall(t: Test, c: Client, log: Refused[], name: string, args: Record<string, unknown>): Promise<Refused> {
  // Messages only: the SDK client opens its GET event stream in the background after connecting,
  // and that GET may reach the server at any moment (a race of the client, not of this call).
  const posts = (): number => mcpServer.received.filter((r) => r.method === 'POST').length;
  const received = posts();
  const before = log.length;
  await t.rejects(c.callTool({ name, arguments: args }), `${name} is refused`);
  t.equal(log.length, before + 1, 'one refused HTTP answer');
  t.equal(posts(), received, 'the MCP server received nothing');
  return log.at(-1) as Refused;
}

function checkJsonRpcError(t: Test, r: Refused, status: number, code: string, tool: string, rpcCode: number): void {
  t.equal(r.status, status, 'HTTP status');
  t.equal(r.body?.jsonrpc, '2.0', 'a JSON-RPC error response');
  t.type(r.body?.id, 'number', 'carries the request id');
  t.equal(r.body?.error?.code, rpcCode, 'JSON-RPC error code');
  t.equal(r.body?.error?.data?.code, code, 'service error code');
  t.equal(r.body?.error?.data?.status, status, 'service error status');
  t.equal(r.body?.error?.data?.tool, tool, 'names the tool');
}

await t.test('an undelegated tool is refused before the server sees it', async (t) => {
  const runs = mcpServer.runs.length;
  const r = await refusedCall(t, client, refused, 'delete_records', { table: 'users' });
  checkJsonRpcError(t, r, 403, 'not_delegated', 'delete_records', -32003);
  t.equal(r.body.error.data.reason, 'not_delegated', 'the decision reason');
  t.equal(mcpServer.runs.length, runs, 'nothing ran');
});

await t.test('an unmapped tool is refused before the server sees it (no verify call)', async (t) => {
  const verifies = await metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_verify_duration_seconds_count');
  const r = await refusedCall(t, client, refused, 'admin_shell', { cmd: 'id' });
  checkJsonRpcError(t, r, 403, 'tool_not_mapped', 'admin_shell', -32003);
  t.equal(r.body.error.data.reason, 'tool_not_mapped');
  t.equal(await metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_verify_duration_seconds_count'), verifies, 'verify was not called');
  t.notOk(mcpServer.runs.some((x) => x.tool === 'admin_shell'), 'admin_shell never ran');
});

await t.test('an argument over the max_amount constraint is refused; under it runs', async (t) => {
  const r = await refusedCall(t, client, refused, 'send_payment', { amount: 75, currency: 'USD', to: 'acct-9' });
  checkJsonRpcError(t, r, 403, 'constraint_denied', 'send_payment', -32003);
  t.equal(r.body.error.data.constraint, 'max_amount');
  t.equal(r.body.error.data.reason, 'constraint_denied');
  const euros = await refusedCall(t, client, refused, 'send_payment', { amount: 10, currency: 'EUR', to: 'acct-9' });
  t.equal(euros.body.error.data.constraint, 'max_amount', 'another currency is refused too');
  const ok = await client.callTool({ name: 'send_payment', arguments: { amount: 49.5, currency: 'usd', to: 'acct-9' } });
  t.same(ok.content, [{ type: 'text', text: 'sent 49.5 usd to acct-9' }]);
  t.notOk(mcpServer.runs.some((x) => x.tool === 'send_payment' && x.args.amount === 75), 'the 75 USD payment never ran');
});

await t.test('a path-like argument is checked against path_prefixes', async (t) => {
  const log: Refused[] = [];
  const c = await connect(reader, log);
  t.teardown(() => c.close());
  const ok = await c.callTool({ name: 'read_file', arguments: { path: '/reports/q1.csv' } });
  t.same(ok.content, [{ type: 'text', text: 'contents of /reports/q1.csv' }]);
  const r = await refusedCall(t, c, log, 'read_file', { path: '/etc/passwd' });
  checkJsonRpcError(t, r, 403, 'constraint_denied', 'read_file', -32003);
  t.equal(r.body.error.data.constraint, 'path_prefixes');
  const dots = await refusedCall(t, c, log, 'read_file', { path: '/reports/../etc/passwd' });
  checkJsonRpcError(t, dots, 400, 'invalid_request', 'read_file', -32600);
  const other = await refusedCall(t, c, log, 'get_weather', { city: 'Oslo' });
  t.equal(other.body.error.data.code, 'not_delegated', 'the reader has no data:read');
});

await t.test('raw JSON-RPC: missing proof, public ping, batches, bad bodies', async (t) => {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const call = JSON.stringify({ jsonrpc: '2.0', id: 'call-7', method: 'tools/call', params: { name: 'send_payment', arguments: { amount: 1, currency: 'USD', to: 'x' } } });
  const received = mcpServer.received.length;
  const missing = await send(gw.url, '/mcp', { method: 'POST', headers, body: call });
  t.equal(missing.status, 401);
  t.match(missing.headers['www-authenticate'], /^ServiceProof realm="agent-authz", scope="payments:send", challenge="[A-Za-z0-9_-]{20,}"$/, 'the tool\'s scope and a challenge');
  t.equal(missing.json?.id, 'call-7');
  t.equal(missing.json?.error?.code, -32001);
  t.equal(missing.json?.error?.data?.code, 'proof_required');
  t.equal(missing.json?.error?.data?.required_scope, 'payments:send');
  t.equal(missing.json?.error?.data?.tool, 'send_payment');

  const notified = await send(gw.url, '/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  t.equal(notified.status, 401, 'a notification needs a proof unless listed in mcp.public');
  t.equal(notified.json?.id, null);

  const ping = await send(gw.url, '/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
  t.equal(ping.status, 200, 'ping is public');
  t.match(ping.text, /"result":\{\}/);
  t.equal(mcpServer.received.length, received + 1, 'only the ping reached the server');

  const batch = await send(gw.url, '/mcp', { method: 'POST', headers, body: `[${call},${call}]` });
  t.equal(batch.status, 400);
  t.same(batch.json, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'JSON-RPC batches are not accepted; send one message per request.', data: { code: 'batch_not_supported', message: 'JSON-RPC batches are not accepted; send one message per request.', status: 400, reason: 'batch_not_supported' } } });
  const garbage = await send(gw.url, '/mcp', { method: 'POST', headers, body: '{"jsonrpc":' });
  t.equal(garbage.status, 400);
  t.equal(garbage.json?.error?.code, -32700, 'a parse error');
  const dup = await send(gw.url, '/mcp', { method: 'POST', headers, body: '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_weather","name":"admin_shell"}}' });
  t.equal(dup.json?.error?.data?.code, 'invalid_request', 'duplicate keys are refused');
  t.equal(dup.json?.id, null, 'a message that is not strict JSON has no readable id');
  t.equal(dup.json?.error?.code, -32700);
  const plain = await send(gw.url, '/mcp', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: call });
  t.equal(plain.status, 415);
  t.equal(plain.json?.error?.data?.code, 'unsupported_media_type');
  const forged = await send(gw.url, '/mcp', { method: 'POST', headers: { ...headers, 'x-service-proof': proofHeader(await present(payer)) }, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'get_weather', arguments: 'Paris' } }) });
  t.equal(forged.status, 400, 'arguments must be an object');
  t.equal(mcpServer.received.length, received + 1, 'none of these reached the server');
});

await t.test('the fail-open tripwire stayed 0', async (t) => {
  t.equal(await metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_fail_open_total'), 0);
});
