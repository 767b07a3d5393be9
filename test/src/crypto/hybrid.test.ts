/**
 * Hybrid signature tests: round trips, every way of breaking a signature (→ false, never a
 * throw), JSON (de)serialisation and strict parsing, misuse (→ TypeError), backend selection.
 * Runs under noble always, and also under native when this runtime has it.
 */
import t from 'tap';
import {
  HYBRID_ALG,
  createSigner,
  createVerifier,
  detectMlDsaBackend,
  domainSeparatedMessage,
  generateHybridKeyPair,
  getMlDsaBackend,
  hybridSign,
  hybridVerify,
  publicKeyFromJson,
  publicKeyFromSeed,
  publicKeyToJson,
  setMlDsaBackend,
  signatureFromJson,
  signatureToJson,
  type HybridSignature,
  type MlDsaBackendName,
} from '../../../src/crypto/hybrid.js';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const flip = (b: Uint8Array, i: number): Uint8Array => {
  const c = new Uint8Array(b);
  c[(i + c.length) % c.length]! ^= 0x01;
  return c;
};

t.test('domainSeparatedMessage', async (tt) => {
  const m = domainSeparatedMessage('decision.v1', new Uint8Array([7, 8]));
  tt.same(m, new Uint8Array([...enc('agent-authz/v1/decision.v1'), 0, 7, 8]), 'prefix || domain || 0x00 || message');
  tt.same(domainSeparatedMessage('a', new Uint8Array()), new Uint8Array([...enc('agent-authz/v1/a'), 0]));
  for (const bad of ['', 'A', 'a b', 'a/b', 'a_b', 'é', 'x'.repeat(65), 'a\0']) {
    tt.throws(() => domainSeparatedMessage(bad, new Uint8Array()), TypeError, `domain ${JSON.stringify(bad)} rejected`);
  }
  tt.doesNotThrow(() => domainSeparatedMessage('x'.repeat(64), new Uint8Array()), '64-char domain accepted');
  tt.throws(() => domainSeparatedMessage('a', 'text' as unknown as Uint8Array), TypeError, 'non-bytes message rejected');
});

t.test('backend selection', async (tt) => {
  const detected = detectMlDsaBackend();
  tt.ok(detected === 'native' || detected === 'noble');
  tt.throws(() => setMlDsaBackend('bogus' as MlDsaBackendName), TypeError, 'unknown backend');
  if (detected === 'native') tt.doesNotThrow(() => setMlDsaBackend('native'));
  else tt.throws(() => setMlDsaBackend('native'), TypeError, 'native unavailable on this runtime');
  setMlDsaBackend('noble');
  tt.equal(getMlDsaBackend(), 'noble');
});

const backends: MlDsaBackendName[] = detectMlDsaBackend() === 'native' ? ['noble', 'native'] : ['noble'];
for (const backend of backends) {
  t.test(`hybrid signatures (${backend})`, async (tt) => {
    setMlDsaBackend(backend);
    const a = generateHybridKeyPair();
    const b = generateHybridKeyPair();
    tt.equal(a.secretSeed.length, 64);
    tt.equal(a.publicKey.ed25519.length, 32);
    tt.equal(a.publicKey.mldsa65.length, 1952);
    tt.same(publicKeyFromSeed(a.secretSeed), a.publicKey, 'public key is a function of the seed');

    const signer = createSigner(a.secretSeed);
    tt.same(signer.publicKey, a.publicKey);
    const msg = enc('{"decision":"allow"}');
    const sig = signer.sign('decision', msg);
    tt.equal(sig.ed25519.length, 64);
    tt.equal(sig.mldsa65.length, 3309);
    const v = createVerifier(a.publicKey);
    tt.equal(v.verify('decision', msg, sig), true, 'prepared verifier accepts');
    tt.equal(hybridVerify(a.publicKey, 'decision', msg, sig), true, 'one-shot verify accepts');
    const sig2 = hybridSign(a.secretSeed, 'decision', msg);
    tt.equal(v.verify('decision', msg, sig2), true, 'one-shot sign verifies');
    tt.equal(hybridVerify(a.publicKey, 'decision', msg, hybridSign(a.secretSeed, 'decision', msg)), true, 'cached signer');
    const empty = signer.sign('decision', new Uint8Array());
    tt.equal(v.verify('decision', new Uint8Array(), empty), true, 'empty message');

    const sigB = createSigner(b.secretSeed).sign('decision', msg);
    const vB = createVerifier(b.publicKey);
    tt.equal(vB.verify('decision', msg, sigB), true);

    const bad: [string, unknown][] = [
      ['Ed25519 half stripped', { ed25519: new Uint8Array(), mldsa65: sig.mldsa65 }],
      ['ML-DSA half stripped', { ed25519: sig.ed25519, mldsa65: new Uint8Array() }],
      ['Ed25519 half missing', { mldsa65: sig.mldsa65 }],
      ['ML-DSA half missing', { ed25519: sig.ed25519 }],
      ['halves swapped in position', { ed25519: sig.mldsa65, mldsa65: sig.ed25519 }],
      ['Ed25519 half from another key', { ed25519: sigB.ed25519, mldsa65: sig.mldsa65 }],
      ['ML-DSA half from another key', { ed25519: sig.ed25519, mldsa65: sigB.mldsa65 }],
      ['Ed25519 half from another message', { ed25519: signer.sign('decision', enc('x')).ed25519, mldsa65: sig.mldsa65 }],
      ['ML-DSA half from another message', { ed25519: sig.ed25519, mldsa65: signer.sign('decision', enc('x')).mldsa65 }],
      ['Ed25519 half flipped (first byte)', { ed25519: flip(sig.ed25519, 0), mldsa65: sig.mldsa65 }],
      ['Ed25519 half flipped (last byte)', { ed25519: flip(sig.ed25519, -1), mldsa65: sig.mldsa65 }],
      ['ML-DSA half flipped (first byte)', { ed25519: sig.ed25519, mldsa65: flip(sig.mldsa65, 0) }],
      ['ML-DSA half flipped (middle byte)', { ed25519: sig.ed25519, mldsa65: flip(sig.mldsa65, 1700) }],
      ['ML-DSA half flipped (last byte)', { ed25519: sig.ed25519, mldsa65: flip(sig.mldsa65, -1) }],
      ['Ed25519 half truncated', { ed25519: sig.ed25519.subarray(0, 63), mldsa65: sig.mldsa65 }],
      ['ML-DSA half truncated', { ed25519: sig.ed25519, mldsa65: sig.mldsa65.subarray(0, 3308) }],
      ['ML-DSA half extended', { ed25519: sig.ed25519, mldsa65: new Uint8Array([...sig.mldsa65, 0]) }],
      ['halves as strings', signatureToJson(sig)],
      ['null', null],
      ['undefined', undefined],
      ['number', 42],
      ['array', [sig.ed25519, sig.mldsa65]],
    ];
    for (const [name, s] of bad) {
      tt.equal(v.verify('decision', msg, s as HybridSignature), false, `${name} → false`);
      tt.equal(hybridVerify(a.publicKey, 'decision', msg, s as HybridSignature), false, `${name} → false (one-shot)`);
    }
    tt.equal(v.verify('decision2', msg, sig), false, 'different domain → false');
    tt.equal(v.verify('decision', flip(msg, 3), sig), false, 'flipped message byte → false');
    tt.equal(v.verify('decision', new Uint8Array([...msg, 0]), sig), false, 'extended message → false');
    tt.equal(vB.verify('decision', msg, sig), false, 'other key → false');
    tt.equal(hybridVerify(b.publicKey, 'decision', msg, sig), false, 'other key → false (one-shot)');
    const mixedA = { ed25519: a.publicKey.ed25519, mldsa65: b.publicKey.mldsa65 };
    const mixedB = { ed25519: b.publicKey.ed25519, mldsa65: a.publicKey.mldsa65 };
    tt.equal(createVerifier(mixedA).verify('decision', msg, sig), false, 'wrong ML-DSA public key half → false');
    tt.equal(createVerifier(mixedB).verify('decision', msg, sig), false, 'wrong Ed25519 public key half → false');
    tt.equal(hybridVerify(mixedA, 'decision', msg, sig), false, 'wrong public key half → false (one-shot)');
    tt.equal(hybridVerify(a.publicKey, 'decision', msg, sig), true, 'cache is keyed by the full key');
    tt.equal(v.verify('decision', msg, sig), true, 'the genuine signature still verifies');

    // Misuse by code → TypeError.
    tt.throws(() => createSigner(new Uint8Array(63)), TypeError);
    tt.throws(() => hybridSign(new Uint8Array(65), 'decision', msg), TypeError);
    tt.throws(() => publicKeyFromSeed(new Uint8Array(32)), TypeError);
    tt.throws(() => createVerifier({ ed25519: new Uint8Array(31), mldsa65: a.publicKey.mldsa65 }), TypeError);
    tt.throws(() => createVerifier({ ed25519: a.publicKey.ed25519, mldsa65: new Uint8Array(1951) }), TypeError);
    tt.throws(() => v.verify('Bad Domain', msg, sig), TypeError, 'invalid domain is misuse');
    tt.throws(() => signer.sign('', msg), TypeError);
  });
}

t.test('signatures made under one in-process backend verify under the other', { skip: backends.length < 2 ? 'native ML-DSA unavailable in-process (see cross-backend.test.ts)' : false }, async (tt) => {
  const { publicKey, secretSeed } = generateHybridKeyPair();
  const msg = enc('x');
  setMlDsaBackend('noble');
  const nobleSig = hybridSign(secretSeed, 'd', msg);
  const nobleVerifier = createVerifier(publicKey);
  setMlDsaBackend('native');
  tt.same(publicKeyFromSeed(secretSeed), publicKey, 'same public key');
  tt.equal(hybridVerify(publicKey, 'd', msg, nobleSig), true, 'noble → native');
  tt.equal(nobleVerifier.verify('d', msg, hybridSign(secretSeed, 'd', msg)), true, 'native → noble');
});

t.test('JSON forms', async (tt) => {
  setMlDsaBackend('noble');
  const { publicKey, secretSeed } = generateHybridKeyPair();
  const sig = hybridSign(secretSeed, 'decision', enc('m'));
  const pj = publicKeyToJson(publicKey);
  tt.same(Object.keys(pj).sort(), ['alg', 'ed25519', 'ml_dsa_65']);
  tt.equal(pj.alg, HYBRID_ALG);
  tt.match(pj.ed25519, /^[A-Za-z0-9_-]{43}$/, '32 bytes → 43 base64url chars');
  tt.match(pj.ml_dsa_65, /^[A-Za-z0-9_-]{2603}$/, '1952 bytes → 2603 base64url chars');
  tt.same(publicKeyFromJson(JSON.parse(JSON.stringify(pj))), publicKey, 'public key round trip');
  const sj = signatureToJson(sig);
  tt.match(sj.ed25519, /^[A-Za-z0-9_-]{86}$/, '64 bytes → 86 chars');
  tt.match(sj.ml_dsa_65, /^[A-Za-z0-9_-]{4412}$/, '3309 bytes → 4412 chars');
  tt.same(signatureFromJson(JSON.parse(JSON.stringify(sj))), sig, 'signature round trip');
  tt.equal(hybridVerify(publicKeyFromJson(pj)!, 'decision', enc('m'), signatureFromJson(sj)!), true);

  const std = (s: string): string => s.replace(/-/g, '+').replace(/_/g, '/');
  const otherEd = 'A'.repeat(42) + 'B'; // non-canonical: trailing bits set
  const badKeys: [string, unknown][] = [
    ['null', null], ['undefined', undefined], ['string', JSON.stringify(pj)], ['array', [pj]], ['number', 1],
    ['missing alg', { ed25519: pj.ed25519, ml_dsa_65: pj.ml_dsa_65 }],
    ['wrong alg', { ...pj, alg: 'ed25519' }],
    ['missing ed25519', { alg: pj.alg, ml_dsa_65: pj.ml_dsa_65 }],
    ['missing ml_dsa_65', { alg: pj.alg, ed25519: pj.ed25519 }],
    ['extra key', { ...pj, kid: 'x' }],
    ['__proto__ key', JSON.parse(`{"alg":"${pj.alg}","ed25519":"${pj.ed25519}","ml_dsa_65":"${pj.ml_dsa_65}","__proto__":{}}`)],
    ['padding', { ...pj, ed25519: pj.ed25519 + '=' }],
    ['standard base64 alphabet', { ...pj, ed25519: std(pj.ed25519) === pj.ed25519 ? '+' + pj.ed25519.slice(1) : std(pj.ed25519) }],
    ['whitespace', { ...pj, ml_dsa_65: ' ' + pj.ml_dsa_65 }],
    ['non-canonical trailing bits', { ...pj, ed25519: otherEd }],
    ['short ed25519', { ...pj, ed25519: pj.ed25519.slice(0, 42) }],
    ['long ed25519', { ...pj, ed25519: pj.ed25519 + 'AAAA' }],
    ['short ml_dsa_65', { ...pj, ml_dsa_65: pj.ml_dsa_65.slice(0, -4) }],
    ['halves swapped', { ...pj, ed25519: pj.ml_dsa_65, ml_dsa_65: pj.ed25519 }],
    ['non-string half', { ...pj, ed25519: Array.from(publicKey.ed25519) }],
    ['class instance', Object.assign(Object.create({ x: 1 }) as object, pj)],
  ];
  for (const [name, j] of badKeys) tt.equal(publicKeyFromJson(j), null, `public key: ${name} → null`);
  const badSigs: [string, unknown][] = [
    ['null', null], ['string', 'x'], ['array', [sj.ed25519, sj.ml_dsa_65]],
    ['missing half', { ed25519: sj.ed25519 }],
    ['extra key', { ...sj, alg: HYBRID_ALG }],
    ['empty half', { ...sj, ml_dsa_65: '' }],
    ['padding', { ...sj, ed25519: sj.ed25519 + '==' }],
    ['truncated ml_dsa_65', { ...sj, ml_dsa_65: sj.ml_dsa_65.slice(0, -8) }],
    ['halves swapped', { ed25519: sj.ml_dsa_65, ml_dsa_65: sj.ed25519 }],
    ['non-string half', { ...sj, ed25519: 5 }],
  ];
  for (const [name, j] of badSigs) tt.equal(signatureFromJson(j), null, `signature: ${name} → null`);
  tt.throws(() => publicKeyToJson({ ed25519: new Uint8Array(1), mldsa65: publicKey.mldsa65 }), TypeError);
});
