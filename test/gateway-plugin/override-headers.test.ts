/**
 * Method and URL override headers (issue 20 §5) through the real gateway, in
 * front of a real upstream that HONOURS them the way common frameworks do
 * (Express method-override, Symfony/Laravel `X-HTTP-Method-Override`,
 * `X-HTTP-Method`, `X-Method-Override`; IIS URL Rewrite `X-Original-URL` /
 * `X-Rewrite-URL`; CGI-style servers also read `X_HTTP_Method_Override`):
 *
 * - `override_headers: refuse` (default): a GET allowed only for `data:read`
 *   carrying `X-HTTP-Method-Override: DELETE` (or any other override header,
 *   in any spelling) is 400 `override_header_refused`, counted, with
 *   `Cache-Control: no-store` and `X-Request-Id`, before verify, and the
 *   upstream never runs anything;
 * - `override_headers: strip`: the same request is verified as the GET it is
 *   and forwarded without the headers: the upstream runs the GET, not DELETE;
 * - every enforcement mode (plugin, NGINX, Caddy, Envoy and Traefik shapes)
 *   refuses them too.
 */

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { allowAll, gatewayConfig, metricSum, proofHeader, rawRequest, startFakeSidecar, startGateway } from './helpers.js';
import { MODES, startMode } from './modes.js';

t.setTimeout(120_000);

/** What the honouring upstream executed, per request. */
const executed: Array<{ method: string; url: string; headers: string[] }> = [];
const OVERRIDE_METHOD = ['x-http-method-override', 'x-http-method', 'x-method-override'];
const OVERRIDE_URL = ['x-original-url', 'x-rewrite-url'];
const upstream = http.createServer((req, res) => {
  // Header names read the CGI way (lower case, `_` as `-`), as many frameworks behind CGI/WSGI do.
  const headers = new Map<string, string>();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.set((req.rawHeaders[i] as string).toLowerCase().replace(/_/g, '-'), req.rawHeaders[i + 1] as string);
  const method = OVERRIDE_METHOD.map((n) => headers.get(n)).find((v) => v !== undefined)?.toUpperCase() ?? req.method ?? '';
  const url = OVERRIDE_URL.map((n) => headers.get(n)).find((v) => v !== undefined) ?? req.url ?? '';
  executed.push({ method, url, headers: [...headers.keys()] });
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ executed: `${method} ${url}` }));
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
const sidecar = await startFakeSidecar(allowAll);
t.teardown(async () => {
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
  await sidecar.close();
});

const ROUTES = [
  { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
  { method: 'DELETE', path: '/v1/items/:id', scope: 'data:delete' },
  { method: 'GET', path: '/admin', scope: 'custom:admin' },
  { method: 'GET', path: '/public/status', public: true },
];
/** The override headers, in the spellings a client may send. */
const ATTACKS: Array<[header: string, canonical: string, path: string, executes: string]> = [
  ['X-HTTP-Method-Override: DELETE', 'x-http-method-override', '/v1/items/1', 'DELETE /v1/items/1'],
  ['X-HTTP-Method: DELETE', 'x-http-method', '/v1/items/1', 'DELETE /v1/items/1'],
  ['X-Method-Override: DELETE', 'x-method-override', '/v1/items/1', 'DELETE /v1/items/1'],
  ['X-Original-URL: /admin', 'x-original-url', '/v1/items/1', 'GET /admin'],
  ['X-Rewrite-URL: /admin', 'x-rewrite-url', '/v1/items/1', 'GET /admin'],
  ['x-http-method-override: delete', 'x-http-method-override', '/v1/items/1', 'DELETE /v1/items/1'],
  ['X_HTTP_Method_Override: DELETE', 'x-http-method-override', '/v1/items/1', 'DELETE /v1/items/1'],
  ['X_Original_URL: /admin', 'x-original-url', '/public/status', 'GET /admin'],
  ['X-HTTP-Method-Override: DELETE', 'x-http-method-override', '/public/status', 'DELETE /public/status'],
];
const proof = `X-Service-Proof: ${proofHeader()}`;

t.test('the upstream really honours them (what the gateway protects against)', async (t) => {
  const direct = new URL(upstreamUrl);
  for (const [header, , path, executes] of ATTACKS) {
    const res = await rawRequest(Number(direct.port), `GET ${path} HTTP/1.1`, [header]);
    t.equal(res.json?.executed, executes, `${header} on ${path}`);
  }
  executed.length = 0;
});

t.test('refuse (default): 400 override_header_refused before verify; the upstream runs nothing', async (t) => {
  const gw = await startGateway(gatewayConfig(upstreamUrl, sidecar.url, { routes: ROUTES }));
  t.teardown(() => gw.close());
  const verifies = sidecar.verifyCalls.length;
  for (const [header, canonical, path] of ATTACKS) {
    const res = await rawRequest(gw.port, `GET ${path} HTTP/1.1`, [proof, header]);
    t.equal(res.status, 400, `${header}: status`);
    t.match(res.json?.error, { code: 'override_header_refused', header: canonical, status: 400 }, `${header}: code and header`);
    t.equal(res.headers['cache-control'], 'no-store');
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/);
  }
  t.same(executed, [], 'the upstream ran nothing');
  t.equal(sidecar.verifyCalls.length, verifies, 'verify was never called (nothing billed)');
  t.equal(await metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_requests_total', { outcome: '400', reason: 'override_header_refused' }), ATTACKS.length, 'each refusal counted');
  const plain = await rawRequest(gw.port, 'GET /v1/items/1 HTTP/1.1', [proof, 'X-HTTP-Method-Override-Not: x', 'X-Original-URI: /admin']);
  t.equal(plain.status, 200, 'look-alike names pass');
  t.equal(plain.json?.executed, 'GET /v1/items/1');
  executed.length = 0;
});

t.test('strip: verified as received, forwarded without the headers; the upstream runs what was authorized', async (t) => {
  const gw = await startGateway(gatewayConfig(upstreamUrl, sidecar.url, { routes: ROUTES, override_headers: 'strip' }));
  t.teardown(() => gw.close());
  for (const [header, , path] of ATTACKS) {
    const before = sidecar.verifyCalls.length;
    const res = await rawRequest(gw.port, `GET ${path} HTTP/1.1`, [proof, header]);
    t.equal(res.status, 200, `${header}: forwarded`);
    t.equal(res.json?.executed, `GET ${path}`, `${header}: the upstream ran the authorized GET ${path}`);
    const seen = executed.at(-1)?.headers ?? [];
    t.notOk([...OVERRIDE_METHOD, ...OVERRIDE_URL].some((n) => seen.includes(n)), `${header}: no override header reached the upstream`);
    if (path.startsWith('/v1/')) t.match(sidecar.verifyCalls.at(-1)?.body, { required_scope: 'data:read', context: { method: 'GET', path } }, 'verified as the GET it was');
    else t.equal(sidecar.verifyCalls.length, before, 'public: no verify');
  }
});

t.test('every enforcement mode refuses them', async (t) => {
  for (const mode of MODES.filter((m) => m !== 'proxy')) {
    const gw = await startMode(mode, upstreamUrl, sidecar.url, { routes: ROUTES });
    t.teardown(() => gw.close());
    const before = executed.length;
    for (const [header, canonical, path] of ATTACKS.slice(0, 5)) {
      const res = await rawRequest(gw.port, `GET ${path} HTTP/1.1`, [proof, header]);
      t.equal(res.status, 400, `${mode} ${header}: status`);
      t.equal(res.json?.error?.code, 'override_header_refused', `${mode} ${header}: code`);
      t.equal(res.json?.error?.header, canonical, `${mode} ${header}: names the header`);
    }
    t.equal(executed.length, before, `${mode}: the upstream ran nothing`);
    t.equal(await gw.failOpen(), 0);
  }
});
