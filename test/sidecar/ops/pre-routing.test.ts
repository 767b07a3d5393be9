/**
 * Refusals before any route runs answer in the spec's error shape, on a real
 * sidecar over raw TCP (issue 20 §1): the exact requests of the report — a
 * malformed percent escape in a path, an over-long path parameter, what Node's
 * HTTP parser rejects (a NUL in a header value, a bare LF, folded headers, a
 * duplicate or negative Content-Length, Content-Length with chunked encoding,
 * a bad chunk size, an unknown method), a header block or URL over 16 KiB,
 * an Expect header other than 100-continue (Node's bare 417), and CONNECT
 * (which Node would close without an answer).
 * Each answer is `{error:{code,message,status}}` with a code from the table,
 * `Content-Type: application/json`, `Cache-Control: no-store` and an
 * `X-Request-Id`; and the sidecar keeps serving afterwards.
 */
import t from 'tap';
import { startSidecar } from '../../helpers/sidecar.js';
import { rawRequest } from '../../helpers/net.js';
import type { RawResponse } from '../../helpers/net.js';
import { ERRORS, isErrorCode } from '../../../src/errors.js';

type Asserts = Pick<typeof t, 'equal' | 'ok' | 'match' | 'same'>;

/** The answer is the error shape with `code` and `status`, and the refusal headers. */
function expectShape(t: Asserts, r: RawResponse, status: number, code: string, what: string): void {
  t.equal(r.status, status, `${what}: status ${status}`);
  let body: { error?: { code?: unknown; message?: unknown; status?: unknown } } = {};
  try { body = JSON.parse(r.body) as typeof body; } catch { /* asserted below */ }
  t.equal(body.error?.code, code, `${what}: code ${code} (${r.body.slice(0, 200)})`);
  t.ok(typeof body.error?.code === 'string' && isErrorCode(body.error.code) && ERRORS[body.error.code].status === status, `${what}: a code of the table with its status`);
  t.equal(body.error?.status, status, `${what}: error.status`);
  t.equal(typeof body.error?.message, 'string', `${what}: error.message`);
  t.match(r.headers['content-type'], /^application\/json/, `${what}: JSON`);
  t.equal(r.headers['cache-control'], 'no-store', `${what}: Cache-Control: no-store`);
  t.match(r.headers['x-request-id'], /^[A-Za-z0-9._:-]{1,128}$/, `${what}: X-Request-Id`);
}

t.test('refusals before routing are in the error shape', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const port = Number(new URL(sc.url).port);
  const H = 'Host: 127.0.0.1\r\n';

  for (const path of [
    '/v1/service/delegations/%E0%A4%A/revoke',
    '/v1/service/delegations/requests/%E0%A4%A/approve',
    '/v1/service/connections/%E0%A4%A/agents',
    '/v1/service/connections/%E0%A4%A/agents/x/present',
  ]) {
    const r = await rawRequest(port, `POST ${path} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
    expectShape(t, r, 400, 'invalid_request', `malformed escape ${path}`);
    t.match(r.body, /percent escape/, 'the message says why');
  }
  const long = `/v1/service/delegations/${'a'.repeat(201)}/revoke`;
  expectShape(t, await rawRequest(port, `POST ${long} HTTP/1.1\r\n${H}Content-Length: 0\r\nConnection: close\r\n\r\n`), 400, 'invalid_request', 'a 201-character path parameter');

  const parserCases: [string, string][] = [
    ['a NUL in a header value', `GET /healthz HTTP/1.1\r\n${H}X-A: a\u0000b\r\n\r\n`],
    ['a bare LF', `GET /healthz HTTP/1.1\r\n${H}X-A: a\nX-B: b\r\n\r\n`],
    ['folded headers', `GET /healthz HTTP/1.1\r\n${H}X-A: a\r\n  folded\r\n\r\n`],
    ['a duplicate Content-Length', `POST /v1/service/verify HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`],
    ['a negative Content-Length', `POST /v1/service/verify HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: -1\r\n\r\n`],
    ['Content-Length with chunked encoding', `POST /v1/service/verify HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`],
    ['a bad chunk size', `POST /v1/service/verify HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`],
    ['an unknown method', `FOOBAR /healthz HTTP/1.1\r\n${H}\r\n`],
  ];
  for (const [what, bytes] of parserCases) expectShape(t, await rawRequest(port, bytes), 400, 'invalid_request', what);

  expectShape(t, await rawRequest(port, `GET /healthz HTTP/1.1\r\n${H}X-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`), 431, 'headers_too_large', 'a header block over 16 KiB');
  expectShape(t, await rawRequest(port, `GET /healthz?${'a'.repeat(17 * 1024)} HTTP/1.1\r\n${H}\r\n`), 431, 'headers_too_large', 'a URL over 16 KiB');

  expectShape(t, await rawRequest(port, `GET /healthz HTTP/1.1\r\n${H}Expect: something-else\r\n\r\n`), 417, 'expectation_failed', 'an unsupported Expect header');

  expectShape(t, await rawRequest(port, `CONNECT 127.0.0.1:443 HTTP/1.1\r\n${H}\r\n`), 405, 'method_not_allowed', 'CONNECT');

  const ok = await fetch(`${sc.url}/healthz`);
  t.equal(ok.status, 200, 'still serving');
});
