/**
 * Every MCP feature works through the gateway as it does directly (issue
 * 31): the MCP reference server (`@modelcontextprotocol/server-everything`),
 * the official SDK client (1.32.2) through `createAgentMcpTransport`, the
 * REAL standalone gateway (a scope per tool) and the REAL sidecar. One script
 * of features runs against the server directly and through the gateway, and
 * the two transcripts must be the same: tools (text, sum, image), resources
 * (list, templates, read, subscribe/unsubscribe), prompts (list, get,
 * completion), logging level, progress, sampling, form and URL
 * elicitation, tasks, ping, cancellation, resumption with `Last-Event-ID`,
 * and session deletion (the script is `mcp-everything-script.ts`).
 */

import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgentMcpTransport } from '../../client/mcp.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey } from '../gateway-plugin/helpers.js';
import { startEverything } from '../gateway-plugin/mcp-everything.js';
import { script } from './mcp-everything-script.js';

t.setTimeout(240_000);

const sc = await startSidecar();
const server = await startEverything();
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const flow = await specFlow(sc, 'mcp-everything@example.com', { scopes: ['execute:tool', 'data:read'], approve: ['execute:tool', 'data:read'] });
const tools = {
  echo: 'data:read', 'get-sum': 'data:read', 'get-tiny-image': 'data:read', 'trigger-long-running-operation': 'execute:tool',
  'trigger-sampling-request': 'execute:tool', 'trigger-elicitation-request': 'execute:tool',
  'trigger-url-elicitation': 'execute:tool', 'simulate-research-query': 'execute:tool',
};
const gw = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
  routes: [{ method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool', mcp: { public: ['ping', 'notifications/*'], tools } }],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), flow.reg.api_key as string);
t.teardown(() => gw.close());

const agent = {
  sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId, timeoutMs: 30_000,
};

t.test('the same feature script, directly and through the gateway', async (t) => {
  const direct = await script((sessionId) => new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { sessionId }));
  const before = server.sessions().length;
  const through = await script((sessionId) => createAgentMcpTransport(`${gw.url}/mcp`, { ...agent, transport: { sessionId } }));
  t.equal(server.sessions().length, before, 'the session was deleted through the gateway');
  const tool = (v: unknown): string => JSON.stringify(v);
  t.match(tool(direct.echo), /Echo: hello/, 'the direct run worked');
  t.match(tool(direct.sampling), /sampled/, 'sampling worked directly');
  t.match(tool(direct.elicitation), /green/, 'elicitation worked directly');
  t.match(tool(direct.urlRequest), /accept/, 'URL elicitation (request path) worked directly');
  t.match(direct.urlError, { code: -32042 }, 'URL elicitation (error path) is the -32042 error directly');
  t.match(tool(direct.taskResult), /technical/, 'the task asked for a clarification and used it');
  t.match(direct.taskGet, { status: 'completed' }, 'the task completed directly');
  t.same(direct.taskKinds, ['taskCreated', 'result'], 'the task was created, then gave its result');
  t.equal(direct.resumeTokens, true, 'the cut stream had event ids');
  t.equal(direct.resumeCut, 'cut', 'the first connection was cut before the tool finished');
  t.match(tool(direct.resumed), /Long running operation completed/, 'the resumed stream delivered the result directly');
  for (const key of Object.keys(direct)) t.same(through[key], direct[key], `${key}: the same through the gateway`);
  t.same(Object.keys(through).sort(), Object.keys(direct).sort());
});

t.test('a tool that is not mapped is refused through the gateway (403 tool_not_mapped, named in the error)', async (t) => {
  const client = new Client({ name: 'everything-test', version: '1.0.0' });
  await client.connect(createAgentMcpTransport(`${gw.url}/mcp`, agent));
  t.teardown(() => client.close());
  const err = await client.callTool({ name: 'get-env', arguments: {} }).catch((e: unknown) => e) as { code?: string; tool?: string };
  t.match(err, { code: 'tool_not_mapped', tool: 'get-env' });
});
