/**
 * Security review findings 2 and 3 on MCP session ids (issue 31's binding):
 * a route table that would let some request to an MCP path skip its MCP
 * route is refused at startup, naming both routes; `Mcp-Session-Id` in any
 * spelling never crosses a non-MCP route, either way; and an MCP route
 * refuses a duplicate or underscore-spelled session header (400
 * `mcp_session_header_invalid`) instead of letting a CGI/WSGI upstream read
 * it as `HTTP_MCP_SESSION_ID`. A stub upstream records the raw headers.
 */

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolveGatewayOptions } from '../../gateway-plugin/options.js';
import { allowAll, gatewayConfig, proofHeader, send, startFakeSidecar, startGateway } from './helpers.js';

t.setTimeout(60_000);

const received: string[][] = [];
const stub = http.createServer((req, res) => {
  req.resume();
  received.push(req.rawHeaders);
  res.writeHead(200, {
    'content-type': 'application/json', 'mcp-session-id': 'up-1', 'Mcp_Session_Id': 'up-2', 'x-service-session-key': 'k',
  });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} }));
});
await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
const sidecar = await startFakeSidecar(allowAll);
const MCP = { method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool', mcp: { public: ['ping'], tools: { t1: 'data:read' } } };
const OTHER = { method: ['GET', 'POST'], path: '/other', scope: 'data:read' };
const gw = await startGateway(gatewayConfig(`http://127.0.0.1:${(stub.address() as AddressInfo).port}`, sidecar.url, { routes: [MCP, OTHER] }));
t.teardown(async () => {
  await gw.close();
  await sidecar.close();
  stub.closeAllConnections();
  stub.close();
});

const sessionNames = (raw: string[] | undefined): string[] =>
  (raw ?? []).filter((_, i) => i % 2 === 0).filter((n) => n.toLowerCase().replace(/_/g, '-') === 'mcp-session-id');

t.test('a non-MCP route whose path overlaps an MCP route is refused at startup, naming both', async (t) => {
  const base = { upstream: 'http://127.0.0.1:1', sidecarUrl: 'http://127.0.0.1:2', apiKey: 'key-0123456789' };
  const post = { ...MCP, method: 'POST' };
  const cases: Array<[unknown[], RegExp]> = [
    [[post, { method: ['GET', 'DELETE'], path: '/mcp', scope: 'execute:tool' }],
      /^gateway options: routes\[1\]: its path \/mcp overlaps MCP route routes\[0\] \(\/mcp\)/],
    [[post, { method: 'GET', path: '/MCP', public: true }], /^gateway options: routes\[1\]: its path \/MCP overlaps MCP route routes\[0\]/],
    [[{ method: 'GET', path: '/:any', scope: 'data:read' }, post], /^gateway options: routes\[0\]: its path \/:any overlaps MCP route routes\[1\]/],
    [[post, { method: 'GET', path: '/*', public: true }], /^gateway options: routes\[1\]: its path \/\* overlaps MCP route routes\[0\]/],
    [[{ ...post, path: '/v1/*' }, { method: 'GET', path: '/v1/mcp/x', scope: 'data:read' }], /^gateway options: routes\[1\]: its path \/v1\/mcp\/x overlaps/],
  ];
  for (const [routes, message] of cases) t.throws(() => resolveGatewayOptions({ ...base, routes }), { name: 'TypeError', message });
  const apart = [
    { method: 'GET', path: '/mcp/x', scope: 'data:read' }, { method: 'GET', path: '/', public: true }, { method: 'GET', path: '/:a/b', public: true },
  ];
  for (const other of apart) {
    t.doesNotThrow(() => resolveGatewayOptions({ ...base, routes: [post, other] }), `${other.path} does not overlap /mcp`);
  }
});

t.test('a non-MCP route passes no session id either way, in any spelling', async (t) => {
  const headers = { 'x-service-proof': proofHeader(), 'mcp-session-id': 'client-1', 'mcp_session_id': 'client-2' };
  const res = await send(gw.url, '/other', { headers });
  t.equal(res.status, 200);
  t.same(sessionNames(received.at(-1)), [], 'the upstream got no session id');
  t.equal(res.headers['mcp-session-id'], undefined, 'the client got no session id');
  t.equal(res.headers['mcp_session_id'], undefined, 'nor its underscore spelling');
  t.equal(res.headers['x-service-session-key'], undefined, 'nor a session key');
});

t.test('an MCP route refuses two session headers, or an underscore spelling, before anything is forwarded', async (t) => {
  const before = received.length;
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });
  const json = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const cases: Array<[string, Record<string, string | string[]>]> = [
    ['an underscore spelling', { mcp_session_id: 's1.x' }],
    ['two session headers', { 'mcp-session-id': ['s1.a', 's1.b'] }],
    ['both spellings', { 'mcp-session-id': 's1.a', 'Mcp_Session_Id': 's1.b' }],
  ];
  for (const [what, extra] of cases) {
    const post = await send(gw.url, '/mcp', { method: 'POST', headers: { ...json, ...extra }, body: ping });
    t.equal(post.status, 400, `POST, ${what}: 400`);
    t.match(post.json, { jsonrpc: '2.0', id: 7, error: { code: -32600, data: { code: 'mcp_session_header_invalid' } } }, `POST, ${what}: JSON-RPC shape`);
    const get = await send(gw.url, '/mcp', { headers: { accept: 'text/event-stream', 'x-service-proof': proofHeader(), ...extra } });
    t.equal(get.status, 400, `GET, ${what}: 400`);
    t.equal(get.json?.error?.code, 'mcp_session_header_invalid', `GET, ${what}: the code`);
  }
  t.equal(received.length, before, 'none reached the upstream');
  const ok = await send(gw.url, '/mcp', { method: 'POST', headers: json, body: ping });
  t.equal(ok.status, 200, 'without a session header the public ping passes');
  t.same(sessionNames(received.at(-1)), [], 'and reaches the upstream without one');
});
