/**
 * Every MCP feature works through the gateway as it does directly (issue
 * 31): the MCP reference server (`@modelcontextprotocol/server-everything`),
 * the official SDK client (1.32.2) through `createAgentMcpTransport`, the
 * REAL standalone gateway (a scope per tool) and the REAL sidecar. One script
 * of features runs against the server directly and through the gateway, and
 * the two transcripts must be the same: tools (text, sum, image), resources
 * (list, templates, read, subscribe/unsubscribe), prompts (list, get,
 * completion), logging level, progress, sampling, elicitation, ping,
 * cancellation, and session deletion.
 */

import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createAgentMcpTransport } from '../../client/mcp.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey } from '../gateway-plugin/helpers.js';
import { startEverything } from '../gateway-plugin/mcp-everything.js';

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
};
const gw = await startGatewayWithKey(gatewayConfig(server.url, sc.url, {
  routes: [{ method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool', mcp: { public: ['ping', 'notifications/*'], tools } }],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
}), flow.reg.api_key as string);
t.teardown(() => gw.close());

/** Values that differ between two runs of the same script (ids, times, random numbers). */
function normalize(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (key, v: unknown) => {
    if (key === 'sessionId' || key === 'requestId' || key === 'progressToken' || key === 'timestamp') return '<varies>';
    if (typeof v === 'string') return v.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>');
    return v;
  })) as unknown;
}

/** The feature script: a transcript of what the client saw. */
async function script(transport: Transport & { terminateSession(): Promise<void>; sessionId?: string }): Promise<Record<string, unknown>> {
  const client = new Client({ name: 'everything-test', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: { form: {} } } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled: ${JSON.stringify(req.params.messages[0]?.content)}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { color: 'green', number: 3, pets: 'Dogs' } }));
  await client.connect(transport);
  const out: Record<string, unknown> = {};
  out.server = client.getServerVersion();
  out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
  out.echo = await client.callTool({ name: 'echo', arguments: { message: 'hello' } });
  out.sum = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } });
  out.image = await client.callTool({ name: 'get-tiny-image', arguments: {} });
  const resources = await client.listResources();
  out.resources = resources.resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate);
  const first = resources.resources[0]?.uri ?? 'none';
  out.read = await client.readResource({ uri: first });
  out.subscribe = await client.subscribeResource({ uri: first });
  out.unsubscribe = await client.unsubscribeResource({ uri: first });
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name).sort();
  out.prompt = await client.getPrompt({ name: 'simple-prompt' });
  out.completion = await client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } });
  out.logging = await client.setLoggingLevel('debug');
  const progress: number[] = [];
  out.longRun = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }, undefined, {
    onprogress: (p) => { progress.push(p.progress); },
  });
  out.progress = progress;
  out.sampling = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 5 } });
  out.elicitation = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
  out.ping = await client.ping();
  const abort = new AbortController();
  const cancelled = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 5, steps: 5 } }, undefined, { signal: abort.signal });
  setTimeout(() => abort.abort('changed my mind'), 300);
  out.cancelled = await cancelled.then(() => 'completed', (err: Error) => `rejected: ${err.message}`);
  const session = transport.sessionId;
  await transport.terminateSession();
  out.terminated = session !== undefined && transport.sessionId === undefined;
  await client.close();
  return normalize(out) as Record<string, unknown>;
}

const agent = {
  sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId, timeoutMs: 30_000,
};

t.test('the same feature script, directly and through the gateway', async (t) => {
  const direct = await script(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
  const before = server.sessions().length;
  const through = await script(createAgentMcpTransport(`${gw.url}/mcp`, agent));
  t.equal(server.sessions().length, before, 'the session was deleted through the gateway');
  const tool = (v: unknown): string => JSON.stringify(v);
  t.match(tool(direct.echo), /Echo: hello/, 'the direct run worked');
  t.match(tool(direct.sampling), /sampled/, 'sampling worked directly');
  t.match(tool(direct.elicitation), /green/, 'elicitation worked directly');
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
