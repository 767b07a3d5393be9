/**
 * Streams and answers through the gateway (issue 31, findings 2 to 5), with
 * the MCP reference server behind the real standalone gateway and the real
 * sidecar, and the official SDK client through `createAgentMcpTransport`.
 *
 * - SSE headers are flushed at once: an idle GET stream, and a tool call
 *   answered as a stream, get their headers long before their first event.
 * - An SSE stream is not cut by `upstream_timeout_ms` but by the route's
 *   `stream_idle_timeout_ms`, which ends it cleanly; a JSON answer whose body
 *   stalls before its first byte is 502 `upstream_unavailable` with cause
 *   `upstream_timeout` (was 500 `internal_error`).
 * - A sampling answer over the MCP body limit (`mcp.body_limit_bytes`) is
 *   refused to the client, and the server gets a JSON-RPC error for its
 *   request from the gateway: the tool call ends at once, with that error.
 * - Answers to server requests carry a session proof: an elicitation round
 *   costs one proof (the tool call's), not two.
 */

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createAgentMcpTransport } from '../../client/mcp.js';
import { challenge } from '../sidecar/decide/helpers.js';
import { specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey } from './helpers.js';
import { startEverything } from './mcp-everything.js';

t.setTimeout(180_000);

const sc = await startSidecar();
const server = await startEverything();
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const flow = await specFlow(sc, 'mcp-streams@example.com', { scopes: ['execute:tool', 'data:read'], approve: ['execute:tool', 'data:read'] });
const tools = {
  echo: 'data:read', 'trigger-long-running-operation': 'execute:tool',
  'trigger-sampling-request': 'execute:tool', 'trigger-elicitation-request': 'execute:tool',
};
const route = (mcp: Record<string, unknown> = {}): unknown =>
  ({ method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool', mcp: { public: ['ping'], tools, ...mcp } });
const start = (upstream: string, extra: Record<string, unknown>): ReturnType<typeof startGatewayWithKey> =>
  startGatewayWithKey(gatewayConfig(upstream, sc.url, { verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000, ...extra }), flow.reg.api_key as string);
const gw = await start(server.url, { routes: [route({ body_limit_bytes: 1_048_576, stream_idle_timeout_ms: 3_000 })] });
t.teardown(() => gw.close());

/** A request body as text: the agent's fetch sends bytes (client/fetch.ts), a caller may send a string. */
function bodyText(body: RequestInit['body']): string {
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return new TextDecoder().decode(body);
  throw new TypeError(`unexpected request body type ${Object.prototype.toString.call(body)}`);
}

/** What the agent's fetch sent: sidecar presents, and the gateway POSTs with their proof headers. */
let presents = 0;
const posts: Array<{ proof: boolean; sessionProof: boolean; body: string }> = [];
async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'streams-test', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: { form: {} } } });
  await client.connect(createAgentMcpTransport(`${url}/mcp`, {
    sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string, agentId: flow.agentId, timeoutMs: 30_000,
    fetch: (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.endsWith('/present')) presents += 1;
      if (url.startsWith(gw.url) && init?.method === 'POST') {
        const headers = new Headers(init.headers);
        posts.push({ proof: headers.has('x-service-proof'), sessionProof: headers.has('x-service-session-proof'), body: bodyText(init.body) });
      }
      return fetch(input, init);
    },
  }));
  t.teardown(() => client.close());
  return client;
}

async function proof(): Promise<string> {
  const path = `/v1/service/connections/${flow.reg.connection_id}/agents/${flow.agentId}/present`;
  const r = await flow.platform.post(path, { challenge: await challenge(flow.platform) });
  return r.body.proof_header as string;
}

/** Opens a session through the gateway with raw HTTP; returns its token. */
async function openSession(url: string): Promise<string> {
  const res = await request(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-service-proof': await proof() },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
  await res.body.text();
  return res.headers['mcp-session-id'] as string;
}

/** Sends a request and times its headers and its end. */
interface Timed { status: number; type: unknown; headersMs: number; endMs: number; text: string }
async function timed(url: string, method: 'GET' | 'POST', session: string, body?: unknown): Promise<Timed> {
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'mcp-session-id': session, 'x-service-proof': await proof() };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const started = performance.now();
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const res = await request(`${url}/mcp`, { method, headers, body: payload, headersTimeout: 5_000, bodyTimeout: 10_000 });
  const headersMs = performance.now() - started;
  const text = await res.body.text();
  return { status: res.statusCode, type: res.headers['content-type'], headersMs, endMs: performance.now() - started, text };
}

t.test('SSE headers are flushed at once; an idle stream is ended by its own idle limit', async (t) => {
  const session = await openSession(gw.url);
  const get = await timed(gw.url, 'GET', session);
  t.equal(get.status, 200);
  t.match(get.type, /^text\/event-stream/);
  t.ok(get.headersMs < 1_000, `the idle GET stream's headers came at once (${get.headersMs.toFixed(0)} ms)`);
  t.ok(get.endMs >= 2_900 && get.endMs < 10_000, `it was ended cleanly by stream_idle_timeout_ms 3000 (${get.endMs.toFixed(0)} ms)`);
  const slow = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'trigger-long-running-operation', arguments: { duration: 2, steps: 1 } } };
  const post = await timed(gw.url, 'POST', session, slow);
  t.equal(post.status, 200);
  t.ok(post.headersMs < 1_000, `a tool call answered as a stream: headers at once (${post.headersMs.toFixed(0)} ms)`);
  t.ok(post.endMs >= 1_900, `its result after the operation (${post.endMs.toFixed(0)} ms)`);
  t.match(post.text, /"id":9/);
});

t.test('upstream_timeout_ms: a stalled JSON body is 502 upstream_timeout; an SSE stream is not cut by it', async (t) => {
  const stalled = http.createServer((req, res) => {
    req.resume();
    const sse = req.method === 'GET';
    res.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/json', ...(sse ? {} : { 'mcp-session-id': 'up-1' }) });
    res.flushHeaders(); // headers sent, body never
  });
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
  t.teardown(() => { stalled.closeAllConnections(); stalled.close(); });
  const slow = await start(`http://127.0.0.1:${(stalled.address() as AddressInfo).port}`, { routes: [route()], upstream_timeout_ms: 500 });
  t.teardown(() => slow.close());
  const init = await request(`${slow.url}/mcp`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-service-proof': await proof() },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'init-1', method: 'initialize', params: {} }),
  });
  const body = await init.body.json() as { id: unknown; error: { code: number; data: Record<string, unknown> } };
  t.equal(init.statusCode, 502, 'a JSON answer that stalls before its first byte');
  t.match(body, { id: 'init-1', error: { code: -32603, data: { code: 'upstream_unavailable', cause: 'upstream_timeout', status: 502 } } });
  const started = performance.now();
  const headers = { accept: 'text/event-stream', 'x-service-proof': await proof() };
  const get = await request(`${slow.url}/mcp`, { method: 'GET', headers, headersTimeout: 5_000 });
  t.equal(get.statusCode, 200, 'the SSE stream is answered at once');
  const ended = await Promise.race([get.body.text().then(() => 'ended'), new Promise((r) => setTimeout(() => r('open'), 1_500))]);
  t.equal(ended, 'open', `still open ${(performance.now() - started).toFixed(0)} ms later, past upstream_timeout_ms 500`);
  get.body.destroy();
});

t.test('a sampling answer over the MCP body limit: the server gets an error for it, nothing hangs', async (t) => {
  const client = await connect(gw.url);
  const big = { type: 'text' as const, text: 'x'.repeat(1_150_000) };
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'test', role: 'assistant', content: big }));
  const before = server.received.length;
  const started = performance.now();
  const result = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'big', maxTokens: 10 } }, undefined, { timeout: 20_000 });
  const ms = performance.now() - started;
  t.ok(ms < 15_000, `the tool call ended in ${ms.toFixed(0)} ms (it used to hang until the request timeout)`);
  t.equal(result.isError, true, 'with the error the server got');
  t.match(JSON.stringify(result.content), /larger than the gateway's MCP body limit \(1048576 bytes\)/);
  const answers = server.received.slice(before).filter((r) => r.method === 'POST' && (r.body as { error?: unknown })?.error !== undefined);
  t.equal(answers.length, 1, 'the server received one JSON-RPC error for its sampling request, from the gateway');
  t.match(answers[0]?.body, { error: { code: -32600, data: { code: 'body_too_large', limit: 1_048_576 } } });
  t.equal(answers[0]?.headers['x-service-agent-id'], flow.agentId, 'sent as the session\'s agent');
  t.equal(server.received.slice(before).some((r) => JSON.stringify(r.body ?? '').length > 1_000_000), false, 'the big answer never reached it');
});

t.test('an answer to a server request costs no proof: the session proves it', async (t) => {
  const client = await connect(gw.url);
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { color: 'blue', number: 7, pets: 'Cats' } }));
  const before = server.received.length;
  const sent = posts.length;
  const result = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }, undefined, { timeout: 20_000 });
  t.match(JSON.stringify(result.content), /blue/, 'the tool got the answer');
  const round = posts.slice(sent).map((p) => [JSON.parse(p.body).method ?? 'answer', p.proof, p.sessionProof]);
  t.same(round, [['tools/call', true, false], ['answer', false, true]], 'a proof for the tool call, a session proof for the answer');
  const answer = server.received.slice(before).find((r) => (r.body as { result?: unknown })?.result !== undefined);
  t.equal(answer?.headers['x-service-decision'], 'allow');
  t.equal(answer?.headers['x-service-agent-id'], flow.agentId, 'the answer reached the server as the session\'s agent');
  t.equal(answer?.headers['x-service-session-proof'], undefined, 'the session proof is not forwarded');
});
