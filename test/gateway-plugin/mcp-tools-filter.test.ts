/**
 * `mcp.filter_tools_list` (issue 34, docs/mcp.md#tools-list-filter): the REAL sidecar, the REAL
 * gateway, an MCP server of the official SDK (mcp-helpers.ts; JSON and SSE answers), driven by the
 * official SDK client through `createAgentMcpTransport`. An agent lists exactly the mapped tools its
 * delegation grants, an agent with more scopes lists more, the unmapped tool is never listed, a
 * revoked delegation lists nothing (the client cannot even prove the request), and a failed
 * action search refuses the list (503
 * `verify_unavailable`, cause `action_search_failed`) instead of passing it whole.
 */

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createAgentMcpTransport } from '../../client/mcp.js';
import { present, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, proofHeader, send, startGatewayWithKey } from './helpers.js';
import { startMcpUpstream } from './mcp-helpers.js';

t.setTimeout(180_000);

const sc = await startSidecar();
const sse = await startMcpUpstream(false);
const json = await startMcpUpstream(true);
t.teardown(async () => {
  await sse.close();
  await json.close();
  await sc.close();
});

const offered = ['execute:tool', 'data:read', 'data:write', 'payments:send'];
const small = await specFlow(sc, 'tools-small@example.com',
  { scopes: offered, approve: ['execute:tool', 'data:read'] });
const big = await specFlow(sc, 'tools-big@example.com', { scopes: offered, approve: offered });
const tools = {
  get_weather: 'data:read', send_payment: 'payments:send', delete_records: 'data:write', read_file: 'files:read',
};

/** A loopback proxy to the sidecar whose action search answers 503 (verify and the rest pass). */
async function searchDown(): Promise<{ url: string; searches: () => number; close(): Promise<void> }> {
  const target = new URL(sc.url);
  let searches = 0;
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/access/v1/search/action')) {
      searches += 1;
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"evaluation_indeterminate"}}');
      req.resume();
      return;
    }
    const up = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (r) => { res.writeHead(r.statusCode ?? 502, r.headers); r.pipe(res); });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = (): Promise<void> => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return { url: `http://127.0.0.1:${port}`, searches: () => searches, close };
}

async function gateway(upstream: string, flow: Flow, sidecarUrl = sc.url, filter = true): Promise<string> {
  const gw = await startGatewayWithKey(gatewayConfig(upstream, sidecarUrl, {
    routes: [{ method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool',
      mcp: { public: ['notifications/*'], tools, ...(filter ? { filter_tools_list: true } : {}) } }],
    verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000,
  }), flow.reg.api_key as string);
  t.teardown(() => gw.close());
  return gw.url;
}

async function listTools(gw: string, flow: Flow): Promise<string[]> {
  const client = new Client({ name: 'tools-filter-test', version: '1.0.0' });
  await client.connect(createAgentMcpTransport(`${gw}/mcp`, {
    sidecarUrl: sc.url, apiKey: flow.platform.apiKey as string, connectionId: flow.reg.connection_id as string,
    agentId: flow.agentId, timeoutMs: 30_000,
  }));
  try {
    return (await client.listTools()).tools.map((tool) => tool.name).sort();
  } finally {
    await client.close();
  }
}

for (const [form, upstream] of [['SSE', sse], ['JSON', json]] as const) {
  t.test(`${form} answers: each agent lists exactly the mapped tools its delegation grants`, async (t) => {
    const unfiltered = await listTools(await gateway(upstream.url, small, sc.url, false), small);
    t.same(unfiltered, ['admin_shell', 'delete_records', 'get_weather', 'read_file', 'send_payment'],
      'without the option the list passes whole');
    t.same(await listTools(await gateway(upstream.url, small), small), ['get_weather'], 'data:read only');
    t.same(await listTools(await gateway(upstream.url, big), big), ['delete_records', 'get_weather', 'send_payment'],
      'more scopes, more tools; read_file (files:read not granted) and admin_shell (not mapped) never');
    const seen = upstream.received.filter((r) => r.body.includes('"tools/list"'));
    t.ok(seen.length >= 3, 'the upstream answered each list');
  });
}

t.test('a revoked delegation: the next tools/list lists nothing', async (t) => {
  const flow = await specFlow(sc, 'tools-revoked@example.com', { scopes: offered, approve: offered });
  const gw = await gateway(json.url, flow);
  t.same(await listTools(gw, flow), ['delete_records', 'get_weather', 'send_payment']);
  const rv = await flow.user.post(`/v1/service/delegations/${flow.certId}/revoke`, { reason: 'test' });
  t.equal(rv.status, 200, rv.text);
  const err = await listTools(gw, flow).then(() => undefined, (e: unknown) => e) as { code?: string } | undefined;
  t.ok(err !== undefined, 'nothing was listed');
  // The client knows first: with no active delegation it cannot prove the list request at all.
  t.match(err, { code: 'no_active_delegation' });
});

for (const [form, upstream] of [['SSE', sse], ['JSON', json]] as const) {
  t.test(`${form}: a failed action search refuses the list (503 verify_unavailable)`, async (t) => {
    const down = await searchDown();
    t.teardown(() => down.close());
    const gw = await gateway(upstream.url, big, down.url);
    const before = upstream.received.length;
    const err = await listTools(gw, big).then(() => undefined, (e: unknown) => e) as { code?: string } | undefined;
    t.match(err, { code: 'verify_unavailable', status: 503, source: 'gateway' });
    // The search runs only after verify allowed the list.
    t.equal(down.searches(), 1, 'the action search was asked once, after an allow, and failed');
    t.notOk(upstream.received.slice(before).some((r) => r.body.includes('"tools/list"')),
      'the upstream never saw the list request');
  });
}

/** A raw MCP upstream answering tools/list as SSE: a comment, a notification, the list in two chunks (CRLF). */
async function rawSseUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown }).id;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': keep-alive\n\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
        + '"params":{"level":"info","data":{"tools":[{"name":"admin_shell"}]}}}\n\n');
      const list = 'id: e1\r\nevent: message\r\ndata: {"result":{"tools":[{"name":"get_weather"},'
        + '{"name":"admin_shell"},{"name":"send_payment"}],"nextCursor":"c2"},"jsonrpc":"2.0",'
        + `"id":${JSON.stringify(id)}}\r\n\r\n`;
      res.write(list.slice(0, 40));
      setTimeout(() => res.end(list.slice(40)), 50);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

t.test('SSE: only the list event is rewritten; other events pass byte for byte', async (t) => {
  const raw = await rawSseUpstream();
  t.teardown(() => raw.close());
  const gw = await gateway(raw.url, small);
  const body = '{"jsonrpc":"2.0","id":7,"method":"tools/list"}';
  const res = await send(gw, '/mcp', { method: 'POST', body, headers: {
    'content-type': 'application/json', accept: 'application/json, text/event-stream',
    'x-service-proof': proofHeader(await present(small) as Record<string, unknown>) } });
  t.equal(res.status, 200, res.text);
  t.ok(res.text.startsWith(': keep-alive\n\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
    + '"params":{"level":"info","data":{"tools":[{"name":"admin_shell"}]}}}\n\n'),
  'the comment and notification unchanged');
  t.ok(res.text.endsWith('id: e1\nevent: message\ndata: {"result":{"tools":[{"name":"get_weather"}],"nextCursor":"c2"},'
    + '"jsonrpc":"2.0","id":7}\n\n'), `the list filtered, its id and nextCursor kept: ${res.text}`);
});

t.test('tools/list cannot be public with filter_tools_list (a config error naming the path)', async (t) => {
  const config = gatewayConfig(json.url, sc.url, { routes: [{ method: 'POST', path: '/mcp', scope: 'execute:tool',
    mcp: { public: ['tools/list'], tools, filter_tools_list: true } }] });
  await t.rejects(startGatewayWithKey(config, small.reg.api_key as string),
    /routes\[0\]\.mcp\.public.*tools\/list cannot be public/);
});
