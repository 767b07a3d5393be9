/**
 * The forward-auth endpoint called directly with each proxy's documented
 * check-request shape (NGINX auth_request, Traefik ForwardAuth, Caddy
 * forward_auth, Envoy ext_authz HTTP service), against a fake sidecar that
 * records verify calls:
 *
 * - the original method/URI/host come from the proxy's headers (or Envoy's
 *   path_prefix), the context is derived as in the proxy (client_ip through
 *   a trusted proxy's X-Forwarded-For, tenant from X-Forwarded-Host);
 * - 200 with the decision headers only on allow; refusals have the same
 *   status and body as the proxy mode (compared request by request), and
 *   NGINX's are 401/403 with the real status and body in X-Authz-*;
 * - the body: never from NGINX, from Traefik/Caddy when sent, from Envoy when
 *   `x-envoy-auth-partial-body: false`; routes that need it are 403
 *   `body_not_forwarded` without it; MCP routes decide on the forwarded body;
 * - the standalone `mode: forward_auth` config and its path-named errors;
 * - the gRPC ext_authz form is not served: an HTTP/2 gRPC Check fails, the
 *   same call over HTTP/1.1 is 404, neither reaches verify.
 */

import t from 'tap';
import { createHash } from 'node:crypto';
import http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { resolveConfig } from '../../gateway-plugin/standalone/config.js';
import { caddySite, nginxSite } from './proxies.js';
import { TEST_API_KEY, TEST_API_KEY_ENV, allowAll, denyAll, gatewayConfig, proofHeader, rawRequest, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(30_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
const MCP = { method: 'POST', path: '/mcp', scope: 'execute:tool', mcp: { tools: { pay: { scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } } } } };
const routes = [...(gatewayConfig(up.url, sidecar.url).routes as unknown[]), MCP];
const base = gatewayConfig(up.url, sidecar.url, { routes });
const { upstream_url: _u, ...rest } = base;
const fa = await startGateway({ ...rest, mode: 'forward_auth', trusted_proxies: ['127.0.0.1'], context: { tenant: { suffix: '.tenants.example' } } });
const proxy = await startGateway({ ...base, trusted_proxies: ['127.0.0.1'], context: { tenant: { suffix: '.tenants.example' } } });
t.teardown(async () => {
  await fa.close();
  await proxy.close();
  await up.close();
  await sidecar.close();
});

const proof = { 'x-service-proof': proofHeader() };
const nginx = (method: string, uri: string, extra: Record<string, string> = {}): Record<string, string> => ({ 'x-original-method': method, 'x-original-uri': uri, ...extra });
const fwd = (method: string, uri: string, extra: Record<string, string> = {}): Record<string, string> => ({ 'x-forwarded-method': method, 'x-forwarded-uri': uri, 'x-forwarded-proto': 'https', ...extra });
const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

t.test('allow: 200 with the decision headers, the context of the original request', async (t) => {
  const received = up.received.length;
  for (const [flavor, headers] of [['nginx', nginx('GET', '/v1/items/7?x=1')], ['traefik', fwd('GET', '/v1/items/7?x=1')], ['caddy', fwd('GET', '/v1/items/7?x=1')]] as const) {
    const res = await send(fa.url, `/forward-auth/${flavor}`, { headers: { ...headers, ...proof, 'x-forwarded-host': 'acme.tenants.example', 'x-forwarded-for': '203.0.113.9' } });
    t.equal(res.status, 200, flavor);
    t.equal(res.headers['x-service-decision'], 'allow');
    t.equal(res.headers['x-service-scope'], 'data:read');
    t.equal(res.headers['x-service-agent-id'], 'agent-1');
    t.equal(res.headers['x-request-id'], sidecar.verifyCalls.at(-1)?.headers['x-request-id']);
    t.same(sidecar.verifyCalls.at(-1)?.body.context, { method: 'GET', path: '/v1/items/7', client_ip: '203.0.113.9', tenant: 'acme', query_sha256: sha('x=1') },
      `${flavor}: no body, so no body_sha256; the original query by its hash`);
  }
  const envoy = await send(fa.url, '/forward-auth/envoy/v1/items/7?x=1', { headers: { ...proof, host: 'globex.tenants.example' } });
  t.equal(envoy.status, 200);
  t.same(sidecar.verifyCalls.at(-1)?.body.context, { method: 'GET', path: '/v1/items/7', client_ip: '127.0.0.1', tenant: 'globex', query_sha256: sha('x=1') });
  const pub = await send(fa.url, '/forward-auth/caddy', { headers: fwd('GET', '/public/status') });
  t.equal(pub.status, 200);
  t.equal(pub.headers['x-service-decision'], 'public');
  t.equal(pub.headers['x-service-scope'], undefined);
  t.equal(up.received.length, received, 'the endpoint never forwards anything itself');
});

t.test('refusals have the same status and body as the proxy', async (t) => {
  const cases: Array<[string, string, Record<string, string>, (() => void) | undefined]> = [
    ['missing proof', '/v1/items/7', {}, undefined],
    ['unmapped route', '/nope', proof, undefined],
    ['ambiguous path', '/v1/items/%2e%2e/x', proof, undefined],
    ['case spelling', '/V1/items/7', proof, undefined],
    ['malformed proof', '/v1/items/7', { 'x-service-proof': 'not base64!' }, undefined],
    ['deny', '/v1/items/7', proof, () => { sidecar.behaviour = denyAll; }],
    ['verify down', '/v1/items/7', proof, () => { sidecar.behaviour = (_c, res) => { res.writeHead(500); res.end(); }; }],
  ];
  for (const [name, uri, headers, setup] of cases) {
    sidecar.behaviour = allowAll;
    setup?.();
    const direct = await rawRequest(proxy.port, `GET ${uri} HTTP/1.1`, Object.entries(headers).map(([k, v]) => `${k}: ${v}`));
    setup?.();
    const viaCaddy = await send(fa.url, '/forward-auth/caddy', { headers: { ...fwd('GET', uri), ...headers } });
    const strip = (text: string): string => text.replace(/chal-\d+-abcdef/g, 'CHALLENGE');
    t.equal(viaCaddy.status, direct.status, `${name}: same status (${direct.status})`);
    t.equal(strip(viaCaddy.text), strip(direct.text), `${name}: same body`);
    t.not(direct.status, 200, `${name}: a refusal`);
    setup?.();
    const viaNginx = await send(fa.url, '/forward-auth/nginx', { headers: { ...nginx('GET', uri), ...headers } });
    t.equal(viaNginx.status, direct.status === 401 ? 401 : 403, `${name}: NGINX gets 401 or 403`);
    t.equal(viaNginx.headers['x-authz-status'], String(direct.status), `${name}: the real status in X-Authz-Status`);
    t.equal(strip(String(viaNginx.headers['x-authz-body'])), strip(direct.text), `${name}: the real body in X-Authz-Body`);
  }
  sidecar.behaviour = allowAll;
});

t.test('the body: never from NGINX, when sent from Traefik/Caddy, when complete from Envoy', async (t) => {
  const body = '{"amount":12.5,"currency":"usd"}';
  const json = { 'content-type': 'application/json' };
  const noBody = await send(fa.url, '/forward-auth/nginx', { method: 'POST', headers: { ...nginx('POST', '/v1/payments'), ...proof, ...json }, body });
  t.equal(noBody.status, 403);
  t.equal(noBody.headers['x-authz-status'], '403');
  t.match(String(noBody.headers['x-authz-body']), /"code":"body_not_forwarded"/, 'NGINX never forwards a body, even if one arrives');
  const traefik = await send(fa.url, '/forward-auth/traefik', { method: 'POST', headers: { ...fwd('POST', '/v1/payments'), ...proof, ...json }, body });
  t.equal(traefik.status, 200, 'Traefik forwardBody: the body is used');
  t.same(sidecar.verifyCalls.at(-1)?.body.context, { method: 'POST', path: '/v1/payments', client_ip: '127.0.0.1', amount: '12.5', currency: 'USD', body_sha256: sha(body) });
  const caddy = await send(fa.url, '/forward-auth/caddy', { headers: { ...fwd('POST', '/v1/payments'), ...proof, ...json } });
  t.equal(caddy.status, 403);
  t.equal(caddy.json?.error?.code, 'body_not_forwarded', 'no body on the check request: not forwarded');
  const envoy = await send(fa.url, '/forward-auth/envoy/v1/payments', { method: 'POST', headers: { ...proof, ...json, 'x-envoy-auth-partial-body': 'false' }, body });
  t.equal(envoy.status, 200);
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.amount, '12.5');
  const partial = await send(fa.url, '/forward-auth/envoy/v1/payments', { method: 'POST', headers: { ...proof, ...json, 'x-envoy-auth-partial-body': 'true' }, body });
  t.equal(partial.json?.error?.code, 'body_not_forwarded', 'a truncated body is not the body');
  const unset = await send(fa.url, '/forward-auth/envoy/v1/items/7', { method: 'PUT', headers: { ...proof, ...json }, body });
  t.equal(unset.status, 200, 'a route that needs no body passes without it');
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.body_sha256, undefined, 'and body_sha256 is sent only when the body is known');
});

t.test('MCP routes decide on the forwarded body', async (t) => {
  const call = (amount: number): string => JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'pay', arguments: { amount, currency: 'EUR' } } });
  const headers = { ...proof, 'content-type': 'application/json', 'x-envoy-auth-partial-body': 'false' };
  const ok = await send(fa.url, '/forward-auth/envoy/mcp', { method: 'POST', headers, body: call(3) });
  t.equal(ok.status, 200);
  t.equal(ok.headers['x-service-scope'], 'payments:send');
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.amount, '3');
  const viaNginx = await send(fa.url, '/forward-auth/nginx', { method: 'POST', headers: { ...nginx('POST', '/mcp'), ...headers }, body: call(3) });
  t.equal(viaNginx.status, 403);
  const refusal = JSON.parse(String(viaNginx.headers['x-authz-body'])) as { id: unknown; error: { code: number; data: { code: string } } };
  t.same([refusal.id, refusal.error.code, refusal.error.data.code], [null, -32003, 'body_not_forwarded'], 'a JSON-RPC refusal: the message was never seen');
  const unmapped = await send(fa.url, '/forward-auth/envoy/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 'x', method: 'tools/call', params: { name: 'drop_db' } }) });
  t.equal(unmapped.status, 403);
  t.same([unmapped.json?.id, unmapped.json?.error?.data?.code, unmapped.json?.error?.data?.tool], ['x', 'tool_not_mapped', 'drop_db']);
});

t.test('a misconfigured proxy is refused', async (t) => {
  const missing = await send(fa.url, '/forward-auth/traefik', { headers: { ...proof, 'x-forwarded-method': 'GET' } });
  t.equal(missing.status, 400);
  t.match(missing.json?.error?.message, /lacks the x-forwarded-uri header/);
  const twice = await send(fa.url, '/forward-auth/nginx', { headers: { ...proof, 'x-original-method': 'GET', 'x-original-uri': ['/public/status', '/admin'] } });
  t.equal(twice.headers['x-authz-status'], '400', 'a duplicated original-URI header is refused');
  const method = await send(fa.url, '/forward-auth/caddy', { headers: { ...proof, ...fwd('get', '/v1/items/7') } });
  t.equal(method.json?.error?.code, 'invalid_request');
  const unknown = await send(fa.url, '/forward-auth/haproxy', { headers: proof });
  t.equal(unknown.status, 404);
  t.equal(unknown.json?.error?.code, 'route_not_found');
  const health = await send(fa.url, '/readyz');
  t.equal(health.status, 200);
});

t.test('the standalone forward_auth config', async (t) => {
  const env = { [TEST_API_KEY_ENV]: TEST_API_KEY };
  const cfg = resolveConfig({ ...rest, mode: 'forward_auth', forward_auth: { path_prefix: '/_authz' } }, env);
  t.equal(cfg.mode, 'forward_auth');
  t.equal((cfg.plugin as { prefix?: string }).prefix, '/_authz');
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ ...base, mode: 'forward_auth' }, /^config: upstream_url: is not used with mode: forward_auth/],
    [{ ...rest, mode: 'forward_auth', upstream_timeout_ms: 5 }, /^config: upstream_timeout_ms: is not used with mode: forward_auth/],
    [{ ...base, forward_auth: {} }, /^config: forward_auth: is only used with mode: forward_auth$/],
    [{ ...rest, mode: 'forward-auth' }, /^config: mode: must be proxy or forward_auth$/],
    [{ ...rest }, /^config: upstream_url: is required$/],
    [{ ...rest, mode: 'forward_auth', forward_auth: { path_prefix: 'x' } }, /^config: forward_auth\.path_prefix: must be a plain absolute path/],
    [{ ...rest, mode: 'forward_auth', forward_auth: { prefix: '/x' } }, /^config: forward_auth\.prefix: unknown key/],
  ];
  for (const [raw, message] of cases) t.throws(() => resolveConfig(raw, env), { name: 'TypeError', message });
  await t.rejects(startGateway({ ...rest, mode: 'forward_auth', forward_auth: { path_prefix: '/health' }, health: { liveness_path: '/health/live' } }),
    { name: 'TypeError', message: /^config: health\.liveness_path: \/health\/live collides with forward_auth\.path_prefix$/ });
  const keyed = [{ method: 'POST', path: '/pay', scope: 'payments:send', idempotency: 'required' }];
  await t.rejects(startGateway({ ...rest, mode: 'forward_auth', routes: keyed }),
    { name: 'TypeError', message: /routes\[0\]\.idempotency: the forward-auth endpoint does not see the upstream's answer/ },
    'an explicit idempotency setting is refused: the endpoint cannot record answers');
  const fa = await startGateway({ ...rest, mode: 'forward_auth', routes: [{ ...keyed[0], idempotency: undefined }] });
  t.pass('the same route without the setting starts (forward-auth never uses the ledger)');
  await fa.close();
});

t.test('docs/forward-auth.md shows the configs the tests run', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '../../docs/forward-auth.md'), 'utf8');
  t.ok(doc.includes(`\`\`\`nginx\n${nginxSite(8443, '127.0.0.1:8090', '127.0.0.1:8080')}\`\`\``), 'the NGINX config, verbatim');
  t.ok(doc.includes(`\`\`\`caddy\n${caddySite(8443, '127.0.0.1:8090', '127.0.0.1:8080')}\`\`\``), 'the Caddy site block, verbatim');
  const standalone = /```yaml\n(mode: forward_auth[\s\S]*?)```/.exec(doc)?.[1] ?? '';
  const cfg = resolveConfig(parseYaml(standalone), { GATEWAY_API_KEY: TEST_API_KEY });
  t.equal(cfg.mode, 'forward_auth', 'the standalone example is a valid config');
});

t.test('the gRPC ext_authz form is not served (docs/forward-auth.md, "No gRPC ext_authz"): a gRPC Check never allows', async (t) => {
  const calls = sidecar.verifyCalls.length;
  const received = up.received.length;
  const CHECK = '/envoy.service.auth.v3.Authorization/Check';
  // Envoy's grpc_service speaks HTTP/2 (h2c) to the cluster: the endpoint is HTTP/1.1 only, so the call fails.
  const h2 = await new Promise<string>((resolve) => {
    const session = http2.connect(fa.url);
    const timer = setTimeout(() => { session.destroy(); resolve('timeout'); }, 5000);
    const done = (outcome: string): void => { clearTimeout(timer); session.destroy(); resolve(outcome); };
    session.on('error', (err: Error) => done(`error ${err.message}`));
    const req = session.request({ ':method': 'POST', ':path': CHECK, 'content-type': 'application/grpc', te: 'trailers', 'x-service-proof': proofHeader() });
    req.on('error', (err: Error) => done(`error ${err.message}`));
    req.on('response', (headers) => done(`status ${String(headers[':status'])} grpc-status ${String(headers['grpc-status'])}`));
    req.end(Buffer.alloc(5));
  });
  t.match(h2, /^(error |timeout$)/, `an HTTP/2 gRPC Check gets no answer (${h2}): Envoy then refuses with status_on_error`);
  // The same call as HTTP/1.1, inside and outside the prefix: not an endpoint, never a 2xx.
  for (const path of [CHECK, `/forward-auth${CHECK}`]) {
    const res = await send(fa.url, path, { method: 'POST', headers: { 'content-type': 'application/grpc', ...proof }, body: Buffer.alloc(5) });
    t.equal(res.status, 404, `POST ${path}: 404`);
    t.equal(res.json?.error?.code, 'route_not_found', `POST ${path}: route_not_found`);
  }
  t.equal(sidecar.verifyCalls.length, calls, 'verify was never called');
  t.equal(up.received.length, received, 'the upstream received nothing');
});
