/**
 * Unit tests of the pure parts: path normalization, the strict JSON reader,
 * amount conversion, proof decoding, client-IP derivation, the outcome mapper
 * and the fail-open tripwire.
 */

import t from 'tap';
import fc from 'fast-check';
import { ServiceError } from '../../src/errors.ts';
import { isNormalizedPath, normalizePath, normalizeRequestTarget } from '../../gateway-plugin/path.ts';
import { JsonNumber, parseStrictJson, resolvePointer } from '../../gateway-plugin/json.ts';
import { TrustedProxies, amountFromNumber, deriveClientIp } from '../../gateway-plugin/context.ts';
import { decodeProof } from '../../gateway-plugin/proof.ts';
import { mapVerifyResult } from '../../gateway-plugin/outcome.ts';
import { createGatewayMetrics, guardForward } from '../../gateway-plugin/metrics.ts';

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
    '/..a', '/a..', '/a/...', `/${'a'.repeat(9000)}`,
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

t.test('decodeProof', async (t) => {
  t.same(decodeProof(Buffer.from('{"a":[1]}').toString('base64')), { a: [1] });
  t.same(decodeProof(Buffer.from('{"a":"\u00ff\u00ff\u00fe"}').toString('base64url')), { a: '\u00ff\u00ff\u00fe' });
  for (const bad of ['!!!!', 'YQ', 'WzFd', 'bnVsbA==', 'A'.repeat(20_000)]) t.equal(code(() => decodeProof(bad)), 'proof_rejected', bad.slice(0, 20));
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
  t.same(mapVerifyResult(res(200, '{"decision":"allow","agent_id":"a b"}'), 'data:read'), { kind: 'allow', scope: 'data:read', agentId: undefined, certId: undefined }, 'unsafe header values dropped');
  const deny = mapVerifyResult(res(200, '{"decision":"deny","decision_reason":"constraint_denied","constraint":"Bad Name"}'), 'data:read');
  t.equal(deny.kind === 'refuse' && deny.error.code, 'constraint_denied');
  t.same(deny.kind === 'refuse' && deny.error.extra, {}, 'unsafe constraint name dropped');
  const v = mapVerifyResult({ kind: 'timeout' }, 'x:y');
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
