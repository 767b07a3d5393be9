/**
 * Header handling over real HTTP: the proof header (missing → 401 with a
 * challenge, duplicate → 403, malformed or structurally invalid → 403 before
 * verify — no verify call, never a 500 —, base64url), the decision headers
 * (client copies, also in underscore spelling, never reach the upstream as
 * sent), the request id (to the upstream and back on proxied responses),
 * hop-by-hop stripping, public and unmapped routes.
 */

import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_PROOF_HEADER_LENGTH } from '../../gateway-plugin/proof.js';
import { TEST_API_KEY, allowAll, fakeBundle, gatewayConfig, proofHeader, rawRequest, reply, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(30_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
const gw = await startGateway(gatewayConfig(up.url, sidecar.url));
t.teardown(async () => {
  await gw.close();
  await up.close();
  await sidecar.close();
});

await t.test('missing proof: 401 with WWW-Authenticate and a fresh challenge; upstream never called', async (t) => {
  const verifies = sidecar.verifyCalls.length;
  const res = await send(gw.url, '/v1/items/9', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
  t.equal(res.status, 401);
  t.equal(res.json.error.code, 'proof_required');
  t.equal(res.json.error.required_scope, 'data:write');
  const challenge = res.json.error.challenge as string;
  t.match(challenge, /^chal-\d+-abcdef$/);
  t.equal(res.headers['www-authenticate'], `ServiceProof realm="agent-authz", scope="data:write", challenge="${challenge}"`);
  t.equal(sidecar.challengeCalls.at(-1)?.['x-service-api-key'], TEST_API_KEY, 'challenge fetched with the gateway API key');
  t.equal(sidecar.challengeCalls.at(-1)?.['x-request-id'], res.headers['x-request-id'], 'request id propagated');
  const again = await send(gw.url, '/v1/items/9', { headers: { 'x-service-proof': '   ' } });
  t.equal(again.status, 401, 'a blank header counts as missing');
  t.not(again.json.error.challenge, challenge, 'each 401 carries a fresh challenge');
  t.equal(sidecar.verifyCalls.length, verifies, 'verify not called');
  t.equal(up.received.length, 0, 'upstream not called');
});

await t.test('a challenge unsafe for a quoted-string is left out', async (t) => {
  sidecar.challengeValue = 'bad"challenge';
  t.teardown(() => { sidecar.challengeValue = undefined; });
  const res = await send(gw.url, '/admin');
  t.equal(res.status, 401);
  t.equal(res.json.error.challenge, undefined);
  t.equal(res.headers['www-authenticate'], 'ServiceProof realm="agent-authz", scope="custom:admin"');
});

await t.test('two proof headers or a comma-joined value: 403 duplicate_proof_header (spec 4.15: invalid proof is 403)', async (t) => {
  const verifies = sidecar.verifyCalls.length;
  const p = proofHeader();
  const two = await rawRequest(gw.port, 'GET /v1/items/1 HTTP/1.1', [`X-Service-Proof: ${p}`, `x-service-proof: ${p}`]);
  t.equal(two.status, 403);
  t.equal(two.json.error.code, 'duplicate_proof_header');
  t.equal(two.json.error.status, 403, 'body status matches');
  const joined = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': `${p}, ${p}` } });
  t.equal(joined.status, 403);
  t.equal(joined.json.error.code, 'duplicate_proof_header');
  const oneEmpty = await rawRequest(gw.port, 'GET /v1/items/1 HTTP/1.1', [`X-Service-Proof: ${p}`, 'X-Service-Proof: ']);
  t.equal(oneEmpty.status, 403, 'a second, empty header is still a duplicate');
  t.equal(oneEmpty.json.error.code, 'duplicate_proof_header');
  t.equal(sidecar.verifyCalls.length, verifies, 'verify not called');
  t.equal(up.received.length, 0);
});

await t.test('malformed proofs are refused with 403 proof_rejected before verify', async (t) => {
  const verifies = sidecar.verifyCalls.length;
  const cases: Record<string, string> = {
    'not base64': 'not*base64!',
    'base64 of non-JSON': Buffer.from('hello').toString('base64'),
    'base64 of a JSON array': Buffer.from('[1,2]').toString('base64'),
    'base64 of JSON null': Buffer.from('null').toString('base64'),
    'base64 of a JSON string': Buffer.from('"x"').toString('base64'),
    'invalid UTF-8': Buffer.from([0x7b, 0xff, 0x7d]).toString('base64'),
    'bad length': 'eyJ2IjoxfQ=a',
    'mixed alphabets': 'ab+_cd==',
    oversized: proofHeader({ pad: 'x'.repeat(MAX_PROOF_HEADER_LENGTH) }),
    'object that is not a bundle': proofHeader({ v: 1 }),
    'bundle with an extra member': proofHeader(fakeBundle({ extra: true })),
    'bundle without sig': proofHeader(fakeBundle({ sig: undefined })),
    'bundle with a short signature': proofHeader(fakeBundle({ sig: { ed25519: 'AAAA', ml_dsa_65: 'AAAA' } })),
    'bundle with a bad challenge': proofHeader(fakeBundle({ challenge: 'short' })),
    'bundle with a nested sig': proofHeader(fakeBundle({ sig: JSON.parse('['.repeat(2000) + ']'.repeat(2000)) })),
  };
  for (const [name, value] of Object.entries(cases)) {
    const res = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': value } });
    t.equal(res.status, 403, `${name}: status`);
    t.equal(res.json?.error?.code, 'proof_rejected', `${name}: code`);
    t.equal(res.json?.error?.reason, 'invalid_proof', `${name}: reason`);
  }
  t.equal(sidecar.verifyCalls.length, verifies, 'verify never called');
  t.equal(up.received.length, 0, 'upstream never called');
});

await t.test('a 16 KiB proof nesting 6000 levels: 403 invalid_proof, never 500, no verify call', async (t) => {
  const verifies = sidecar.verifyCalls.length;
  for (const json of [`{"a":${'['.repeat(6000)}${']'.repeat(6000)}}`, `{"sig":${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}}`]) {
    const value = Buffer.from(json).toString('base64');
    t.ok(value.length <= MAX_PROOF_HEADER_LENGTH, `header is ${value.length} chars`);
    const res = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': value } });
    t.equal(res.status, 403);
    t.equal(res.json?.error?.code, 'proof_rejected');
    t.equal(res.json?.error?.reason, 'invalid_proof');
  }
  t.equal(sidecar.verifyCalls.length, verifies, 'the fake sidecar counted no verify call');
  t.equal(up.received.length, 0, 'upstream never called');
});

await t.test('base64url and unpadded bundles decode to the same object, sent to verify as decoded', async (t) => {
  const bundle = fakeBundle();
  for (const value of [proofHeader(bundle, 'base64url'), proofHeader(bundle).replace(/=+$/, '')]) {
    const res = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': value } });
    t.equal(res.status, 200);
    t.same(sidecar.verifyCalls.at(-1)?.body.proof_bundle, bundle);
  }
  // Member order is the client's (the decoded object itself is sent, not a rebuilt one).
  const reordered = Object.fromEntries(Object.entries(bundle).reverse());
  t.equal((await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': proofHeader(reordered) } })).status, 200);
  t.same(Object.keys(sidecar.verifyCalls.at(-1)?.body.proof_bundle ?? {}), Object.keys(reordered));
});

await t.test('a proof header just under the 16 KiB cap passes Node and reaches verify', async (t) => {
  const bundle = fakeBundle();
  // A valid bundle is ~6.4 KiB of base64; JSON whitespace pads it to just under the cap.
  const compact = JSON.stringify(bundle);
  const json = compact.replace(',', `,${' '.repeat(12_200 - compact.length)}`);
  const value = Buffer.from(json).toString('base64');
  t.ok(value.length > 16_000 && value.length <= MAX_PROOF_HEADER_LENGTH, `header is ${value.length} chars`);
  const res = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': value } });
  t.equal(res.status, 200);
  t.same(sidecar.verifyCalls.at(-1)?.body.proof_bundle, bundle);
});

await t.test('decision headers sent by the client never reach the upstream as sent', async (t) => {
  sidecar.behaviour = (call, res) => reply(res, 200, { decision: 'allow', decision_reason: 'authorized', scope: call.body.required_scope });
  t.teardown(() => { sidecar.behaviour = allowAll; });
  const before = up.received.length;
  const res = await send(gw.url, '/v1/items/1', {
    headers: {
      'x-service-proof': proofHeader(),
      'x-service-decision': 'allow',
      'x-service-agent-id': 'evil-agent',
      'x-service-cert-id': 'cert-evil',
      'x-service-scope': 'custom:admin',
      'x-service-api-key': 'leak-me',
      'x-service-whatever': '1',
      'x-request-id': 'client-chosen',
      'x-forwarded-for': '198.51.100.1',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'https',
      forwarded: 'for=198.51.100.1',
      'x-real-ip': '198.51.100.1',
    },
  });
  t.equal(res.status, 200);
  const h = up.received[before]?.headers ?? {};
  t.equal(h['x-service-decision'], 'allow');
  t.equal(h['x-service-scope'], 'data:read', 'scope is the required scope, not the client copy');
  t.equal(h['x-service-agent-id'], undefined, 'no agent id when verify returned none');
  t.equal(h['x-service-cert-id'], undefined);
  for (const name of ['x-service-proof', 'x-service-api-key', 'x-service-whatever', 'forwarded', 'x-real-ip']) t.equal(h[name], undefined, `${name} stripped`);
  t.equal(h['x-forwarded-for'], '127.0.0.1', 'X-Forwarded-For is the derived client IP');
  t.equal(h['x-forwarded-proto'], 'http');
  t.not(h['x-forwarded-host'], 'evil.example');
  t.equal(h['x-request-id'], sidecar.verifyCalls.at(-1)?.headers['x-request-id'], 'the gateway request id');
  t.not(h['x-request-id'], 'client-chosen');
});

await t.test('underscore spellings of gateway-controlled headers never reach the upstream', async (t) => {
  sidecar.behaviour = (call, res) => reply(res, 200, { decision: 'allow', decision_reason: 'authorized', scope: call.body.required_scope });
  t.teardown(() => { sidecar.behaviour = allowAll; });
  const spoofed = [
    'X_Service_Agent_Id: evil-agent', 'X_Service_Decision: allow', 'X_Service_Scope: custom:admin', 'X_Service_Cert_Id: cert-evil', 'x-service_proof: junk',
    'X_Forwarded_For: 198.51.100.1', 'X_Forwarded_Host: evil.example', 'X_Forwarded_Proto: https', 'X_Forwarded_Prefix: /evil', 'X_Real_IP: 198.51.100.1',
    'X_Request_Id: client-chosen', 'Keep_Alive: timeout=99', 'Proxy_Authorization: Basic eA==', 'X_Custom: kept', 'X-Other_Name: kept',
  ];
  for (const [line, path, headers] of [
    ['allow', 'GET /v1/items/1 HTTP/1.1', [`X-Service-Proof: ${proofHeader()}`, ...spoofed]],
    ['public', 'GET /public/status HTTP/1.1', spoofed],
  ] as const) {
    const before = up.received.length;
    const res = await rawRequest(gw.port, path, [...headers]);
    t.equal(res.status, 200, `${line}: forwarded`);
    const got = up.received[before];
    const names = (got?.rawHeaders ?? []).filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    t.same(names.filter((n) => n.includes('_')).sort(), ['x-other_name', 'x_custom'], `${line}: only unrelated underscore headers pass`);
    t.equal(got?.headers['x-service-decision'], line);
    t.equal(got?.headers['x-service-agent-id'], undefined, `${line}: no agent id`);
    t.equal(got?.headers['x-service-scope'], line === 'allow' ? 'data:read' : undefined, `${line}: scope only from the gateway`);
    t.equal(got?.headers['x-forwarded-for'], '127.0.0.1');
    t.not(got?.headers['x-request-id'], 'client-chosen');
  }
});

await t.test('proxied responses carry the gateway X-Request-Id, replacing the upstream value', async (t) => {
  const echo = http.createServer((_req, res) => {
    res.setHeader('X-Request-Id', 'upstream-chosen');
    res.setHeader('X_Request_Id', 'upstream-underscore');
    res.setHeader('content-type', 'text/plain');
    res.end('hi');
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  const gw2 = await startGateway(gatewayConfig(`http://127.0.0.1:${(echo.address() as AddressInfo).port}`, sidecar.url));
  t.teardown(async () => {
    await gw2.close();
    await new Promise<void>((resolve) => echo.close(() => resolve()));
  });
  const allowed = await send(gw2.url, '/v1/items/1', { headers: { 'x-service-proof': proofHeader(), 'x-request-id': 'client-chosen' } });
  t.equal(allowed.status, 200);
  t.equal(allowed.text, 'hi');
  t.match(allowed.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'a gateway request id');
  t.equal(allowed.headers['x-request-id'], sidecar.verifyCalls.at(-1)?.headers['x-request-id'], 'the id verify saw');
  t.equal(allowed.headers.x_request_id, undefined, 'the underscore spelling from the upstream is dropped');
  const pub = await send(gw2.url, '/public/status');
  t.equal(pub.status, 200);
  t.match(pub.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'public routes too');
  t.not(pub.headers['x-request-id'], allowed.headers['x-request-id'], 'one id per request');
  const proxied = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': proofHeader() } });
  t.equal(proxied.headers['x-request-id'], up.received.at(-1)?.headers['x-request-id'], 'the upstream and the client see the same id');
});

await t.test('hop-by-hop headers are stripped both ways', async (t) => {
  const before = up.received.length;
  const res = await rawRequest(gw.port, 'GET /v1/items/1 HTTP/1.1', [
    `X-Service-Proof: ${proofHeader()}`, 'Connection: close, X-Secret-Hop', 'X-Secret-Hop: 1', 'Keep-Alive: timeout=99', 'TE: trailers', 'Proxy-Authorization: Basic eA==',
  ]);
  t.equal(res.status, 200);
  const h = up.received[before]?.headers ?? {};
  for (const name of ['x-secret-hop', 'keep-alive', 'te', 'proxy-authorization']) t.equal(h[name], undefined, `${name} not forwarded`);
  t.not(res.headers['keep-alive'], 'timeout=5', "the upstream's Keep-Alive is not passed back");
});

await t.test('public routes pass without a proof and without verify', async (t) => {
  const verifies = sidecar.verifyCalls.length;
  const before = up.received.length;
  const res = await send(gw.url, '/public/status', { headers: { 'x-service-agent-id': 'evil', 'x-service-decision': 'allow', 'x-service-proof': 'junk' } });
  t.equal(res.status, 200);
  t.equal(sidecar.verifyCalls.length, verifies);
  const h = up.received[before]?.headers ?? {};
  t.equal(h['x-service-decision'], 'public');
  t.equal(h['x-service-agent-id'], undefined);
  t.equal(h['x-service-proof'], undefined);
  const post = await send(gw.url, '/public/status', { method: 'POST', body: 'x' });
  t.equal(post.status, 403, 'public only for the listed method');
  t.equal(post.json.error.code, 'route_not_mapped');
});

await t.test('unmapped routes and methods are refused with 403 route_not_mapped', async (t) => {
  const before = up.received.length;
  for (const [method, path] of [['GET', '/'], ['GET', '/v1/other'], ['DELETE', '/admin'], ['HEAD', '/admin'], ['GET', '/v1/items'], ['GET', '/v1/items/1/extra'], ['GET', '/files'], ['PATCH', '/v1/items/1']] as const) {
    const res = await send(gw.url, path, { method, headers: { 'x-service-proof': proofHeader() } });
    t.equal(res.status, 403, `${method} ${path}`);
    if (method !== 'HEAD') t.equal(res.json?.error?.code, 'route_not_mapped');
  }
  const trace = await rawRequest(gw.port, 'TRACE /admin HTTP/1.1');
  t.equal(trace.status, 403, 'TRACE is refused');
  t.equal(trace.json?.error?.code, 'route_not_mapped');
  const unknown = await rawRequest(gw.port, 'FOO /admin HTTP/1.1');
  t.equal(unknown.status, 400, 'unknown methods are refused by the HTTP parser');
  t.equal(unknown.json?.error?.code, 'invalid_request');
  t.equal(up.received.length, before, 'upstream received nothing');
});
