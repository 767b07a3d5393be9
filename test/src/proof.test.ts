/**
 * src/proof.ts: signing a bundle, strict parsing (exact members, types,
 * formats, size), the header encoding, and a property: no mutation of a
 * signed bundle parses into something whose signature still verifies.
 */
import t from 'tap';
import fc from 'fast-check';
import {
  MAX_BUNDLE_BYTES, MAX_CHALLENGE_LENGTH, PROOF_DOMAIN, PROOF_TYPE, encodeProofHeader, parseProofBundle, proofSignedBytes, signProof,
} from '../../src/proof.js';
import type { ProofBundle, ProofPayload } from '../../src/proof.js';
import { createSigner, createVerifier, generateHybridKeyPair, signatureToJson } from '../../src/crypto/hybrid.js';
import { canonicalBytes } from '../../src/canonical.js';
import { CERT_DOMAIN } from '../../src/certificate.js';

const keys = generateHybridKeyPair();
const signer = createSigner(keys.secretSeed);
const verifier = createVerifier(keys.publicKey);

const payload: ProofPayload = {
  v: 1, typ: PROOF_TYPE, challenge: 'Q2hhbGxlbmdlLXZhbHVlLTAxMjM0NTY3ODlhYmNkZWZnaA', aud: '0b6c5a53-4f3e-4c4b-9f1e-2a1c3d4e5f60',
  agent_id: '1c7d6b64-5a4f-4d5c-8a2f-3b2d4e5f6a71', cert_id: 'cert-2d8e7c75-6b5a-4e6d-9b3a-4c3e5f6a7b82',
  cert_sha256: 'a'.repeat(64), presented_at: '2030-01-04T09:30:00.123Z',
};
const bundle: ProofBundle = signProof(payload, signer);
const clone = <X>(x: X): X => JSON.parse(JSON.stringify(x)) as X;
const verifies = (b: unknown): boolean => {
  const p = parseProofBundle(b);
  return p !== null && verifier.verify(PROOF_DOMAIN, proofSignedBytes(p.payload), p.signature);
};

t.test('sign and parse round trip', async (t) => {
  t.same(Object.keys(bundle).sort(), ['agent_id', 'aud', 'cert_id', 'cert_sha256', 'challenge', 'presented_at', 'sig', 'typ', 'v']);
  const p = parseProofBundle(clone(bundle));
  t.ok(p, 'parses');
  t.same(p!.payload, payload, 'payload without sig');
  t.equal(p!.presentedAt, Date.parse(payload.presented_at));
  t.equal(p!.signature.ed25519.length, 64);
  t.equal(p!.signature.mldsa65.length, 3309);
  t.ok(verifies(clone(bundle)), 'signature verifies over the canonical payload');
  t.same(proofSignedBytes(payload), canonicalBytes(payload));
  const reordered = Object.fromEntries(Object.entries(clone(bundle)).reverse());
  t.ok(verifies(reordered), 'member order does not matter (canonical JSON)');
  t.ok(JSON.stringify(bundle).length < MAX_BUNDLE_BYTES, 'a real bundle is under the limit');
  t.equal(MAX_BUNDLE_BYTES, 8192);
});

t.test('domain separation: a certificate-domain signature is not a proof signature', async (t) => {
  const wrong = { ...payload, sig: signatureToJson(signer.sign(CERT_DOMAIN, canonicalBytes(payload))) };
  t.ok(parseProofBundle(wrong), 'well-formed');
  t.notOk(verifies(wrong), 'does not verify as a proof');
  const other = createSigner(generateHybridKeyPair().secretSeed);
  t.notOk(verifies(signProof(payload, other)), 'another key does not verify');
});

t.test('header encoding', async (t) => {
  const h = encodeProofHeader(bundle);
  t.match(h, /^[A-Za-z0-9+/]+=*$/, 'standard base64');
  t.same(JSON.parse(Buffer.from(h, 'base64').toString('utf8')), bundle);
});

t.test('strict parsing: not an object', async (t) => {
  for (const x of [undefined, null, 0, 1, '', 'x', true, [], [clone(bundle)], JSON.stringify(bundle), () => bundle]) {
    t.equal(parseProofBundle(x), null, `${typeof x} ${String(JSON.stringify(x)).slice(0, 30)}`);
  }
  t.equal(parseProofBundle({}), null, 'empty object');
});

t.test('strict parsing: every member', async (t) => {
  const bad: [string, unknown][] = [
    ['v', 2], ['v', '1'], ['v', true], ['v', 1.5], ['v', null],
    ['typ', 'agent-authz.proof '], ['typ', 'AGENT-AUTHZ.PROOF'], ['typ', 1],
    ['challenge', 'a'.repeat(15)], ['challenge', 'a'.repeat(MAX_CHALLENGE_LENGTH + 1)], ['challenge', 'a'.repeat(20) + '='],
    ['challenge', 'a'.repeat(20) + '+'], ['challenge', 'a'.repeat(20) + ' '], ['challenge', 12345678901234567890],
    ['aud', 'not-a-uuid'], ['aud', payload.aud.toUpperCase()], ['aud', ` ${payload.aud}`], ['aud', payload.aud + '0'],
    ['agent_id', ''], ['agent_id', payload.agent_id.replace(/-/g, '')],
    ['cert_id', payload.cert_id.slice(5)], ['cert_id', 'CERT-' + payload.cert_id.slice(5)], ['cert_id', 'cert-' + payload.cert_id], ['cert_id', 'cert-x'],
    ['cert_sha256', 'A'.repeat(64)], ['cert_sha256', 'a'.repeat(63)], ['cert_sha256', 'a'.repeat(65)], ['cert_sha256', 'g'.repeat(64)],
    ['presented_at', '2030-01-04T09:30:00Z'], ['presented_at', '2030-01-04T09:30:00.123+00:00'], ['presented_at', '2030-01-04 09:30:00.123Z'],
    ['presented_at', '2030-02-29T00:00:00.000Z'], ['presented_at', '2030-13-01T00:00:00.000Z'], ['presented_at', '2030-01-01T24:00:00.000Z'],
    ['presented_at', Date.parse(payload.presented_at)], ['presented_at', '+030000-01-01T00:00:00.000Z'],
    ['sig', null], ['sig', 'x'], ['sig', []], ['sig', {}],
    ['sig', { ed25519: bundle.sig.ed25519 }], ['sig', { ml_dsa_65: bundle.sig.ml_dsa_65 }],
    ['sig', { ...bundle.sig, extra: '' }], ['sig', { ed25519: '', ml_dsa_65: bundle.sig.ml_dsa_65 }], ['sig', { ed25519: bundle.sig.ed25519, ml_dsa_65: '' }],
    ['sig', { ed25519: bundle.sig.ml_dsa_65, ml_dsa_65: bundle.sig.ed25519 }],
    ['sig', { ed25519: bundle.sig.ed25519 + '==', ml_dsa_65: bundle.sig.ml_dsa_65 }],
    ['sig', { ed25519: bundle.sig.ed25519.slice(0, -1), ml_dsa_65: bundle.sig.ml_dsa_65 }],
    ['sig', { ed25519: Buffer.from(bundle.sig.ed25519, 'base64url').toString('base64'), ml_dsa_65: bundle.sig.ml_dsa_65 }],
  ];
  for (const [k, v] of bad) t.equal(parseProofBundle({ ...clone(bundle), [k]: v }), null, `${k}: ${JSON.stringify(v)?.slice(0, 40)}`);
  for (const k of Object.keys(bundle)) {
    const x = clone(bundle) as unknown as Record<string, unknown>;
    delete x[k];
    t.equal(parseProofBundle(x), null, `${k} missing`);
    t.equal(parseProofBundle({ ...x, extra: 1 }), null, `${k} replaced by another member`);
  }
  t.equal(parseProofBundle({ ...clone(bundle), extra: 1 }), null, 'extra member');
  t.equal(parseProofBundle({ ...clone(bundle), sig: { ...bundle.sig, ml_dsa_65: 'A'.repeat(MAX_BUNDLE_BYTES) } }), null, 'over the size limit');
  t.ok(parseProofBundle({ ...clone(bundle), presented_at: '2028-02-29T23:59:59.999Z' }), 'a leap day parses');
  t.ok(parseProofBundle({ ...clone(bundle), challenge: 'a'.repeat(16) }), 'shortest challenge');
  t.ok(parseProofBundle({ ...clone(bundle), challenge: 'a'.repeat(MAX_CHALLENGE_LENGTH) }), 'longest challenge');
});

t.test('parse copies the payload; later changes to the input do not leak', async (t) => {
  const input = clone(bundle);
  const p = parseProofBundle(input)!;
  input.challenge = 'changed-after-parse-xxxxxxxx';
  t.equal(p.payload.challenge, payload.challenge);
});

t.test('property: no mutation of a signed bundle parses and verifies', async (t) => {
  const members = Object.keys(bundle);
  const original = JSON.stringify(Object.entries(bundle).sort());
  const mutation = fc.oneof(
    fc.record({ k: fc.constantFrom(...members), v: fc.jsonValue({ maxDepth: 2 }) }).map(({ k, v }) => (b: Record<string, unknown>) => { b[k] = v; }),
    fc.record({ k: fc.constantFrom(...members, 'sig.ed25519', 'sig.ml_dsa_65'), i: fc.nat(), c: fc.constantFrom('A', 'B', 'z', '0', '9', '-', '_', '.', ':', 'T', 'Z') })
      .map(({ k, i, c }) => (b: Record<string, unknown>) => {
        const [outer, inner] = k.split('.');
        const holder = (inner ? b[outer!] : b) as Record<string, unknown> | null;
        if (!holder || typeof holder !== 'object') return;
        const key = inner ?? outer!;
        const s = holder[key];
        if (typeof s !== 'string' || s.length === 0) return;
        const at = i % s.length;
        holder[key] = s.slice(0, at) + c + s.slice(at + 1);
      }),
    fc.constantFrom(...members).map((k) => (b: Record<string, unknown>) => { delete b[k]; }),
  );
  let verified = 0;
  fc.assert(fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), (muts) => {
    const b = clone(bundle) as unknown as Record<string, unknown>;
    for (const m of muts) m(b);
    if (!verifies(b)) return true;
    verified++;
    return JSON.stringify(Object.entries(b).sort()) === original; // only the unchanged bundle verifies
  }), { numRuns: 300, interruptAfterTimeLimit: 20_000, markInterruptAsFailure: false });
  t.pass(`${verified} runs left the bundle unchanged and verified`);
});

t.test('the size limit is computed without serializing: it equals the canonical length', async (t) => {
  const { canonicalize } = await import('../../src/canonical.js');
  for (const challenge of ['a'.repeat(16), payload.challenge, 'a'.repeat(MAX_CHALLENGE_LENGTH)]) {
    const b = { ...clone(bundle), challenge };
    t.ok(parseProofBundle(b), `challenge of ${challenge.length}`);
    t.ok(canonicalize(b).length <= MAX_BUNDLE_BYTES, 'a valid bundle is within the limit');
  }
  // Oversized signature halves are refused whatever their content (before any decoding).
  t.equal(parseProofBundle({ ...clone(bundle), sig: { ed25519: bundle.sig.ed25519, ml_dsa_65: 'A'.repeat(MAX_BUNDLE_BYTES) } }), null, 'oversized ml_dsa_65');
  t.equal(parseProofBundle({ ...clone(bundle), sig: { ed25519: 'A'.repeat(MAX_BUNDLE_BYTES), ml_dsa_65: bundle.sig.ml_dsa_65 } }), null, 'oversized ed25519');
  t.equal(parseProofBundle({ ...clone(bundle), sig: { ed25519: bundle.sig.ed25519, ml_dsa_65: 1 } }), null, 'non-string half');
  t.equal(parseProofBundle(Object.assign(Object.create({ inherited: 1 }) as object, clone(bundle))), null, 'not a plain object');
  t.ok(parseProofBundle(Object.assign(Object.create(null) as object, clone(bundle))), 'a null-prototype object is plain');
});

t.test('proofSignedBytes is the canonical JSON, on the direct path and off it', async (t) => {
  t.same(proofSignedBytes(payload), canonicalBytes(payload), 'a real payload (direct path)');
  fc.assert(fc.property(fc.record({
    challenge: fc.string({ maxLength: 20 }), aud: fc.string({ maxLength: 8 }), agent_id: fc.string({ unit: 'binary', maxLength: 8 }),
    cert_id: fc.constantFrom('cert-1', 'x"y', 'a\\b', 'é', '\u0000', '\u007f'), cert_sha256: fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), maxLength: 8 }), presented_at: fc.string({ maxLength: 8 }),
  }), (r) => {
    const p = { ...payload, ...r };
    return Buffer.from(proofSignedBytes(p)).equals(Buffer.from(canonicalBytes(p)));
  }), { numRuns: 500 });
  t.pass('500 payloads agree');
});
