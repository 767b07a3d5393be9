/**
 * MCP sessions bound to the agent that opened them (issue 31, finding 1):
 * the MCP reference server (`@modelcontextprotocol/server-everything`)
 * behind TWO replicas of the real standalone gateway (same API key and MCP
 * session secret, no shared state) and the real sidecar, driven with raw JSON-RPC over HTTP so
 * every answer is seen as sent.
 *
 * - Agent A's `initialize` gets a session token (not the server's id) and a
 *   session key; the server never sees the token, only its own id.
 * - Agent B, with the route's scope and a valid proof, is refused on A's
 *   session for a request, an answer (with a proof, or with a session proof
 *   it cannot compute), the GET stream and DELETE: 403
 *   `mcp_session_forbidden`, and none of them reaches the server, on either
 *   replica.
 * - On a session, public methods (`notifications/cancelled`, `ping`) are the
 *   session's agent's too: without the session proof or a proof of A they
 *   are refused (401 / 403 `mcp_session_forbidden`), so B cannot cancel A's calls.
 * - A forged or altered token is 404 `mcp_session_not_found` before any
 *   proof is read.
 * - After A's DELETE, the token is refused by the replica that ended it (404,
 *   without reaching the server) and by the server through the other one;
 *   after the upstream's 404 for a session, the gateway refuses it itself.
 */

import t from 'tap';
import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { challenge } from '../sidecar/decide/helpers.js';
import { delegateAgent, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, startGatewayWithKey } from './helpers.js';
import { startEverything } from './mcp-everything.js';

t.setTimeout(120_000);

const sc = await startSidecar();
const server = await startEverything();
t.teardown(async () => {
  await server.close();
  await sc.close();
});
const a = await specFlow(sc, 'mcp-sessions@example.com', { scopes: ['execute:tool', 'data:read'], approve: ['execute:tool', 'data:read'] });
const b = await delegateAgent(a, 'agent-b', { approve: ['execute:tool', 'data:read'] });
const config = gatewayConfig(server.url, sc.url, {
  routes: [{
    method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool',
    mcp: { public: ['ping', 'notifications/*'], tools: { echo: 'data:read' } },
  }],
  verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000, mcp_session_secret_env: 'MCP_SESSION_SECRET',
});
const env = { MCP_SESSION_SECRET: randomBytes(32).toString('base64') };
const gw1 = await startGatewayWithKey(config, a.reg.api_key as string, env);
const gw2 = await startGatewayWithKey(config, a.reg.api_key as string, env);
t.teardown(async () => {
  await gw1.close();
  await gw2.close();
});

async function proofOf(f: Flow): Promise<string> {
  const r = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: await challenge(f.platform) });
  if (r.status !== 200) throw new Error(`present: ${r.status} ${r.text}`);
  return r.body.proof_header as string;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The JSON-RPC message of a JSON or SSE answer (the last `data:` line of an event stream). */
function messageOf(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    const data = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).filter((d) => d.trim() !== '');
    return data.length === 0 ? undefined : JSON.parse(data.at(-1) as string);
  }
}

async function call(gw: string, method: 'POST' | 'GET' | 'DELETE', o: {
  message?: unknown; session?: string; proof?: Flow; sessionProof?: string;
} = {}): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream' };
  const body = o.message === undefined ? undefined : JSON.stringify(o.message);
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (o.session !== undefined) headers['mcp-session-id'] = o.session;
  if (o.proof !== undefined) headers['x-service-proof'] = await proofOf(o.proof);
  if (o.sessionProof !== undefined) headers['x-service-session-proof'] = o.sessionProof;
  const res = await request(`${gw}/mcp`, { method, headers, body, headersTimeout: 10_000, bodyTimeout: 10_000 });
  // A GET stream stays open: read its headers only.
  const text = method === 'GET' && res.statusCode === 200 ? (res.body.destroy(), '') : await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: messageOf(text) };
}

const initialize = {
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: { elicitation: {} }, clientInfo: { name: 'sessions-test', version: '1' } },
};
const sessionProof = (key: string, body: unknown): string =>
  createHmac('sha256', Buffer.from(key, 'base64url')).update(JSON.stringify(body)).digest('base64url');
const accept = { jsonrpc: '2.0', id: 0, result: { action: 'accept' } };

t.test('a session is bound to the agent that opened it, on every replica', async (t) => {
  const init = await call(gw1.url, 'POST', { message: initialize, proof: a });
  t.equal(init.status, 200);
  t.match(init.json, { id: 1, result: { serverInfo: { name: 'mcp-servers/everything' } } });
  const token = init.headers['mcp-session-id'] as string;
  const key = init.headers['x-service-session-key'] as string;
  const upstreamId = server.sessions().at(-1) as string;
  t.match(token, /^s1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[0-9a-z]+\.[A-Za-z0-9_-]{43}$/, 'the client gets the gateway\'s session token');
  t.not(token, upstreamId, 'not the server\'s id');
  t.match(key, /^[A-Za-z0-9_-]{43}$/, 'and a session key');
  t.equal(init.headers['cache-control'], 'no-store', 'the answer with the session key is not cached');
  t.equal(server.received.at(-1)?.session, undefined, 'initialize reached the server without a session');
  const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
  const ok = await call(gw1.url, 'POST', { message: initialized, session: token, sessionProof: sessionProof(key, initialized) });
  t.equal(ok.status, 202, 'a public notification on the session, with the session proof');
  t.equal(server.received.at(-1)?.session, upstreamId, 'the server saw its own id');

  for (const gw of [gw1, gw2]) {
    const list = await call(gw.url, 'POST', { message: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session: token, proof: a });
    t.equal(list.status, 200, `A lists tools on its session (${gw === gw1 ? 'replica 1' : 'replica 2'})`);
    t.ok(Array.isArray(list.json?.result?.tools) && list.json.result.tools.length > 5);
    t.equal(list.headers['mcp-session-id'], token, 'the answer names the token, not the server\'s id');

    const before = server.received.length;
    const refusals: Array<[string, Answer]> = [
      ['request', await call(gw.url, 'POST', { message: { jsonrpc: '2.0', id: 3, method: 'tools/list' }, session: token, proof: b })],
      ['answer with a proof', await call(gw.url, 'POST', { message: accept, session: token, proof: b })],
      ['answer with a session proof B cannot compute', await call(gw.url, 'POST', {
        message: accept, session: token, sessionProof: sessionProof('A'.repeat(43), accept),
      })],
      ['GET stream', await call(gw.url, 'GET', { session: token, proof: b })],
      ['DELETE', await call(gw.url, 'DELETE', { session: token, proof: b })],
    ];
    for (const [what, res] of refusals) {
      t.equal(res.status, 403, `B's ${what}: 403`);
      const error = what.startsWith('answer') || what === 'request' ? res.json?.error?.data : res.json?.error;
      t.equal(error?.code, 'mcp_session_forbidden', `B's ${what}: mcp_session_forbidden`);
    }
    t.equal(refusals[0]?.[1].json?.id, 3, 'the refused request keeps its id');
    t.equal(refusals[1]?.[1].json?.id, null, 'a refused answer has id null');
    t.equal(server.received.length, before, 'none of B\'s requests reached the server');
  }
});

t.test('public methods on a session need the session proof or a proof of its agent (review finding 4)', async (t) => {
  const init = await call(gw1.url, 'POST', { message: initialize, proof: a });
  const token = init.headers['mcp-session-id'] as string;
  const key = init.headers['x-service-session-key'] as string;
  const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'x' } };
  const ping = { jsonrpc: '2.0', id: 9, method: 'ping' };
  const before = server.received.length;
  const bare = await call(gw1.url, 'POST', { message: cancel, session: token });
  t.equal(bare.status, 401, 'the token alone: 401');
  t.equal(bare.json?.error?.data?.code, 'proof_required');
  const wrong = await call(gw1.url, 'POST', { message: cancel, session: token, sessionProof: sessionProof('A'.repeat(43), cancel) });
  t.equal(wrong.status, 403, 'a session proof under another key: 403');
  t.equal(wrong.json?.error?.data?.code, 'mcp_session_forbidden');
  const asB = await call(gw1.url, 'POST', { message: ping, session: token, proof: b });
  t.equal(asB.status, 403, 'B\'s proof: 403');
  t.equal(asB.json?.error?.data?.code, 'mcp_session_forbidden');
  t.equal(server.received.length, before, 'none reached the server');
  const proved = await call(gw1.url, 'POST', { message: cancel, session: token, sessionProof: sessionProof(key, cancel) });
  t.equal(proved.status, 202, 'A\'s session proof: forwarded');
  const proofA = await call(gw2.url, 'POST', { message: ping, session: token, proof: a });
  t.equal(proofA.status, 200, 'A\'s proof: forwarded (on the other replica)');
  t.match(proofA.json, { id: 9, result: {} });
  const reached = server.received.length;
  await call(gw1.url, 'POST', { message: ping });
  t.equal(server.received.length, reached + 1, 'without a session a public method stays public (the server refuses it itself)');
});

t.test('forged and altered tokens are not sessions', async (t) => {
  const init = await call(gw1.url, 'POST', { message: initialize, proof: a });
  const token = init.headers['mcp-session-id'] as string;
  const parts = token.split('.');
  const asB = [parts[0], Buffer.from(b.agentId).toString('base64url'), ...parts.slice(2)].join('.');
  const upstreamId = server.sessions().at(-1) as string;
  // As the first version derived the MAC key: from the API key, which every agent of the connection holds.
  const oldKey = Buffer.from(hkdfSync('sha256', a.reg.api_key as string, 'agent-authz mcp session', 'route /mcp', 32));
  const body = [parts[0], Buffer.from(b.agentId).toString('base64url'), Buffer.from(upstreamId).toString('base64url'), parts[3]].join('.');
  const minted = `${body}.${createHmac('sha256', oldKey).update(body).digest('base64url')}`;
  const before = server.received.length;
  for (const [what, session] of [
    ['the server\'s own id', upstreamId], ['the token moved to agent B', asB], ['garbage', 'x'], ['a token minted with the API key', minted],
  ] as const) {
    const res = await call(gw1.url, 'POST', { message: { jsonrpc: '2.0', id: 4, method: 'tools/list' }, session, proof: b });
    t.equal(res.status, 404, `${what}: 404`);
    t.match(res.json, { id: 4, error: { data: { code: 'mcp_session_not_found' } } }, `${what}: mcp_session_not_found`);
    const get = await call(gw1.url, 'GET', { session });
    t.equal(get.status, 404, `${what}: GET 404 before any proof is asked for`);
    t.equal(get.json?.error?.code, 'mcp_session_not_found');
  }
  t.equal(server.received.length, before, 'none reached the server');
});

t.test('an ended session cannot be used again by anyone', async (t) => {
  const init = await call(gw1.url, 'POST', { message: initialize, proof: a });
  const token = init.headers['mcp-session-id'] as string;
  const del = await call(gw1.url, 'DELETE', { session: token, proof: a });
  t.equal(del.status, 200, 'A ends its session');
  const before = server.received.length;
  for (const who of [a, b]) {
    const res = await call(gw1.url, 'POST', { message: { jsonrpc: '2.0', id: 5, method: 'tools/list' }, session: token, proof: who });
    t.equal(res.status, 404, `${who === a ? 'A' : 'B'}: 404 on the replica that ended it`);
    t.equal(res.json?.error?.data?.code, 'mcp_session_not_found');
  }
  t.equal(server.received.length, before, 'the ended session did not reach the server');
  const other = await call(gw2.url, 'POST', { message: { jsonrpc: '2.0', id: 6, method: 'tools/list' }, session: token, proof: a });
  t.equal(other.status, 400, 'the other replica forwards it and the server refuses its ended session');
  t.equal(other.json?.result, undefined);
  const reopened = await call(gw1.url, 'POST', { message: initialize, proof: a });
  t.not(reopened.headers['mcp-session-id'], token, 'a new initialize gets a new session');
});

t.test('the upstream\'s 404 for a session ends it at the gateway too', async (t) => {
  // A stub MCP server that forgets every session at once (as after its own idle expiry).
  const seen: string[] = [];
  const stub = http.createServer((req, res) => {
    req.resume();
    seen.push(`${req.method} ${req.headers['mcp-session-id'] ?? '-'}`);
    if (req.headers['mcp-session-id'] === undefined) res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'stub-1' });
    else res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} }));
  });
  await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
  t.teardown(() => { stub.closeAllConnections(); stub.close(); });
  const stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
  const gw = await startGatewayWithKey({ ...config, upstream_url: stubUrl }, a.reg.api_key as string, env);
  t.teardown(() => gw.close());
  const token = (await call(gw.url, 'POST', { message: initialize, proof: a })).headers['mcp-session-id'] as string;
  t.match(token, /^s1\./);
  const first = await call(gw.url, 'POST', { message: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session: token, proof: a });
  t.equal(first.status, 404, 'the upstream no longer knows the session');
  const again = await call(gw.url, 'POST', { message: { jsonrpc: '2.0', id: 3, method: 'tools/list' }, session: token, proof: a });
  t.equal(again.status, 404);
  t.equal(again.json?.error?.data?.code, 'mcp_session_not_found', 'the gateway refuses it itself now');
  t.same(seen, ['POST -', 'POST stub-1'], 'the second request did not reach the upstream');
});

t.test('replicas without a configured session secret do not share sessions (each draws its own)', async (t) => {
  const { mcp_session_secret_env: _, ...plain } = config;
  const one = await startGatewayWithKey(plain, a.reg.api_key as string);
  const two = await startGatewayWithKey(plain, a.reg.api_key as string);
  t.teardown(async () => { await one.close(); await two.close(); });
  const token = (await call(one.url, 'POST', { message: initialize, proof: a })).headers['mcp-session-id'] as string;
  const here = await call(one.url, 'POST', { message: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session: token, proof: a });
  t.equal(here.status, 200, 'the replica that opened it knows it');
  const there = await call(two.url, 'POST', { message: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session: token, proof: a });
  t.equal(there.status, 404, 'the other does not');
  t.equal(there.json?.error?.data?.code, 'mcp_session_not_found');
});
