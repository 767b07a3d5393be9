/**
 * Constraint-context derivation over real HTTP: client_ip (X-Forwarded-For
 * only from trusted proxies), tenant rules, amount/currency from the JSON body
 * (never from headers), body_sha256 of the forwarded bytes, the body reaching
 * the upstream byte-for-byte, and the body size limit.
 */

import t from 'tap';
import { createHash } from 'node:crypto';
import { allowAll, gatewayConfig, proofHeader, rawRequest, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(30_000);

const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
const gw = await startGateway(gatewayConfig(up.url, sidecar.url, {
  context: { tenant: { hosts: { 'acme.example.com': 'acme' } } },
}));
t.teardown(async () => {
  await gw.close();
  await up.close();
  await sidecar.close();
});
const proof = { 'x-service-proof': proofHeader() };
const lastContext = (): Record<string, string> => sidecar.verifyCalls.at(-1)?.body.context ?? {};

await t.test('X-Forwarded-For from an untrusted peer is ignored', async (t) => {
  const res = await send(gw.url, '/v1/items/1', { headers: { ...proof, 'x-forwarded-for': '203.0.113.9, 198.51.100.2' } });
  t.equal(res.status, 200);
  t.equal(lastContext().client_ip, '127.0.0.1');
  t.equal(up.received.at(-1)?.headers['x-forwarded-for'], '127.0.0.1');
});

await t.test('the context comes from the request received, in the documented member order', async (t) => {
  const res = await send(gw.url, '/v1/items/%41b', { headers: { ...proof, host: 'acme.example.com:8443', 'x-amount': '1' } });
  t.equal(res.status, 200);
  t.same(Object.keys(lastContext()), ['method', 'path', 'client_ip', 'tenant', 'body_sha256']);
  t.same(lastContext(), { method: 'GET', path: '/v1/items/Ab', client_ip: '127.0.0.1', tenant: 'acme', body_sha256: sha('') });
  await send(gw.url, '/v1/items/1', { headers: { ...proof, host: 'other.example.com' } });
  t.equal(lastContext().tenant, undefined, 'unknown host: no tenant');
});

await t.test('amount and currency come from the body, never from headers', async (t) => {
  const body = '{ "memo": "caf\u00e9 \u2603",\n  "amount": 12.50, "currency": "eur" }';
  const res = await send(gw.url, '/v1/payments', {
    method: 'POST',
    headers: { ...proof, 'content-type': 'application/json; charset=utf-8', 'x-amount': '999999', 'x-service-amount': '1', 'x-currency': 'XXX' },
    body,
  });
  t.equal(res.status, 200);
  const ctx = lastContext();
  t.equal(ctx.amount, '12.50');
  t.equal(ctx.currency, 'EUR');
  const got = up.received.at(-1);
  t.ok(got?.body.equals(Buffer.from(body, 'utf8')), 'upstream received the body byte-for-byte');
  t.equal(ctx.body_sha256, sha(got?.body ?? ''), 'body_sha256 is the hash of the forwarded body');
  t.equal(got?.headers['content-type'], 'application/json; charset=utf-8');
  t.equal(got?.headers['content-length'], String(Buffer.byteLength(body)));
});

await t.test('amount conversions', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['{"amount": 1.25e2}', '125'],
    ['{"amount": 0.000001}', '0.000001'],
    ['{"amount": 1E-6}', '0.000001'],
    ['{"amount": 100.0000000}', '100'],
    ['{"amount": 0}', '0'],
    ['{"amount": "12.50"}', '12.50'],
    ['{"amount": 999999999999999.999999}', '999999999999999.999999'],
    ['{"currency": "usd"}', undefined],
    ['{}', undefined],
    ['{"amount": null}', 'refused'],
    ['{"amount": -1}', 'refused'],
    ['{"amount": "-1"}', 'refused'],
    ['{"amount": "1e3"}', 'refused'],
    ['{"amount": "012"}', 'refused'],
    ['{"amount": 1.0000001}', 'refused'],
    ['{"amount": 1e16}', 'refused'],
    ['{"amount": true}', 'refused'],
    ['{"amount": {"v": 1}}', 'refused'],
    ['{"amount": 1, "amount": 1000}', 'refused'],
    ['{"amount": 1} trailing', 'refused'],
    ['{"amount": 5, "currency": "EURO"}', 'refused'],
  ];
  for (const [body, want] of cases) {
    const before = up.received.length;
    const verifies = sidecar.verifyCalls.length;
    const res = await send(gw.url, '/v1/payments', { method: 'POST', headers: { ...proof, 'content-type': 'application/json' }, body });
    if (want === 'refused') {
      t.equal(res.status, 400, `${body}: 400`);
      t.equal(res.json?.error?.code, 'invalid_request', `${body}: invalid_request`);
      t.equal(sidecar.verifyCalls.length, verifies, `${body}: verify not called`);
      t.equal(up.received.length, before, `${body}: upstream not called`);
    } else {
      t.equal(res.status, 200, `${body}: 200`);
      t.equal(lastContext().amount, want, `${body}: amount`);
    }
  }
});

await t.test('non-JSON content types: parsed if strict JSON, otherwise no amount', async (t) => {
  await send(gw.url, '/v1/payments', { method: 'POST', headers: { ...proof, 'content-type': 'text/plain' }, body: '{"amount": 7}' });
  t.equal(lastContext().amount, '7', 'strict JSON under another type still yields the amount');
  const res = await send(gw.url, '/v1/payments', { method: 'POST', headers: { ...proof, 'content-type': 'text/plain' }, body: 'amount=7' });
  t.equal(res.status, 200);
  t.equal(lastContext().amount, undefined, 'no amount: the sidecar denies constrained certificates');
});

await t.test('binary and chunked bodies reach the upstream byte-for-byte', async (t) => {
  const bytes = Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256));
  const res = await send(gw.url, '/files/blob.bin', { method: 'PUT', headers: { ...proof, 'content-type': 'application/octet-stream' }, body: bytes });
  t.equal(res.status, 200);
  t.ok(up.received.at(-1)?.body.equals(bytes));
  t.equal(lastContext().body_sha256, sha(bytes));
  const chunked = await rawRequest(gw.port, 'POST /files/c HTTP/1.1', [`X-Service-Proof: ${proofHeader()}`, 'Transfer-Encoding: chunked'], '3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n');
  t.equal(chunked.status, 200);
  t.equal(up.received.at(-1)?.body.toString(), 'abcde');
  t.equal(up.received.at(-1)?.headers['content-type'], undefined, 'no content type invented');
  t.equal(lastContext().body_sha256, sha('abcde'));
});

await t.test('GET bodies are not forwarded; the hash is of the empty body', async (t) => {
  const res = await rawRequest(gw.port, 'GET /v1/items/1 HTTP/1.1', [`X-Service-Proof: ${proofHeader()}`], 'abc');
  t.equal(res.status, 200);
  t.equal(up.received.at(-1)?.body.length, 0);
  t.equal(up.received.at(-1)?.headers['content-length'], undefined);
  t.equal(lastContext().body_sha256, sha(''));
});

await t.test('bodies over the limit are refused with 413 body_too_large', async (t) => {
  const before = up.received.length;
  const verifies = sidecar.verifyCalls.length;
  const res = await send(gw.url, '/files/big', { method: 'POST', headers: { ...proof, 'content-type': 'application/octet-stream' }, body: Buffer.alloc(65_537) });
  t.equal(res.status, 413);
  t.equal(res.json?.error?.code, 'body_too_large');
  t.equal(up.received.length, before);
  t.equal(sidecar.verifyCalls.length, verifies);
});

await t.test('trusted proxies: rightmost untrusted X-Forwarded-For hop; tenant header only from them', async (t) => {
  const gw2 = await startGateway(gatewayConfig(up.url, sidecar.url, {
    trusted_proxies: ['127.0.0.1', '10.0.0.0/8'],
    context: { tenant: { header: 'x-tenant-id' } },
    routes: [{
      method: 'POST', path: '/pay', scope: 'payments:send', context: { amount: '/total/value', currency: '/total/cur' },
      idempotency: 'off', // the fake sidecar keeps no ledger (idempotency*.test.ts test it)
    }],
  }));
  t.teardown(() => gw2.close());
  const post = (headers: Record<string, string>, body = '{"total":{"value":"3.10","cur":"jpy"},"amount":99}') =>
    send(gw2.url, '/pay', { method: 'POST', headers: { ...proof, 'content-type': 'application/json', ...headers }, body });
  await post({ 'x-forwarded-for': '198.51.100.1, 203.0.113.9, 10.1.2.3', 'x-tenant-id': 'globex' });
  t.same(lastContext(), { method: 'POST', path: '/pay', client_ip: '203.0.113.9', tenant: 'globex', amount: '3.10', currency: 'JPY', body_sha256: lastContext().body_sha256 });
  t.equal(up.received.at(-1)?.headers['x-forwarded-for'], '203.0.113.9');
  t.equal(up.received.at(-1)?.headers['x-tenant-id'], 'globex', 'tenant header kept from a trusted proxy');
  await post({ 'x-forwarded-for': '10.0.0.1, 10.0.0.2' });
  t.equal(lastContext().client_ip, '10.0.0.1', 'all hops trusted: the leftmost');
  await post({});
  t.equal(lastContext().client_ip, '127.0.0.1', 'no header: the peer');
  await post({ 'x-forwarded-for': '203.0.113.9, not-an-ip' });
  t.equal(lastContext().client_ip, undefined, 'malformed hop: no client_ip');
  t.equal(up.received.at(-1)?.headers['x-forwarded-for'], undefined);
  await post({ 'x-forwarded-for': '::ffff:203.0.113.7' });
  t.equal(lastContext().client_ip, '203.0.113.7', 'IPv4-mapped IPv6 normalized');
});
