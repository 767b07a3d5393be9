/**
 * Every refusal of the gateway carries `Cache-Control: no-store` and
 * `X-Request-Id`, is in the error shape, and is counted in
 * `agent_authz_gateway_requests_total` (issue 20 §5), over raw TCP against
 * the real standalone proxy, the plugin in an application's own Fastify
 * server (with the documented server-level answers installed), and the
 * standalone forward-auth endpoint:
 *
 * - methods no route maps: `TRACE` (a method the server knows, refused by the
 *   pipeline), `PROPFIND` (unknown to Fastify's router: the not-found
 *   answer) and `CONNECT` (which Node hands to no route);
 * - what Node's HTTP parser refuses (a NUL, a bare LF, folded headers,
 *   conflicting Content-Length, a bad chunk size, an unknown method): 400
 *   `invalid_request`; a header block or URL over the limit: 431
 *   `headers_too_large`; an unsupported `Expect`: 417 `expectation_failed`;
 * - an undecodable URL: 400 `ambiguous_path`.
 * None of them reaches the upstream or the sidecar.
 */

import t from 'tap';
import { rawRequest } from '../helpers/net.js';
import type { RawResponse } from '../helpers/net.js';
import { ERRORS, isErrorCode } from '../../src/errors.js';
import { allowAll, gatewayConfig, metricSum, startFakeSidecar, startGateway, startUpstream, sumSamples } from './helpers.js';
import { startMode } from './modes.js';

t.setTimeout(90_000);

const H = 'Host: 127.0.0.1\r\n';
const BIG = 40 * 1024; // over GATEWAY_MAX_HEADER_SIZE (32 KiB)
/** [what, raw request, status, code]. */
const CASES: Array<[string, string, number, string]> = [
  ['TRACE (not mapped)', `TRACE /v1/items/1 HTTP/1.1\r\n${H}Connection: close\r\n\r\n`, 403, 'route_not_mapped'],
  ['PROPFIND (unknown to the router)', `PROPFIND /v1/items/1 HTTP/1.1\r\n${H}Connection: close\r\n\r\n`, 403, 'route_not_mapped'],
  ['QUERY (not mapped)', `QUERY /v1/items/1 HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 403, 'route_not_mapped'],
  ['a NUL in a header value', `GET /v1/items/1 HTTP/1.1\r\n${H}X-A: a\u0000b\r\n\r\n`, 400, 'invalid_request'],
  ['a bare LF', `GET /v1/items/1 HTTP/1.1\r\n${H}X-A: a\nX-B: b\r\n\r\n`, 400, 'invalid_request'],
  ['folded headers', `GET /v1/items/1 HTTP/1.1\r\n${H}X-A: a\r\n  folded\r\n\r\n`, 400, 'invalid_request'],
  ['a duplicate Content-Length', `POST /v1/payments HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`, 400, 'invalid_request'],
  ['a negative Content-Length', `POST /v1/payments HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\n`, 400, 'invalid_request'],
  ['Content-Length with chunked encoding', `POST /v1/payments HTTP/1.1\r\n${H}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`, 400, 'invalid_request'],
  ['a bad chunk size', `POST /v1/payments HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400, 'invalid_request'],
  ['an unknown method', `FOOBAR /v1/items/1 HTTP/1.1\r\n${H}\r\n`, 400, 'invalid_request'],
  ['a header block over the limit', `GET /v1/items/1 HTTP/1.1\r\n${H}X-Big: ${'a'.repeat(BIG)}\r\n\r\n`, 431, 'headers_too_large'],
  ['a URL over the limit', `GET /v1/items/1?${'a'.repeat(BIG)} HTTP/1.1\r\n${H}\r\n`, 431, 'headers_too_large'],
  ['CONNECT (never proxied)', `CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n`, 403, 'route_not_mapped'],
  ['an unsupported Expect header', `GET /v1/items/1 HTTP/1.1\r\n${H}Expect: something-else\r\nConnection: close\r\n\r\n`, 417, 'expectation_failed'],
  ['an undecodable URL', `GET /v1/items/%zz HTTP/1.1\r\n${H}Connection: close\r\n\r\n`, 400, 'ambiguous_path'],
];

type Asserts = Pick<typeof t, 'equal' | 'ok' | 'match'>;

function expectRefusal(t: Asserts, r: RawResponse, status: number, code: string, what: string): void {
  t.equal(r.status, status, `${what}: status`);
  let body: { error?: { code?: unknown; status?: unknown; message?: unknown } } = {};
  try { body = JSON.parse(r.body) as typeof body; } catch { /* asserted below */ }
  t.equal(body.error?.code, code, `${what}: code (${r.body.slice(0, 120)})`);
  t.ok(typeof body.error?.code === 'string' && isErrorCode(body.error.code) && ERRORS[body.error.code].status === status, `${what}: a code of the table`);
  t.equal(typeof body.error?.message, 'string', `${what}: message`);
  t.equal(r.headers['cache-control'], 'no-store', `${what}: Cache-Control: no-store`);
  t.match(r.headers['x-request-id'], /^[A-Za-z0-9._:-]{1,128}$/, `${what}: X-Request-Id`);
}

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});

/**
 * Runs every case against a server on `port`; `count(outcome, reason)` reads its metric. `prefix`
 * (forward-auth: the Envoy endpoint) is put before each path; there a method unknown to the
 * router is 404 `route_not_found`.
 */
async function runCases(t: Asserts, port: number, count: (outcome: string, reason: string) => Promise<number>, prefix = ''): Promise<void> {
  for (const [what, raw, status0, code0] of CASES) {
    const bytes = raw.replace(/^([A-Z]+) \//, `$1 ${prefix}/`);
    const [want, code] = prefix !== '' && what.startsWith('PROPFIND') ? [404, 'route_not_found'] : [status0, code0];
    const before = await count(String(want), code);
    expectRefusal(t, await rawRequest(port, bytes), want, code, what);
    const after = await count(String(want), code);
    t.equal(after, before + 1, `${what}: counted once as ${want} ${code} (${after - before})`);
  }
  t.equal(up.received.length, 0, 'nothing reached the upstream');
  t.equal(sidecar.verifyCalls.length, 0, 'nothing reached verify');
}

t.test('the standalone proxy', async (t) => {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url));
  t.teardown(() => gw.close());
  await runCases(t, gw.port, (outcome, reason) => metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_requests_total', { outcome, reason }));
});

t.test('the plugin in an application\'s server (gatewayFrameworkErrors, gatewayClientErrors, gatewayNotFound)', async (t) => {
  const m = await startMode('plugin', up.url, sidecar.url);
  t.teardown(() => m.close());
  await runCases(t, m.port, async (outcome, reason) => sumSamples(await m.exposition(), 'agent_authz_gateway_requests_total', { outcome, reason }));
});

t.test('the standalone forward-auth endpoint (Envoy check requests)', async (t) => {
  const { upstream_url: _unused, ...rest } = gatewayConfig(up.url, sidecar.url);
  const gw = await startGateway({ ...rest, mode: 'forward_auth' });
  t.teardown(() => gw.close());
  await runCases(t, gw.port, (outcome, reason) => metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_requests_total', { outcome, reason }), '/forward-auth/envoy');
});
