/**
 * Closing the standalone gateway does not wait for connections that never
 * sent a byte (runtime/unused.ts). Node's HTTP server counts such a
 * connection as active, so `closeIdleConnections()` skipped it and `close()`
 * waited until the client closed it: about 70 s in
 * test/client/mcp-everything.test.ts, where undici, after the MCP SDK
 * aborted its GET stream, opened a connection for the aborted request and
 * never used it (nodejs/undici#5845). Real gateway, real upstream on
 * loopback, a raw TCP client and undici's `fetch`; every close is bounded.
 * A connection that received part of a request is still answered.
 */
import t from 'tap';
import type { Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Agent, fetch as undiciFetch } from 'undici';
import { gatewayConfig, startFakeSidecar, startGateway } from './helpers.js';
import type { StartedGateway } from './helpers.js';

t.setTimeout(60_000);

/** How long a close may take (it took about 70 s before). */
const CLOSE_MS = 2_000;

/** `promise`, or `'timeout'` when it has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), ms); })])
    .finally(() => clearTimeout(timer));
}

/** Waits (at most 2 s) until `gw` has accepted `n` connections in all. */
async function accepted(counter: { n: number }, n: number): Promise<boolean> {
  for (let i = 0; i < 40 && counter.n < n; i += 1) await new Promise((r) => setTimeout(r, 50));
  return counter.n >= n;
}

// The upstream: /events is an event stream that never ends, /slow answers after 300 ms.
const streams = new Set<http.ServerResponse>();
const upstream = http.createServer((req, res) => {
  if (req.url === '/events') {
    streams.add(res);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    res.write('data: first\n\n');
    return;
  }
  setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"slow":true}'), 300);
});
upstream.listen(0, '127.0.0.1');
await once(upstream, 'listening');
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
const sidecar = await startFakeSidecar();
t.teardown(async () => {
  for (const res of streams) res.destroy();
  upstream.closeAllConnections();
  upstream.close();
  await sidecar.close();
});

/** A started gateway with public routes to the upstream, and a count of the connections it accepted. */
async function gateway(t: Test): Promise<{ gw: StartedGateway; counter: { n: number } }> {
  const gw = await startGateway(gatewayConfig(upstreamUrl, sidecar.url, {
    routes: [{ method: 'GET', path: '/events', public: true }, { method: 'GET', path: '/slow', public: true }],
  }));
  const counter = { n: 0 };
  gw.server.app.server.on('connection', () => { counter.n += 1; });
  // Bounded: the sockets of each test are destroyed first, so a close that waited ends here.
  t.teardown(() => gw.close());
  return { gw, counter };
}

t.test('a connection that never sent a byte is closed with the gateway, not waited for', async (t) => {
  const { gw, counter } = await gateway(t);
  const socket = net.connect(gw.port, '127.0.0.1');
  t.teardown(() => { socket.destroy(); });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  t.ok(await accepted(counter, 1), 'the gateway accepted the connection');
  const closed = once(socket, 'close');
  const started = Date.now();
  t.not(await within(gw.close(), CLOSE_MS), 'timeout', `the close completes within ${CLOSE_MS} ms`);
  t.not(await within(closed, 1_000), 'timeout', 'the unused connection is closed');
  t.comment(`close took ${Date.now() - started} ms`);
});

t.test('a fetch whose event stream is aborted (undici) does not hold the close', async (t) => {
  const { gw, counter } = await gateway(t);
  const dispatcher = new Agent();
  t.teardown(() => dispatcher.destroy());
  const abort = new AbortController();
  const res = await undiciFetch(`${gw.url}/events`, { signal: abort.signal, dispatcher });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const reader = res.body?.getReader();
  const first = await reader?.read();
  t.match(new TextDecoder().decode(first?.value), /data: first/, 'the first event came through the gateway');
  // A second connection in the pool, idle after its answer (as the MCP client's POSTs leave one): with it, the
  // pool stays open after the abort, and so does the connection undici opens for the aborted request.
  const other = await undiciFetch(`${gw.url}/slow`, { dispatcher });
  t.same(await other.json(), { slow: true });
  abort.abort();
  await reader?.read().catch(() => undefined);
  // undici re-queues the aborted request and connects again for it (nodejs/undici#5845); wait for that connection.
  const reconnected = await accepted(counter, 3);
  t.comment(`undici opened ${reconnected ? 'an unused' : 'no'} connection after the abort`);
  const started = Date.now();
  t.not(await within(gw.close(), CLOSE_MS), 'timeout', `the close completes within ${CLOSE_MS} ms`);
  t.comment(`close took ${Date.now() - started} ms`);
});

t.test('a connection that received part of a request is answered, not cut, by the close', async (t) => {
  const { gw, counter } = await gateway(t);
  const socket = net.connect(gw.port, '127.0.0.1');
  t.teardown(() => { socket.destroy(); });
  let answer = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => { answer += chunk; });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write('GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  t.ok(await accepted(counter, 1), 'the gateway accepted the connection');
  await new Promise((r) => setTimeout(r, 100));
  const closing = gw.close();
  await new Promise((r) => setTimeout(r, 200));
  t.notOk(socket.destroyed || socket.readableEnded, 'the connection is still open during the close');
  socket.write('Connection: close\r\n\r\n');
  t.not(await within(once(socket, 'end'), CLOSE_MS), 'timeout', 'the answer ends');
  t.match(answer, /^HTTP\/1\.1 200 /, 'the request is answered');
  t.match(answer, /\{"slow":true\}/, 'with the upstream\'s body');
  t.not(await within(closing, CLOSE_MS), 'timeout', 'then the close completes');
});
