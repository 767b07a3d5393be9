/**
 * POST /v1/service/verify at the HTTP edge: garbage and oversized bundles,
 * malformed bodies, scopes outside the vocabulary, API-key authentication
 * (which comes before everything else), and credits running out exactly at
 * the balance.
 */
import t from 'tap';
import { Client, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, expectDecision, expectError, flipB64, usage, verify, VERIFY } from '../decide/helpers.js';

let sc: TestSidecar;
let f: Flow;
t.before(async () => {
  sc = await startSidecar();
  f = await specFlow(sc, 'edge@example.com', { approve: ['data:read'] });
});
t.teardown(async () => { await sc.close(); });

function nested(depth: number): unknown {
  let x: unknown = { v: 1 };
  for (let i = 0; i < depth; i++) x = { a: x };
  return x;
}

t.test('garbage and oversized bundles are invalid_proof', async (t) => {
  const real = await bundleFor(f);
  const garbage: [unknown, string][] = [
    ['a string', 'string'],
    ['', 'empty string'],
    [42, 'number'],
    [0, 'zero'],
    [true, 'boolean'],
    [[], 'empty array'],
    [[real], 'array holding a real bundle'],
    [null, 'null'],
    [{}, 'empty object'],
    [JSON.stringify(real), 'the bundle as a JSON string'],
    [Buffer.from(JSON.stringify(real)).toString('base64'), 'the bundle as its header value'],
    [{ proof_bundle: real }, 'the bundle wrapped once'],
    [nested(40), 'nested 40 deep'],
    [nested(3000), 'nested 3000 deep'],
    [{ ...real, sig: { ...real.sig, ml_dsa_65: 'A'.repeat(9000) } }, 'over 8 KiB (long signature half)'],
    [{ ...real, pad: 'x'.repeat(9000) }, 'over 8 KiB (extra member)'],
    [{ ...real, challenge: 'A'.repeat(9000) }, 'over 8 KiB (long challenge)'],
    [Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, i])), '500 members'],
  ];
  for (const [bundle, msg] of garbage) expectError(t, await verify(f.platform, bundle, 'data:read'), 400, 'invalid_proof', msg);
  expectDecision(t, await verify(f.platform, real, 'data:read'), 'allow', 'authorized', undefined, 'the real bundle was never spent');
});

t.test('malformed request bodies are invalid_request', async (t) => {
  const real = await bundleFor(f);
  const p = f.platform;
  const bodies: [unknown, string, string?][] = [
    [{ required_scope: 'data:read' }, 'proof_bundle missing', 'body.proof_bundle'],
    [{ proof_bundle: real }, 'required_scope missing', 'body.required_scope'],
    [{ proof_bundle: real, required_scope: 7 }, 'required_scope a number', 'body.required_scope'],
    [{ proof_bundle: real, required_scope: 'custom:' + 'a'.repeat(250) }, 'required_scope too long'],
    [{ proof_bundle: real, required_scope: 'data:read', scope: 'data:read' }, 'unknown member', 'body.scope'],
    [{ proof_bundle: real, required_scope: 'data:read', context: { method: 'GET', user: 'x' } }, 'unknown context member'],
    [{ proof_bundle: real, required_scope: 'data:read', context: { body_sha256: 'XYZ' } }, 'bad body_sha256'],
    [{ proof_bundle: real, required_scope: 'data:read', context: { amount: 5 } }, 'amount a number'],
    [{ proof_bundle: real, required_scope: 'data:read', context: 'GET /' }, 'context a string'],
    [[real, 'data:read'], 'body an array'],
    ['data:read', 'body a string'],
    [null, 'body null'],
  ];
  for (const [body, msg, field] of bodies) {
    const r = await p.post(VERIFY, body);
    expectError(t, r, 400, 'invalid_request', msg);
    if (field) t.equal(r.body?.error?.field, field, `${msg}: field`);
  }
  expectError(t, await p.req('POST', VERIFY, undefined, { raw: '{"proof_bundle": ' }), 400, 'invalid_request', 'invalid JSON');
  expectError(t, await p.req('POST', VERIFY, undefined, { raw: '' }), 400, 'invalid_request', 'empty body');
  expectError(t, await p.req('POST', VERIFY, undefined, { raw: JSON.stringify({ proof_bundle: real, required_scope: 'data:read', pad: 'x'.repeat(70_000) }) }), 413, 'body_too_large', 'over the body limit');
  expectDecision(t, await verify(p, real, 'data:read'), 'allow', 'authorized', undefined, 'none of these spent the challenge');
});

t.test('scopes outside the vocabulary are invalid_scopes, never allow', async (t) => {
  const real = await bundleFor(f);
  for (const s of ['data:*', '*', 'data', 'DATA:READ', 'data:read ', ' data:read', 'data:reads', 'custom:', 'custom:Bad', 'custom:a::b', 'payments:*', 'admin:*', '']) {
    const r = await verify(f.platform, real, s);
    expectError(t, r, 400, 'invalid_scopes', JSON.stringify(s));
    t.equal(r.body?.error?.field, 'body.required_scope');
  }
  expectError(t, await verify(f.platform, { v: 1 }, 'data:*'), 400, 'invalid_scopes', 'scope is checked before the bundle');
  expectDecision(t, await verify(f.platform, real, 'custom:never.granted'), 'deny', 'not_delegated', undefined, 'a well-formed custom scope is a decision');
  const again = await bundleFor(f);
  expectDecision(t, await verify(f.platform, again, 'data:read'), 'allow', 'authorized');
});

t.test('a bad API key is 401 invalid_api_key whatever the body, and costs nothing', async (t) => {
  const real = await bundleFor(f);
  const before = await usage(f.user);
  const good = f.reg.api_key as string;
  const wrongSecret = good.slice(0, -4) + (good.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  const keys: [string | null, string][] = [
    [null, 'no key'], ['', 'empty key'], ['nope', 'malformed'], [good + 'x', 'too long'],
    [wrongSecret, 'right prefix, wrong secret'], ['aak_000000000000_' + 'A'.repeat(43), 'unknown prefix'], [good.toUpperCase(), 'case changed'],
  ];
  const bodies: [string | undefined, unknown, string][] = [
    [undefined, { proof_bundle: real, required_scope: 'data:read' }, 'a valid request'],
    [undefined, { proof_bundle: 'garbage', required_scope: 'data:read' }, 'a garbage bundle'],
    [undefined, { proof_bundle: real, required_scope: 'data:*' }, 'a bad scope'],
    [undefined, { required_scope: 'data:read' }, 'no bundle'],
    [undefined, ['x'], 'an array body'],
    ['{"proof_bundle":', undefined, 'invalid JSON'],
    ['', undefined, 'an empty body'],
  ];
  for (const [key, kmsg] of keys) {
    for (const [raw, body, bmsg] of bodies) {
      const c = new Client(sc.url);
      const r = await c.req('POST', VERIFY, body, { apiKey: key, ...(raw !== undefined ? { raw } : {}) });
      expectError(t, r, 401, 'invalid_api_key', `${kmsg} with ${bmsg}`);
    }
  }
  const after = await usage(f.user);
  t.same(after, before, 'nothing metered');
  expectDecision(t, await verify(f.platform, real, 'data:read'), 'allow', 'authorized', undefined, 'the bundle is still good for the right key');
});

t.test('credits: N verifies succeed, the next is 402, usage is consistent', async (t) => {
  const N = 5;
  const small = await startSidecar({ alphaCreditsMicros: N * 2000 });
  t.teardown(() => small.close());
  const g = await specFlow(small, 'credits@example.com', { approve: ['data:read'] });
  const u0 = await usage(g.user);
  t.equal(u0.balance_micros, N * 2000);
  t.equal(u0.price_per_verify_micros, 2000);
  t.equal(u0.remaining_verify_calls, N);

  const bundles = [];
  for (let i = 0; i < N + 2; i++) bundles.push(await bundleFor(g));
  // N billed calls: 3 allows, 1 deny, 1 400 that spent a live challenge. Replays and garbage are free.
  expectDecision(t, await verify(g.platform, bundles[0], 'data:read'), 'allow', 'authorized');
  expectDecision(t, await verify(g.platform, bundles[1], 'data:write'), 'deny', 'not_delegated');
  expectError(t, await verify(g.platform, bundles[1], 'data:read'), 400, 'invalid_challenge', 'spent (not billed)');
  expectError(t, await verify(g.platform, 'garbage', 'data:read'), 400, 'invalid_proof', 'garbage (not billed)');
  const b2 = bundles[2]!;
  const bad = { ...b2, sig: { ...b2.sig, ed25519: flipB64(b2.sig.ed25519) } };
  expectError(t, await verify(g.platform, bad, 'data:read'), 400, 'invalid_signature', 'billed: it spent a live challenge');
  expectDecision(t, await verify(g.platform, bundles[3], 'data:read'), 'allow', 'authorized');
  const mid = await usage(g.user);
  t.same([mid.verify_calls, mid.allows, mid.denies, mid.balance_micros, mid.remaining_verify_calls], [4, 2, 1, (N - 4) * 2000, N - 4]);
  expectDecision(t, await verify(g.platform, bundles[4], 'data:read'), 'allow', 'authorized', undefined, 'the last credit');

  const r = await verify(g.platform, bundles[5], 'data:read');
  expectError(t, r, 402, 'credits_exhausted', 'one past the balance');
  expectError(t, await verify(g.platform, 'garbage', 'data:read'), 402, 'credits_exhausted', 'a garbage call too');
  expectError(t, await verify(g.platform, bundles[6], 'data:read', undefined, { apiKey: 'nope' }), 401, 'invalid_api_key', 'auth still comes first');

  const end = await usage(g.user);
  t.same(
    { balance: end.balance_micros, calls: end.verify_calls, allows: end.allows, denies: end.denies, remaining: end.remaining_verify_calls },
    { balance: 0, calls: N, allows: 3, denies: 1, remaining: 0 },
    'usage after exhaustion',
  );
  t.equal(end.verify_calls * end.price_per_verify_micros, N * 2000 - end.balance_micros, 'balance = credits - calls x price');
  const decisions = (await auditAll(g.user)).filter((e) => e.event_type.startsWith('proof.') && e.event_type !== 'proof.presented');
  t.equal(decisions.length, end.allows + end.denies, 'one audit row per decision');
});
