/**
 * Regression tests of the review findings, over real HTTP:
 * - trailing-slash / letter-case spellings that an upstream may read as a
 *   differently authorized route are refused (400 `ambiguous_path`) before
 *   any proof handling, verify or forwarding;
 * - paths longer than the sidecar's verify `context.path` limit (2048) are
 *   refused (400 `invalid_request`) without a verify call;
 * - hostile inputs (deep JSON bodies, odd header values and content types,
 *   malformed upstream answers) never produce a 500.
 */

import t from 'tap';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { MAX_PATH_LENGTH } from '../../src/path.js';
import { allowAll, gatewayConfig, metricSum, proofHeader, rawRequest, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(60_000);

const ROUTES = [
  { method: '*', path: '/app/*', public: true },
  { method: '*', path: '/app/admin', scope: 'admin:manage' },
  { method: 'GET', path: '/files', scope: 'data:read' },
  { method: 'GET', path: '/files/*', scope: 'data:read' },
  { method: 'GET', path: '/Reports/:id', scope: 'custom:reports' },
  { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
  // The fake sidecar keeps no idempotency ledger (idempotency*.test.ts test it).
  { method: 'POST', path: '/v1/payments', scope: 'payments:send', idempotency: 'off' },
  { method: 'GET', path: '/long/*', scope: 'data:read' },
  { method: 'GET', path: '/pub/*', public: true },
];

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
const gw = await startGateway(gatewayConfig(up.url, sidecar.url, {
  routes: ROUTES,
  trusted_proxies: ['127.0.0.1'],
  context: { tenant: { header: 'x-tenant-id' }, amount: '/amount', currency: '/currency' },
}));
const metricsUrl = gw.metricsUrl ?? '';
t.teardown(async () => {
  await gw.close();
  await up.close();
  await sidecar.close();
});
const proof = `X-Service-Proof: ${proofHeader()}`;

await t.test('trailing slash or letter case reaching a differently authorized route: 400 ambiguous_path, nothing forwarded', async (t) => {
  const verifies = sidecar.verifyCalls.length;
  const challenges = sidecar.challengeCalls.length;
  const before = up.received.length;
  const spellings = ['/app/admin/', '/app/Admin', '/APP/ADMIN', '/app/ADMIN/', '/app/%41dmin', '/app/admin/?x=1', '/v1/items/1/', '/v1/Items/1', '/reports/7', '/pub/'];
  for (const path of spellings) {
    for (const method of ['GET', 'POST', 'DELETE']) {
      for (const headers of [[], [proof]]) {
        const res = await rawRequest(gw.port, `${method} ${path} HTTP/1.1`, headers);
        if (method !== 'GET' && !path.startsWith('/app/')) continue; // other routes are GET-only: not mapped either way
        t.equal(res.status, 400, `${method} ${path} ${headers.length ? 'with' : 'without'} proof: status`);
        t.equal(res.json?.error?.code, 'ambiguous_path', `${method} ${path}: code`);
        t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/);
      }
    }
  }
  t.equal(sidecar.verifyCalls.length, verifies, 'verify never called');
  t.equal(sidecar.challengeCalls.length, challenges, 'no challenge fetched either (refused before proof handling)');
  t.equal(up.received.length, before, 'upstream received nothing');
});

await t.test('spellings that stay on the same authorization keep working', async (t) => {
  const cases: Array<[string, string[], number, string | undefined]> = [
    ['/app/admin', [], 401, undefined],
    ['/app/admin', [proof], 200, 'admin:manage'],
    ['/app/x/', [], 200, undefined],
    ['/app/X/Y', [], 200, undefined],
    ['/app/x/', [proof], 200, undefined],
    ['/files/', [proof], 200, 'data:read'],
    ['/files', [proof], 200, 'data:read'],
    ['/Reports/7', [proof], 200, 'custom:reports'],
    ['/v1/items/AbC', [proof], 200, 'data:read'],
  ];
  for (const [path, headers, status, scope] of cases) {
    const verifies = sidecar.verifyCalls.length;
    const before = up.received.length;
    const res = await rawRequest(gw.port, `GET ${path} HTTP/1.1`, headers);
    t.equal(res.status, status, `${path}: status`);
    if (status === 200) {
      t.equal(up.received[before]?.url, path, `${path}: forwarded as received`);
      t.equal(up.received[before]?.headers['x-service-decision'], scope === undefined ? 'public' : 'allow');
      if (scope !== undefined) t.equal(sidecar.verifyCalls.at(-1)?.body.required_scope, scope, `${path}: scope`);
      else t.equal(sidecar.verifyCalls.length, verifies, `${path}: public, no verify`);
    } else {
      t.equal(up.received.length, before, `${path}: nothing forwarded`);
    }
  }
  const unmapped = await send(gw.url, '/nothing/');
  t.equal(unmapped.status, 403, 'a path unmapped in every spelling stays 403');
  t.equal(unmapped.json.error.code, 'route_not_mapped');
});

await t.test('paths longer than the verify context.path limit: 400 invalid_request before verify', async (t) => {
  t.equal(MAX_PATH_LENGTH, 2048, 'equals the sidecar verify context.path limit');
  const longest = `/long/${'a'.repeat(MAX_PATH_LENGTH - 6)}`;
  t.equal(longest.length, MAX_PATH_LENGTH);
  const verifies = sidecar.verifyCalls.length;
  const before = up.received.length;
  const ok = await rawRequest(gw.port, `GET ${longest} HTTP/1.1`, [proof]);
  t.equal(ok.status, 200, 'exactly the limit passes');
  t.equal(sidecar.verifyCalls.at(-1)?.body.context.path, longest, 'verify saw the whole path');
  t.equal(up.received[before]?.url, longest);
  for (const path of [`${longest}b`, `/long/${'a'.repeat(7000)}`, `/long/${'"'.repeat(700)}`, `/pub/${'a'.repeat(MAX_PATH_LENGTH)}`]) {
    const res = await rawRequest(gw.port, `GET ${path} HTTP/1.1`, [proof]);
    t.equal(res.status, 400, `${path.length} raw chars: status`);
    t.equal(res.json?.error?.code, 'invalid_request', `${path.length} raw chars: code`);
    t.match(res.json?.error?.message, /longer than 2048/);
  }
  t.equal(sidecar.verifyCalls.length, verifies + 1, 'only the path within the limit was verified (and billed)');
  t.equal(up.received.length, before + 1, 'nothing else forwarded');
});

await t.test('hostile request inputs never produce a 500', async (t) => {
  const json = 'Content-Type: application/json';
  const cases: Array<[name: string, line: string, headers: string[], body: string, status: number, code?: string]> = [
    ['deeply nested JSON array body', 'POST /v1/payments HTTP/1.1', [proof, json], '['.repeat(30_000) + ']'.repeat(30_000), 400, 'invalid_request'],
    ['deeply nested JSON object body', 'POST /v1/payments HTTP/1.1', [proof, json], '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000), 400, 'invalid_request'],
    ['deep nesting under another content type is ignored', 'POST /v1/payments HTTP/1.1', [proof, 'Content-Type: text/plain'], '['.repeat(30_000) + ']'.repeat(30_000), 200],
    ['huge exponent', 'POST /v1/payments HTTP/1.1', [proof, json], '{"amount":1e999999999}', 400, 'invalid_request'],
    ['50k-digit amount', 'POST /v1/payments HTTP/1.1', [proof, json], `{"amount":${'9'.repeat(50_000)}}`, 400, 'invalid_request'],
    ['currency of the wrong type', 'POST /v1/payments HTTP/1.1', [proof, json], '{"currency":{"a":1}}', 400, 'invalid_request'],
    ['byte order mark', 'POST /v1/payments HTTP/1.1', [proof, json], '\ufeff{}', 400, 'invalid_request'],
    ['obs-text header value', 'GET /v1/items/1 HTTP/1.1', [proof, 'X-Foo: \xff\x80'], '', 200],
    ['obs-text Host', 'GET /v1/items/1 HTTP/1.1', [proof, 'Host: \xffevil'], '', 200],
    ['obs-text tenant header', 'GET /v1/items/1 HTTP/1.1', [proof, 'X-Tenant-Id: \xff'], '', 200],
    ['obs-text X-Forwarded-For', 'GET /v1/items/1 HTTP/1.1', [proof, 'X-Forwarded-For: \xff, 1.2.3.4'], '', 200],
    ['obs-text proof', 'GET /v1/items/1 HTTP/1.1', ['X-Service-Proof: \xff\xfe'], '', 403, 'proof_rejected'],
    ['3000 X-Forwarded-For hops', 'GET /v1/items/1 HTTP/1.1', [proof, `X-Forwarded-For: ${Array(3000).fill('1.2.3.4').join(',')}`], '', 200],
    ['obs-text content-type parameter', 'POST /v1/payments HTTP/1.1', [proof, 'Content-Type: application/json; charset=\xff'], '{"amount":1}', 200],
    ['empty content type', 'POST /v1/payments HTTP/1.1', [proof, 'Content-Type: '], '{"amount":1}', 415, 'unsupported_media_type'],
    ['unparseable content type', 'POST /v1/payments HTTP/1.1', [proof, 'Content-Type: \xff/\xff'], '{"amount":1}', 415, 'unsupported_media_type'],
    ['odd query string', 'GET /v1/items/1?%zz&__proto__[a]=1&constructor=1 HTTP/1.1', [proof], '', 200],
    ['Connection naming Host and Content-Length', 'GET /pub/x HTTP/1.1', ['Connection: host, content-length'], '', 200],
    ['Upgrade request', 'GET /pub/x HTTP/1.1', ['Connection: Upgrade', 'Upgrade: websocket'], '', 200],
    ['duplicate Content-Length', 'POST /pub/x HTTP/1.1', ['Content-Length: 3'], 'abc', 400, 'invalid_request'],
    ['OPTIONS *', 'OPTIONS * HTTP/1.1', [], '', 400, 'ambiguous_path'],
  ];
  for (const [name, line, headers, body, status, code] of cases) {
    const res = await rawRequest(gw.port, line, headers, body);
    t.equal(res.status, status, `${name}: status`);
    if (code !== undefined) t.equal(res.json?.error?.code, code, `${name}: code`);
  }
  t.equal(await metricSum(metricsUrl, 'agent_authz_gateway_requests_total', { outcome: '500' }), 0, 'no 500 counted');
  t.equal(await metricSum(metricsUrl, 'agent_authz_gateway_fail_open_total'), 0);
});

await t.test('malformed upstream answers are 502, never 500', async (t) => {
  let answer = '';
  const raw = net.createServer((s) => {
    s.on('error', () => undefined);
    s.once('data', () => s.end(answer));
  });
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
  const gw2 = await startGateway(gatewayConfig(`http://127.0.0.1:${(raw.address() as AddressInfo).port}`, sidecar.url, { routes: ROUTES }));
  t.teardown(async () => {
    await gw2.close();
    await new Promise<void>((resolve) => raw.close(() => resolve()));
  });
  const cases: Array<[string, string, number]> = [
    ['control character in a header value', 'HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nhi', 502],
    ['invalid header name', 'HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 2\r\n\r\nhi', 502],
    ['two Content-Lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi', 502],
    ['status 999', 'HTTP/1.1 999 Weird\r\nContent-Length: 2\r\n\r\nhi', 502],
    ['not HTTP', 'garbage\r\n\r\n', 502],
    ['closed without an answer', '', 502],
    ['obs-text header value', 'HTTP/1.1 200 OK\r\nX-A: \xff\r\nContent-Length: 2\r\n\r\nhi', 200],
    ['underscore hop-by-hop and X-Request-Id', 'HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\nX_Request_Id: up\r\nX-Request-Id: up\r\nContent-Length: 2\r\n\r\nhi', 200],
  ];
  for (const [name, text, status] of cases) {
    answer = text;
    const res = await rawRequest(gw2.port, 'GET /pub/x HTTP/1.1');
    t.equal(res.status, status, `${name}: status`);
    if (status === 502) t.equal(res.json?.error?.code, 'upstream_unavailable', `${name}: code`);
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, `${name}: the gateway request id`);
    t.equal(res.headers.transfer_encoding, undefined);
    t.equal(res.headers.x_request_id, undefined);
  }
  t.equal(await metricSum(gw2.metricsUrl ?? '', 'agent_authz_gateway_requests_total', { outcome: '500' }), 0, 'no 500 counted');
});
