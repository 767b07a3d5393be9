/**
 * The gateway's idempotency pieces without a network (idempotency.ts): the route setting and its
 * path-named startup errors, the default for money-moving scopes, the key reader, the request
 * hash, the check of verify's ledger member (nothing unchecked reaches a response header), and
 * which response headers are recorded.
 */
import t from 'tap';
import { compileRoutes } from '../../gateway-plugin/routes.js';
import {
  parseLedgerAnswer, readIdempotencyKey, recordedHeaders, requestHash,
} from '../../gateway-plugin/idempotency.js';
import { ServiceError } from '../../src/errors.js';

const L = 'gateway options: routes';
const resolve = (routes: unknown[], method: string, path: string): string | undefined => {
  const r = compileRoutes(routes, L).resolve(method, path);
  return r.kind === 'match' ? r.route.idempotency : undefined;
};

t.test('the route setting: default by scope, explicit values, startup errors naming the route', async (t) => {
  t.equal(resolve([{ method: 'POST', path: '/pay', scope: 'payments:send' }], 'POST', '/pay'), 'required',
    'payments:* is required by default');
  t.equal(resolve([{ method: 'POST', path: '/items', scope: 'data:write' }], 'POST', '/items'), 'off', 'other scopes: off');
  t.equal(resolve([{ method: 'POST', path: '/items', scope: 'data:write', idempotency: 'optional' }], 'POST', '/items'),
    'optional');
  t.equal(resolve([{ method: 'POST', path: '/pay', scope: 'payments:send', idempotency: 'off' }], 'POST', '/pay'), 'off',
    'a money route can turn it off');
  t.equal(resolve([{ method: 'POST', path: '/mcp', scope: 'payments:send', mcp: { tools: { pay: 'payments:send' } } }], 'POST', '/mcp'), 'off',
    'MCP routes: off');
  const bad: [unknown, string][] = [
    [{ method: 'POST', path: '/x', scope: 'data:write', idempotency: 'always' }, `${L}[0].idempotency: must be "required", "optional" or "off"`],
    [{ method: 'POST', path: '/x', public: true, idempotency: 'required' }, `${L}[0].idempotency: a public route has no idempotency ledger (it needs a verified agent)`],
    [{ method: 'POST', path: '/x', scope: 'data:write', mcp: { tools: { pay: 'data:write' } }, idempotency: 'optional' }, `${L}[0].idempotency: is not supported on MCP and A2A routes`],
    [{ method: 'POST', path: '/x', scope: 'data:write', mode: 'shadow', idempotency: 'required' }, `${L}[0].idempotency: needs mode "enforce" (a shadow route forwards refused requests)`],
  ];
  for (const [route, message] of bad) t.throws(() => compileRoutes([route], L), new TypeError(message), message);
});

t.test('the key: one header of 1-255 printable ASCII characters', async (t) => {
  t.equal(readIdempotencyKey(['Host', 'x', 'Idempotency-Key', 'order-1']), 'order-1');
  t.equal(readIdempotencyKey(['host', 'x']), undefined, 'none');
  for (const raw of [['idempotency-key', 'a', 'Idempotency-Key', 'a'], ['idempotency-key', ''], ['idempotency-key', 'a b'],
    ['idempotency-key', 'x'.repeat(256)], ['idempotency-key', 'caf\u00e9']]) {
    let code: string | undefined;
    try { readIdempotencyKey(raw); } catch (err) { code = err instanceof ServiceError ? err.code : 'other'; }
    t.equal(code, 'idempotency_key_required', JSON.stringify(raw).slice(0, 60));
  }
  t.equal(readIdempotencyKey(['idempotency-key', 'x'.repeat(255)]), 'x'.repeat(255), '255 characters');
});

t.test('the request hash covers method, path, query and body', async (t) => {
  const base = requestHash('POST', '/pay', 'a=1', Buffer.from('{"amount":1}'));
  t.match(base, /^[0-9a-f]{64}$/);
  t.equal(requestHash('POST', '/pay', 'a=1', Buffer.from('{"amount":1}')), base, 'stable');
  const others = [requestHash('PUT', '/pay', 'a=1', Buffer.from('{"amount":1}')),
    requestHash('POST', '/pay2', 'a=1', Buffer.from('{"amount":1}')), requestHash('POST', '/pay', 'a=2', Buffer.from('{"amount":1}')),
    requestHash('POST', '/pay', undefined, Buffer.from('{"amount":1}')), requestHash('POST', '/pay', 'a=1', Buffer.from('{"amount":2}')),
    requestHash('POST', '/pay\na=1', '', Buffer.from('{"amount":1}'))];
  t.equal(new Set([base, ...others]).size, others.length + 1, 'each change is another request');
});

t.test('verify\'s ledger member is checked before anything of it is used', async (t) => {
  const claim = '0b5f7c1e-9a3d-4c2b-8e6f-1a2b3c4d5e6f';
  t.same(parseLedgerAnswer({ status: 'claimed', claim_id: claim }), { status: 'claimed', claimId: claim });
  const response = { status: 201, headers: [['content-type', 'application/json']], body: 'e30=', body_omitted: false };
  t.same(parseLedgerAnswer({ status: 'replay', response }), { status: 'replay', response });
  const bad: unknown[] = [
    undefined, null, 'claimed', { status: 'claimed' }, { status: 'claimed', claim_id: 'not-a-uuid' },
    { status: 'other', claim_id: claim }, { status: 'replay' },
    { status: 'replay', response: { ...response, status: 101 } }, { status: 'replay', response: { ...response, status: 600 } },
    { status: 'replay', response: { ...response, headers: [['x-a', 'b\r\nSet-Cookie: x=1']] } },
    { status: 'replay', response: { ...response, headers: [['bad name', 'v']] } },
    { status: 'replay', response: { ...response, headers: [['x-a']] } },
    { status: 'replay', response: { ...response, headers: Array.from({ length: 65 }, () => ['x-a', 'b']) } },
    { status: 'replay', response: { ...response, body: 'not base64!' } },
    { status: 'replay', response: { ...response, body_omitted: 'no' } },
  ];
  for (const v of bad) t.equal(parseLedgerAnswer(v), undefined, JSON.stringify(v)?.slice(0, 80) ?? 'undefined');
});

t.test('recorded headers: no hop-by-hop, framing or per-request ones; bounded', async (t) => {
  t.same(recordedHeaders({
    'Content-Type': 'application/json', 'content-length': 10, connection: 'keep-alive', 'transfer-encoding': 'chunked',
    date: 'x', 'x-request-id': 'r', 'set-cookie': ['a=1', 'b=2'], 'x-long': 'v'.repeat(2049), 'x-ctl': 'a\u0001b',
    'x-n': 5, 'x-undefined': undefined,
  }), [['content-type', 'application/json'], ['set-cookie', 'a=1'], ['set-cookie', 'b=2'], ['x-n', '5']]);
  t.equal(recordedHeaders(Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`x-h${i}`, 'v']))).length, 64, 'at most 64');
});
