/**
 * Unit tests of the pure parts: path normalization (and its length limit),
 * the strict JSON reader, amount conversion, proof decoding and structural
 * pre-validation, route resolution (trailing slash / letter case), header
 * name canonicalization, client-IP derivation, the outcome mapper and the
 * fail-open tripwire.
 */

import t from 'tap';
import fc from 'fast-check';
import { ServiceError } from '../../src/errors.js';
import { MAX_PATH_LENGTH, isNormalizedPath, normalizePath, normalizeRequestTarget } from '../../src/path.js';
import { JsonNumber, parseStrictJson, resolvePointer } from '../../gateway-plugin/json.js';
import { TrustedProxies, amountFromNumber, deriveClientIp } from '../../gateway-plugin/context.js';
import { MAX_PROOF_HEADER_LENGTH, decodeProof, decodeProofJson } from '../../gateway-plugin/proof.js';
import { verifyBody } from '../../gateway-plugin/verify-client.js';
import { compileRoutes } from '../../gateway-plugin/routes.js';
import { canonicalHeaderName, upstreamRequestHeaders, upstreamResponseHeaders } from '../../gateway-plugin/headers.js';
import { fakeBundle, proofHeader } from './helpers.js';
import { mapVerifyCall } from '../../gateway-plugin/outcome.js';
import { createGatewayMetrics, guardForward } from '../../gateway-plugin/metrics.js';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof ServiceError ? err.code : `other: ${String(err)}`;
  }
};

t.test('normalizePath', async (t) => {
  const ok: Array<[string, string]> = [
    ['/', '/'], ['/admin', '/admin'], ['/%61dmin', '/admin'], ['/%7e%5F', '/~_'], ['/a%2eb', '/a.b'], ['/a%3a', '/a%3A'],
    ['/a%20b', '/a%20b'], ['/a b', '/a%20b'], ['/a"b', '/a%22b'], ['/a{b}|^`', '/a%7Bb%7D%7C%5E%60'], ['/%c3%a9', '/%C3%A9'],
    ['/a/', '/a/'], ['/a.b/c..d', '/a.b/c..d'], ['/:@!$&\'()*+,=', '/:@!$&\'()*+,='], ['/%25', '/%25'], ['/%25zz', '/%25zz'],
  ];
  for (const [input, want] of ok) t.equal(normalizePath(input), want, input);
  const bad = [
    '', 'a', '*', 'http://x/a', '//a', '/a//b', '/.', '/..', '/a/./b', '/a/../b', '/%2e', '/%2E%2e', '/.%2e', '/a/%2e%2e/', '/a%2fb', '/a%2Fb',
    '/a%5cb', '/a\\b', '/a;b', '/a%3bb', '/a%00', '/a\u0000', '/a%01', '/a%7f', '/a\u007f', '/a\n', '/%c0%af', '/%c0%ae', '/%e0%80%af', '/%ff',
    '/%80', '/%c3', '/%zz', '/%', '/%4', '/%252e', '/%25%32%65', '/%ef%bc%8f', '/%ef%bc%8e', '/%c2%85', '/%e2%80%a8', '/\u00e9', '/a#b',
    '/..a', '/a..', '/a/...',
  ];
  for (const input of bad) t.equal(code(() => normalizePath(input)), 'ambiguous_path', JSON.stringify(input));
  t.same(normalizeRequestTarget('/a?x=%zz&y'), { path: '/a', query: 'x=%zz&y' });
  t.same(normalizeRequestTarget('/a?'), { path: '/a', query: undefined });
  t.equal(code(() => normalizeRequestTarget('/a?x#y')), 'invalid_request');
});

t.test('normalizePath is idempotent and never yields an ambiguous path (property)', async (t) => {
  const piece = fc.constantFrom('a', 'Z', '0', '-', '.', '_', '~', '/', '%2e', '%2E', '%41', '%2f', '%25', '%3b', ';', ':', '@', '%c3%a9', '%c0', '%00', '\\', ' ', '"', '%7e', '..', '%', 'e', '2');
  fc.assert(fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
    const raw = `/${pieces.join('')}`;
    let out: string;
    try {
      out = normalizePath(raw);
    } catch {
      return true;
    }
    return normalizePath(out) === out && isNormalizedPath(out) && !/%2F|%5C|%00|\/\.\.?(\/|$)|\/\//i.test(out) && new URL(out, 'http://x').pathname === out;
  }), { numRuns: 3000, seed: 1 });
  t.pass('property holds');
});

t.test('strict JSON reader', async (t) => {
  const doc = parseStrictJson(Buffer.from('{"a":{"b/c":[1,{"~d":"x"}]},"n":-1.5e3,"s":"\\u0041\\n"}'));
  t.ok(resolvePointer(doc, '/n') instanceof JsonNumber);
  t.equal((resolvePointer(doc, '/n') as JsonNumber).text, '-1.5e3');
  t.equal(resolvePointer(doc, '/a/b~1c/1/~0d'), 'x');
  t.equal(resolvePointer(doc, '/s'), 'A\n');
  t.equal(resolvePointer(doc, '/a/b~1c/2'), undefined);
  t.equal(resolvePointer(doc, '/a/b~1c/01'), undefined);
  t.equal(resolvePointer(doc, '/n/x'), undefined);
  t.equal(resolvePointer(doc, '/__proto__'), undefined);
  for (const bad of ['{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '{a:1}', '[1,]', '01', '1.', '"\u0001"', '\ufeff{}', '{"a":1} x', '', 'NaN', `${'['.repeat(70)}${']'.repeat(70)}`]) {
    t.throws(() => parseStrictJson(Buffer.from(bad)), { name: 'JsonSyntaxError' }, JSON.stringify(bad));
  }
  t.throws(() => parseStrictJson(Buffer.from([0x22, 0xff, 0x22])), { name: 'JsonSyntaxError' }, 'invalid UTF-8');
});

t.test('amountFromNumber is exact', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['0', '0'], ['-0', '0'], ['12.50', '12.50'], ['1e3', '1000'], ['1.5E+2', '150'], ['125e-2', '1.25'], ['0.1e-5', '0.000001'],
    ['100.000', '100.000'], ['100.0000000', '100'], ['999999999999999', '999999999999999'], ['1e15', undefined], ['-1', undefined],
    ['0.0000001', undefined], ['1e99999', undefined], ['0e99999', '0'], ['123456789012345.123456', '123456789012345.123456'],
  ];
  for (const [text, want] of cases) t.equal(amountFromNumber(text), want, text);
});

t.test('normalizePath: length limit equals the sidecar verify context.path limit', async (t) => {
  t.equal(MAX_PATH_LENGTH, 2048);
  const exact = `/${'a'.repeat(MAX_PATH_LENGTH - 1)}`;
  t.equal(normalizePath(exact), exact, 'exactly MAX_PATH_LENGTH is accepted');
  t.equal(code(() => normalizePath(`${exact}a`)), 'invalid_request', 'one more is refused');
  t.equal(code(() => normalizePath(`/${'a'.repeat(9000)}`)), 'invalid_request', 'very long raw path');
  const encoded = `/${'%61'.repeat(MAX_PATH_LENGTH - 1)}`;
  t.equal(normalizePath(encoded).length, MAX_PATH_LENGTH, 'the limit is on the normalized path (decoding shrinks)');
  t.equal(code(() => normalizePath(`/${'"'.repeat(700)}`)), 'invalid_request', 'the limit is on the normalized path (encoding grows)');
  t.equal(code(() => normalizeRequestTarget(`${exact}b?q=1`)), 'invalid_request');
});

t.test('decodeProofJson + verifyBody: the checked JSON text is spliced into the verify body', async (t) => {
  const bundle = fakeBundle();
  const context = { method: 'GET', path: '/v1/items/1', client_ip: '127.0.0.1', body_sha256: 'e3'.repeat(32) };
  const objectBody = verifyBody({ proof_bundle: bundle, required_scope: 'data:read', context });
  for (const text of [JSON.stringify(bundle), JSON.stringify(bundle, null, 1), JSON.stringify(Object.fromEntries(Object.entries(bundle).reverse()))]) {
    const decoded = decodeProofJson(Buffer.from(text).toString('base64'));
    t.equal(decoded.json, text, 'the decoded text itself');
    const body = verifyBody({ proofBundleJson: decoded.json, required_scope: 'data:read', context });
    t.same(JSON.parse(body), JSON.parse(objectBody), 'parses to the same verify request');
  }
  // Whitespace padding past the 8 KiB bundle limit: the compact serialization of the checked object is sent.
  const compact = JSON.stringify(bundle);
  const padded = compact.replace(',', `,${' '.repeat(8300 - compact.length + 200)}`);
  const decoded = decodeProofJson(Buffer.from(padded).toString('base64'));
  t.equal(decoded.json, compact);
  // A quote or backslash in the scope cannot break out of the hand-built body.
  t.same(JSON.parse(verifyBody({ proofBundleJson: compact, required_scope: 'a"b\\c', context })).required_scope, 'a"b\\c');
});

t.test('decodeProof: strict structural pre-validation', async (t) => {
  const b64 = (text: string, enc: 'base64' | 'base64url' = 'base64'): string => Buffer.from(text).toString(enc);
  const bundle = fakeBundle();
  t.same(decodeProof(proofHeader(bundle)), bundle);
  t.same(decodeProof(proofHeader(bundle, 'base64url')), bundle);
  t.same(decodeProof(b64(JSON.stringify(bundle, null, 1))), bundle, 'JSON whitespace is fine');
  for (const bad of ['!!!!', 'YQ', 'WzFd', 'bnVsbA==', 'A'.repeat(20_000)]) t.equal(code(() => decodeProof(bad)), 'proof_rejected', bad.slice(0, 20));
  // The fast path (canonical padded base64 / unpadded base64url) and the exact path accept the same set.
  const std = proofHeader(bundle);
  const url = proofHeader(bundle, 'base64url');
  t.ok(std.endsWith('=') || std.length % 4 === 0, 'present-style header is padded standard base64');
  t.same(decodeProof(std.replace(/=+$/, '')), bundle, 'standard alphabet without padding');
  t.same(decodeProof(url + '='.repeat((4 - (url.length % 4)) % 4)), bundle, 'base64url with padding');
  const tail = std.replace(/=+$/, '');
  if (tail.length % 4 !== 0) {
    // Non-zero unused bits in the last character decode to the same bytes: accepted, as before.
    const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const i = last.indexOf(tail.at(-1)!);
    const loose = tail.slice(0, -1) + last[i + 1]!;
    t.same(decodeProof(loose), bundle, 'non-canonical trailing bits');
  }
  const mixedAt = std.search(/[+/]/);
  if (mixedAt >= 0 && /[A-Za-z0-9]/.test(url)) {
    const mixed = std.slice(0, mixedAt) + (std[mixedAt] === '+' ? '+' : '/') + std.slice(mixedAt + 1).replace(/[A-Za-z0-9]/, '_');
    t.equal(code(() => decodeProof(mixed)), 'proof_rejected', 'both alphabets in one value');
  }
  for (const [name, bad] of [
    ['inner whitespace', std.slice(0, 100) + ' ' + std.slice(100)],
    ['inner newline', std.slice(0, 100) + '\n' + std.slice(100)],
    ['padding inside', std.slice(0, 100) + '=' + std.slice(100)],
    ['too much padding', std.replace(/=*$/, '===')],
    ['a stray dot', std.slice(0, 100) + '.' + std.slice(101)],
  ] as const) t.equal(code(() => decodeProof(bad)), 'proof_rejected', name);
  t.equal(code(() => decodeProof(b64(JSON.stringify(bundle)).replace(/=+$/, '') + '====')), 'proof_rejected', 'four padding characters');
  // Not UTF-8: refused by the decoder itself (its message), not only later by the structural check.
  const message = (fn: () => unknown): string | undefined => { try { fn(); return undefined; } catch (err) { return (err as Error).message; } };
  const latin1 = Buffer.concat([Buffer.from(JSON.stringify(bundle).slice(0, -1)), Buffer.from([0x2c, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])]).toString('base64');
  t.equal(code(() => decodeProof(latin1)), 'proof_rejected', 'bytes that are not UTF-8');
  t.match(message(() => decodeProof(latin1)), /not base64 of a JSON object/, 'refused as text, before the structure is looked at');
  const utf8 = Buffer.concat([Buffer.from(JSON.stringify(bundle).slice(0, -1)), Buffer.from(',"\u00e9":1}', 'utf8')]).toString('base64');
  t.match(message(() => decodeProof(utf8)), /not a well-formed proof bundle/, 'valid UTF-8 with a stray member reaches the structural check');
  t.equal(code(() => decodeProof('')), 'proof_rejected', 'the empty string');
  t.match(message(() => decodeProof('')), /not base64/, 'the empty string is not base64');
  const structural: Record<string, unknown> = {
    'plain object without bundle members': { a: [1] },
    'old test stand-in': { v: 1, agent: 'agent-1', sig: 'A'.repeat(4800) },
    'extra member': fakeBundle({ extra: 1 }),
    'missing sig': fakeBundle({ sig: undefined }),
    'wrong version': fakeBundle({ v: 2 }),
    'wrong typ': fakeBundle({ typ: 'x' }),
    'short ed25519 signature': fakeBundle({ sig: { ed25519: 'AAAA', ml_dsa_65: (bundle.sig as Record<string, string>).ml_dsa_65 } }),
    'sig with extra member': fakeBundle({ sig: { ...(bundle.sig as object), x: 1 } }),
    'impossible date': fakeBundle({ presented_at: '2025-02-30T00:00:00.000Z' }),
    'uppercase cert hash': fakeBundle({ cert_sha256: 'AB'.repeat(32) }),
    'deeply nested sig': fakeBundle({ sig: JSON.parse('['.repeat(3000) + ']'.repeat(3000)) }),
  };
  for (const [name, value] of Object.entries(structural)) {
    t.equal(code(() => decodeProof(proofHeader(value as Record<string, unknown>))), 'proof_rejected', name);
  }
  const proto = `{"__proto__":{"x":1},${JSON.stringify(bundle).slice(1)}`;
  t.equal(code(() => decodeProof(b64(proto))), 'proof_rejected', '__proto__ member');
  const deep = b64(`{"a":${'['.repeat(6000)}${']'.repeat(6000)}}`);
  t.ok(deep.length <= MAX_PROOF_HEADER_LENGTH, 'deep bundle fits in the header');
  t.equal(code(() => decodeProof(deep)), 'proof_rejected', '6000 levels of nesting');
  try {
    decodeProof(deep);
  } catch (err) {
    t.same((err as ServiceError).extra, { reason: 'invalid_proof' });
  }
});

t.test('route resolution: trailing slash and letter case', async (t) => {
  const table = compileRoutes([
    { method: '*', path: '/app/*', public: true },
    { method: '*', path: '/app/admin', scope: 'admin:manage' },
    { method: 'GET', path: '/files', scope: 'data:read' },
    { method: 'GET', path: '/files/*', scope: 'data:read' },
    { method: 'GET', path: '/docs/*', scope: 'data:read' },
    { method: 'GET', path: '/Reports/:id', scope: 'custom:reports' },
    { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
    { method: 'GET', path: '/', public: true },
  ], 'test:');
  const r = (p: string, m = 'GET'): string => {
    const res = table.resolve(m, p);
    return res.kind === 'match' ? `match ${res.route.pattern}` : res.kind === 'ambiguous' ? `ambiguous ${res.spelling}` : 'none';
  };
  t.equal(r('/app/admin'), 'match /app/admin');
  t.equal(r('/app/admin/'), 'ambiguous trailing_slash', 'public via /app/*, but /app/admin needs a scope');
  t.equal(r('/app/Admin'), 'ambiguous case');
  t.equal(r('/APP/ADMIN'), 'ambiguous case', 'unmatched exactly, protected when folded');
  t.equal(r('/app/Admin/', 'POST'), 'ambiguous case', 'only the trimmed AND folded spelling is protected');
  t.equal(r('/app/x'), 'match /app/*');
  t.equal(r('/app/x/'), 'match /app/*', 'same entry without the slash');
  t.equal(r('/app/X'), 'match /app/*', 'same entry when folded');
  t.equal(r('/app/'), 'ambiguous trailing_slash', '/app is not mapped at all');
  t.equal(r('/files/'), 'match /files/*', '/files and /files/* authorize identically');
  t.equal(r('/docs/'), 'ambiguous trailing_slash', '/docs is not mapped');
  t.equal(r('/docs/a/'), 'match /docs/*');
  t.equal(r('/Reports/7'), 'match /Reports/:id', 'uppercase literal routes keep working');
  t.equal(r('/reports/7'), 'ambiguous case', 'a lower-case spelling of an uppercase route is not unmapped');
  t.equal(r('/v1/items/AbC'), 'match /v1/items/:id', 'case inside a parameter is irrelevant');
  t.equal(r('/v1/items/1/'), 'ambiguous trailing_slash', 'exact spelling unmatched, trimmed matched');
  t.equal(r('/v1/Items/1'), 'ambiguous case');
  t.equal(r('/'), 'match /', '"/" itself is not trimmed');
  t.equal(r('/nothing/'), 'none');
  t.equal(r('/Nothing'), 'none');
  t.equal(r('/v1/items/%C3%A9'), 'match /v1/items/:id', 'percent-encodings fold consistently');
  t.equal(table.lookup('GET', '/app/admin/')?.pattern, '/app/*', 'lookup() stays the exact match');
  t.throws(() => compileRoutes([
    { method: 'GET', path: '/admin', public: true },
    { method: 'GET', path: '/Admin', scope: 'custom:admin' },
  ], 'gateway options: routes'), { name: 'TypeError', message: 'gateway options: routes[1]: differs only in letter case from routes[0] but is authorized differently' });
  t.ok(compileRoutes([
    { method: 'GET', path: '/admin', scope: 'custom:admin' },
    { method: 'GET', path: '/Admin', scope: 'custom:admin' },
  ], 'test:'), 'case variants with the same authorization are allowed');
  t.throws(() => compileRoutes([{ method: 'GET', path: `/${'a'.repeat(MAX_PATH_LENGTH)}`, public: true }], 'test:'), { name: 'TypeError', message: /at most 2048 characters/ });
});

t.test('header names are checked as CGI servers read them', async (t) => {
  t.equal(canonicalHeaderName('X_Service_Decision'), 'x-service-decision');
  const facts = { requestId: 'rid', clientIp: '203.0.113.9', trustedPeer: true, host: 'gw.example', protocol: 'http', tenantHeader: 'x-tenant-id', hasBody: false, hadContentType: false };
  const prepared = {
    host: 'upstream', connection: 'keep-alive, X_Secret_Hop', x_secret_hop: '1', 'x-secret-hop': '1', keep_alive: '1', transfer_encoding: 'chunked', proxy_authorization: 'x',
    x_service_agent_id: 'evil', x_service_decision: 'allow', X_Service_Scope: 'admin:manage', 'x-service-cert_id': 'evil',
    x_forwarded_for: '1.1.1.1', x_forwarded_host: 'evil', x_forwarded_proto: 'https', x_forwarded_prefix: '/evil', x_real_ip: '1.1.1.1', x_request_id: 'client',
    x_tenant_id: 'evil', content_length: '5', content_type: 'text/plain',
    'x-forwarded-proto': 'https', 'x-tenant-id': 'acme', 'x-custom_header': 'kept', accept: 'a',
  };
  const out = upstreamRequestHeaders(prepared, { kind: 'allow', scope: 'data:read' }, facts);
  t.same(Object.keys(out).sort(), ['accept', 'host', 'x-custom_header', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-request-id', 'x-service-decision', 'x-service-scope', 'x-tenant-id'].sort());
  t.equal(out['x-forwarded-proto'], 'https', 'the dash spelling from a trusted proxy is still honoured');
  t.equal(out['x-service-scope'], 'data:read');
  const res = upstreamResponseHeaders({ 'content-type': 'a', 'x-request-id': 'upstream', x_request_id: 'upstream', transfer_encoding: 'x', 'x-other': '1' }, 'gw-id');
  t.same(res, { 'content-type': 'a', 'x-other': '1', 'x-request-id': 'gw-id' });
});

t.test('client IP derivation', async (t) => {
  const trusted = new TrustedProxies(['10.0.0.0/8', '::1', 'fd00::/8'], 'test:');
  t.same(deriveClientIp('203.0.113.1', '198.51.100.1', trusted), { clientIp: '203.0.113.1', trustedPeer: false });
  t.same(deriveClientIp('::ffff:10.0.0.5', '198.51.100.1, 10.9.9.9', trusted), { clientIp: '198.51.100.1', trustedPeer: true });
  t.same(deriveClientIp('::1', ['2001:db8::1', 'fd00::2'], trusted), { clientIp: '2001:db8::1', trustedPeer: true });
  t.same(deriveClientIp('::1', '2001:db8::1, bogus, fd00::2', trusted), { clientIp: undefined, trustedPeer: true });
  t.same(deriveClientIp(undefined, '1.2.3.4', trusted), { clientIp: undefined, trustedPeer: false });
});

t.test('outcome mapper basics', async (t) => {
  const res = (status: number, body: string, contentType = 'application/json; charset=utf-8') => ({ kind: 'response' as const, status, contentType, body, tooLarge: false });
  t.same(mapVerifyCall(res(200, '{"decision":"allow","agent_id":"a b"}'), 'data:read'), { kind: 'allow', scope: 'data:read', agentId: undefined, certId: undefined }, 'unsafe header values dropped');
  const deny = mapVerifyCall(res(200, '{"decision":"deny","decision_reason":"constraint_denied","constraint":"Bad Name"}'), 'data:read');
  t.equal(deny.kind === 'refuse' && deny.error.code, 'constraint_denied');
  t.same(deny.kind === 'refuse' && deny.error.extra, {}, 'unsafe constraint name dropped');
  const v = mapVerifyCall({ kind: 'timeout' }, 'x:y');
  t.same(v.kind === 'refuse' && v.error.toBody().error, { cause: 'verify_timeout', code: 'verify_unavailable', message: 'The authorization service is unavailable.', status: 503 });
});

t.test('fail-open tripwire: counted and refused, never forwarded', async (t) => {
  const metrics = createGatewayMetrics();
  const value = async (): Promise<number> => (await metrics.failOpen.get()).values[0]?.value ?? -1;
  t.equal(await value(), 0, 'exported as 0 from the start');
  t.equal(guardForward(metrics, 'allow'), true);
  t.equal(guardForward(metrics, 'public'), true);
  t.equal(await value(), 0, 'allow/public never count');
  t.equal(guardForward(metrics, undefined), false, 'no decision: refuse');
  t.equal(await value(), 1, 'and count');
  t.match(await metrics.registry.metrics(), /^agent_authz_gateway_fail_open_total 1$/m);
});
