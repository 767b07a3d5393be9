/**
 * MCP routes against a fake sidecar that records every verify call: the
 * exact constraint context derived from a tool call's arguments (amount,
 * currency, tenant, path-like resource, the tool itself, body_sha256), the scope sent for
 * tools and for protocol messages, what the upstream receives, the JSON-RPC
 * message rules, and the path-named startup errors of the `mcp` config.
 */

import t from 'tap';
import { createHash } from 'node:crypto';
import { resolveGatewayOptions } from '../../gateway-plugin/options.js';
import type { GatewayOptions } from '../../gateway-plugin/options.js';
import { resolveConfig } from '../../gateway-plugin/standalone/config.js';
import { allowAll, gatewayConfig, proofHeader, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(30_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
const MCP = {
  method: ['POST', 'GET'], path: '/mcp', scope: 'execute:tool',
  mcp: {
    public: ['notifications/*'],
    tools: {
      transfer: { scope: 'payments:send', context: { amount: '/payment/amount', currency: '/payment/currency', tenant: '/account/tenant', resource: '/target' } },
      lookup: 'data:read',
      scoped_lookup: { scope: 'data:read', context: { tenant: '/tenant' } },
    },
  },
};
const gw = await startGateway(gatewayConfig(up.url, sidecar.url, { routes: [MCP], context: { tenant: { hosts: { 'acme.example.com': 'acme' } } } }));
t.teardown(async () => {
  await gw.close();
  await up.close();
  await sidecar.close();
});

const headers = (extra: Record<string, string> = {}): Record<string, string> => ({ 'content-type': 'application/json', 'x-service-proof': proofHeader(), ...extra });
const call = (id: unknown, name: string, args?: unknown): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, ...(args === undefined ? {} : { arguments: args }) } });
const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

t.test('a tool call: its scope, and the context from its arguments', async (t) => {
  const body = call(1, 'transfer', { payment: { amount: 12.5, currency: 'eur' }, account: { tenant: 'globex' }, target: '/accounts/77' });
  const res = await send(gw.url, '/mcp', { method: 'POST', headers: headers({ host: 'acme.example.com' }), body });
  t.equal(res.status, 200);
  const v = sidecar.verifyCalls.at(-1);
  t.equal(v?.body.required_scope, 'payments:send');
  t.same(v?.body.context, { method: 'POST', path: '/accounts/77', client_ip: '127.0.0.1', tenant: 'globex', amount: '12.5', currency: 'EUR', tool: 'transfer', body_sha256: sha(body) });
  const got = up.received.at(-1);
  t.equal(got?.body.toString('utf8'), body, 'the upstream gets the body byte for byte');
  t.equal(got?.headers['x-service-scope'], 'payments:send');
  t.equal(got?.headers['x-service-proof'], undefined, 'the proof is stripped');
});

t.test('pointers that resolve to nothing add nothing; a tool without pointers keeps the request facts', async (t) => {
  await send(gw.url, '/mcp', { method: 'POST', headers: headers({ host: 'acme.example.com' }), body: call('a', 'transfer', {}) });
  t.same(sidecar.verifyCalls.at(-1)?.body.context, { method: 'POST', client_ip: '127.0.0.1', tool: 'transfer', body_sha256: sha(call('a', 'transfer', {})) },
    'no path, tenant, amount or currency: constraints on them deny');
  await send(gw.url, '/mcp', { method: 'POST', headers: headers({ host: 'acme.example.com' }), body: call('b', 'lookup') });
  t.same(sidecar.verifyCalls.at(-1)?.body.context, { method: 'POST', path: '/mcp', client_ip: '127.0.0.1', tenant: 'acme', tool: 'lookup', body_sha256: sha(call('b', 'lookup')) });
  t.equal(sidecar.verifyCalls.at(-1)?.body.required_scope, 'data:read');
  await send(gw.url, '/mcp', { method: 'POST', headers: headers({ host: 'acme.example.com' }), body: call('c', 'scoped_lookup', {}) });
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.tenant, undefined, 'a tenant pointer replaces the host rule even when the argument is absent');
});

t.test('protocol messages need the route scope; notifications/* are public', async (t) => {
  const list = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' });
  const res = await send(gw.url, '/mcp', { method: 'POST', headers: headers(), body: list });
  t.equal(res.status, 200);
  t.equal(sidecar.verifyCalls.at(-1)?.body.required_scope, 'execute:tool');
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.path, '/mcp');
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.tool, undefined, 'only tools/call sends a tool');
  const calls = sidecar.verifyCalls.length;
  const note = await send(gw.url, '/mcp', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: {} }) });
  t.equal(note.status, 200, 'public without a proof');
  t.equal(up.received.at(-1)?.headers['x-service-decision'], 'public');
  const response = await send(gw.url, '/mcp', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 'srv-1', result: {} }) });
  t.equal(response.status, 401, 'a JSON-RPC response needs the route scope');
  // Issue 31: the id of a response names the server's request, so its refusal carries null (docs/mcp.md#refusals).
  t.equal(response.json?.id, null, 'the refusal of a response has id null');
  t.match(response.json?.error, { code: -32001, data: { code: 'proof_required' } });
  t.equal(sidecar.verifyCalls.length, calls, 'no verify without a proof');
  const get = await send(gw.url, '/mcp', { method: 'GET' });
  t.equal(get.status, 401, 'GET (the SSE stream) is a plain route with the route scope');
  t.equal(get.json?.error?.code, 'proof_required', 'and a plain error body');
  t.match(get.headers['www-authenticate'], /scope="execute:tool"/);
});

t.test('malformed messages are JSON-RPC refusals that reach neither verify nor the upstream', async (t) => {
  const calls = sidecar.verifyCalls.length;
  const received = up.received.length;
  const cases: Array<[string, number, string, number, unknown]> = [
    [JSON.stringify({ jsonrpc: '1.0', id: 4, method: 'ping' }), 400, 'invalid_request', -32600, 4],
    [JSON.stringify({ jsonrpc: '2.0', id: 1.5, method: 'ping' }), 400, 'invalid_request', -32600, null],
    [JSON.stringify({ jsonrpc: '2.0', id: 'x'.repeat(300), method: 'ping' }), 400, 'invalid_request', -32600, null],
    [JSON.stringify({ jsonrpc: '2.0', id: 6 }), 400, 'invalid_request', -32600, 6],
    [JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'lookup' } }), 400, 'invalid_request', -32600, null],
    [JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call' }), 400, 'invalid_request', -32600, 7],
    [JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'nope' } }), 403, 'tool_not_mapped', -32003, 8],
    [JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'Lookup' } }), 403, 'tool_not_mapped', -32003, 9],
    [call(10, 'transfer', { payment: { amount: -5 } }), 400, 'invalid_request', -32600, 10],
    [call(11, 'transfer', { target: 'relative/path' }), 400, 'invalid_request', -32600, 11],
    [call(12, 'transfer', { target: '/a/%2e%2e/b' }), 400, 'invalid_request', -32600, 12],
    [call(13, 'transfer', { account: { tenant: 'bad tenant!' } }), 400, 'invalid_request', -32600, 13],
    ['"just a string"', 400, 'invalid_request', -32600, null],
    ['', 400, 'invalid_request', -32700, null],
  ];
  for (const [body, status, code, rpc, id] of cases) {
    const res = await send(gw.url, '/mcp', { method: 'POST', headers: headers(), body });
    t.equal(res.status, status, `${body.slice(0, 60)}: status`);
    t.equal(res.json?.error?.data?.code, code, `${body.slice(0, 60)}: code`);
    t.equal(res.json?.error?.code, rpc, `${body.slice(0, 60)}: JSON-RPC code`);
    t.equal(res.json?.id, id, `${body.slice(0, 60)}: id`);
  }
  t.equal(sidecar.verifyCalls.length, calls, 'verify was never called');
  t.equal(up.received.length, received, 'the upstream received nothing');
});

t.test('the mcp config is validated at startup with path-named errors', async (t) => {
  const base = { upstream: 'http://127.0.0.1:1', sidecarUrl: 'http://127.0.0.1:2', apiKey: 'key-0123456789' };
  const route = (extra: Record<string, unknown>): Record<string, unknown> => ({ ...base, routes: [{ method: 'POST', path: '/mcp', scope: 'execute:tool', ...extra }] });
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [route({ mcp: { tools: {} } }), /^gateway options: routes\[0\]\.mcp\.tools: must map at least one tool name to a scope$/],
    [route({ mcp: { tools: { 'bad name': 'data:read' } } }), /^gateway options: routes\[0\]\.mcp\.tools\.bad name: is not an MCP tool name/],
    [route({ mcp: { tools: { t1: 'data:raed' } } }), /^gateway options: routes\[0\]\.mcp\.tools\.t1: "data:raed" is not in the scope vocabulary/],
    [route({ mcp: { tools: { t1: { scope: 'data:read', context: { amount: 'x' } } } } }), /^gateway options: routes\[0\]\.mcp\.tools\.t1\.context\.amount: must be a JSON pointer/],
    [route({ mcp: { tools: { t1: { scope: 'data:read', context: { path: '/p' } } } } }), /^gateway options: routes\[0\]\.mcp\.tools\.t1\.context\.path: unknown key/],
    [route({ mcp: { tools: { t1: { context: {} } } } }), /^gateway options: routes\[0\]\.mcp\.tools\.t1\.scope: is required$/],
    [route({ mcp: { tools: { t1: 'data:read' }, public: ['tools/call'] } }), /^gateway options: routes\[0\]\.mcp\.public\[0\]: tools\/call cannot be public/],
    [route({ mcp: { tools: { t1: 'data:read' }, public: ['ping', 'ping'] } }), /^gateway options: routes\[0\]\.mcp\.public\[1\]: duplicate method ping$/],
    // Issue 31: initialize opens a session bound to its agent; the limits of an MCP route are its own settings.
    [route({ mcp: { tools: { t1: 'data:read' }, public: ['initialize'] } }), /^gateway options: routes\[0\]\.mcp\.public\[0\]: initialize cannot be public: it opens a session/],
    [route({ mcp: { tools: { t1: 'data:read' }, body_limit_bytes: -1 } }), /^gateway options: routes\[0\]\.mcp\.body_limit_bytes: must be an integer from 0 to 1073741824$/],
    [route({ mcp: { tools: { t1: 'data:read' }, stream_idle_timeout_ms: 0 } }), /^gateway options: routes\[0\]\.mcp\.stream_idle_timeout_ms: must be an integer from 1 to 86400000$/],
    [route({ mcp: { tools: { t1: 'data:read' }, session_ttl_ms: 1.5 } }), /^gateway options: routes\[0\]\.mcp\.session_ttl_ms: must be an integer from 1000 to 2592000000$/],
    [route({ mcp: { tools: { t1: 'data:read' }, answer_overflow_bytes: 67_108_865 } }),
      /^gateway options: routes\[0\]\.mcp\.answer_overflow_bytes: must be an integer from 0 to 67108864$/],
    [route({ mcp: { tools: { t1: 'data:read' }, stream_idle_ms: 5 } }), /^gateway options: routes\[0\]\.mcp\.stream_idle_ms: unknown key/],
    [route({ mcp: { tools: { t1: 'data:read' }, extra: 1 } }), /^gateway options: routes\[0\]\.mcp\.extra: unknown key/],
    [route({ mcp: { tools: { t1: 'data:read' } }, context: { amount: '/a' } }), /^gateway options: routes\[0\]\.context: an MCP route takes its context from tool arguments/],
    [{ ...base, routes: [{ method: 'GET', path: '/mcp', scope: 'execute:tool', mcp: { tools: { t1: 'data:read' } } }] }, /^gateway options: routes\[0\]\.method: an MCP route must accept POST$/],
    [{ ...base, routes: [{ method: 'POST', path: '/mcp', public: true, mcp: { tools: { t1: 'data:read' } } }] }, /^gateway options: routes\[0\]: an MCP route must not be public/],
  ];
  for (const [options, message] of cases) t.throws(() => resolveGatewayOptions(options), { name: 'TypeError', message });
});

t.test('the MCP session secret: a gateway-only secret of at least 32 bytes (review finding 1)', async (t) => {
  const routes = [{ method: 'POST', path: '/mcp', scope: 'execute:tool', mcp: { tools: { t1: 'data:read' } } }];
  const base = { upstream: 'http://127.0.0.1:1', sidecarUrl: 'http://127.0.0.1:2', apiKey: 'key-0123456789-0123456789-0123456789', routes };
  const secret = 's'.repeat(32);
  t.same(resolveGatewayOptions({ ...base, mcpSessionSecret: secret }).mcpSessionSecret, Buffer.from(secret));
  t.equal(resolveGatewayOptions(base).mcpSessionSecret, undefined, 'optional');
  const bad: Array<[unknown, RegExp]> = [
    ['s'.repeat(31), /^gateway options: mcpSessionSecret: must be 32 to 4096 bytes/],
    [42, /^gateway options: mcpSessionSecret: must be a non-empty string/],
    [base.apiKey, /^gateway options: mcpSessionSecret: must not be the sidecar API key/],
  ];
  for (const [value, message] of bad) t.throws(() => resolveGatewayOptions({ ...base, mcpSessionSecret: value }), { name: 'TypeError', message });
  const file = { upstream_url: 'http://127.0.0.1:1', sidecar_url: 'http://127.0.0.1:2', api_key_env: 'K', routes, mcp_session_secret_env: 'S' };
  const env = { K: base.apiKey, S: secret };
  t.equal((resolveConfig(file, env).plugin as GatewayOptions).mcpSessionSecret, secret, 'config: read from the variable it names');
  const cfgBad: Array<[Record<string, unknown>, NodeJS.ProcessEnv, RegExp]> = [
    [file, { K: base.apiKey }, /^config: mcp_session_secret_env: environment variable S is not set$/],
    [file, { K: base.apiKey, S: 'short' }, /^config: mcp_session_secret_env \(S\): must be 32 to 4096 bytes/],
    [{ ...file, mcp_session_secret_env: 'bad name' }, env, /^config: mcp_session_secret_env: must be an environment variable NAME/],
    [{ ...file, mode: 'forward_auth', upstream_url: undefined }, env, /^config: mcp_session_secret_env: is not used with mode: forward_auth/],
  ];
  for (const [cfg, e, message] of cfgBad) t.throws(() => resolveConfig(cfg, e), { name: 'TypeError', message });
});
