/** Delegation certificates: signing, offline verification, and the strict shape check. */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import {
  CERT_DOMAIN, CERT_TYPE, certificateHash, certificateShapeError, signCertificate, verifyCertificate,
} from '../../src/certificate.js';
import type { CertificatePayload, DelegationCertificate } from '../../src/certificate.js';
import { canonicalize } from '../../src/canonical.js';
import { createSigner, createVerifier, generateHybridKeyPair, publicKeyToJson, signatureToJson } from '../../src/crypto/hybrid.js';

const root = generateHybridKeyPair();
const agent = generateHybridKeyPair();
const otherRoot = generateHybridKeyPair();
const rootSigner = createSigner(root.secretSeed);
const T0 = Date.UTC(2030, 0, 1);

function payload(over: Partial<CertificatePayload> = {}): CertificatePayload {
  return {
    v: 1, typ: CERT_TYPE, cert_id: `cert-${randomUUID()}`, request_id: randomUUID(),
    issuer: { account_id: randomUUID(), public_key: publicKeyToJson(root.publicKey) },
    subject: { agent_id: randomUUID(), public_key: publicKeyToJson(agent.publicKey) },
    connection_id: randomUUID(), scopes: ['custom:crm', 'data:read'],
    constraints: { methods: ['GET'], max_amount: { amount: '5.00', currency: 'EUR' } },
    issued_at: new Date(T0).toISOString(), expires_at: new Date(T0 + 3_600_000).toISOString(),
    ...over,
  };
}

const good = signCertificate(payload(), rootSigner);
/** A deep copy of the good certificate with `edit` applied. */
function edited(edit: (c: any) => void): unknown { // eslint-disable-line @typescript-eslint/no-explicit-any
  const c = JSON.parse(JSON.stringify(good));
  edit(c);
  return c;
}

t.test('a signed certificate verifies offline with the root public key', async (t) => {
  t.equal(certificateShapeError(good), null);
  const r = verifyCertificate(good, root.publicKey, T0);
  t.equal(r.ok, true);
  if (r.ok) t.equal(r.expired, false);
  t.equal(verifyCertificate(good, createVerifier(root.publicKey)).ok, true, 'with a prepared verifier');
  const viaJson = JSON.parse(JSON.stringify(good)) as DelegationCertificate;
  t.equal(verifyCertificate(viaJson, root.publicKey).ok, true, 'after a JSON round trip');
  const reordered = { signature: viaJson.signature, payload: Object.fromEntries(Object.entries(viaJson.payload).reverse()) };
  t.equal(verifyCertificate(reordered, root.publicKey).ok, true, 'member order does not matter (canonical signing)');
  const at = verifyCertificate(good, root.publicKey, T0 + 3_600_000);
  t.equal(at.ok && at.expired, true, 'expired at expires_at');
  const never = signCertificate(payload({ expires_at: null, constraints: null }), rootSigner);
  const n = verifyCertificate(never, root.publicKey, T0 + 1e12);
  t.equal(n.ok && n.expired, false, 'no expiry never expires');
  t.match(certificateHash(good), /^[0-9a-f]{64}$/);
  t.equal(certificateHash(viaJson), certificateHash(good), 'the hash is of the canonical form');
});

t.test('verification refusals', async (t) => {
  t.same(verifyCertificate(good, otherRoot.publicKey), { ok: false, reason: 'wrong_issuer' }, 'another root key');
  const byOther = signCertificate(payload(), createSigner(otherRoot.secretSeed));
  t.same(verifyCertificate(byOther, root.publicKey), { ok: false, reason: 'bad_signature' }, 'claims root as issuer, signed by another key');
  t.same(verifyCertificate(edited((c) => { c.payload.scopes = ['data:read', 'payments:send']; }), root.publicKey), { ok: false, reason: 'bad_signature' }, 'scopes widened');
  t.same(verifyCertificate(edited((c) => { c.payload.constraints = null; }), root.publicKey), { ok: false, reason: 'bad_signature' }, 'constraints dropped');
  t.same(verifyCertificate(edited((c) => { c.payload.expires_at = null; }), root.publicKey), { ok: false, reason: 'bad_signature' }, 'expiry dropped');
  // Halves from two different signatures.
  const other = signCertificate(payload(), rootSigner);
  t.same(verifyCertificate(edited((c) => { c.signature.ml_dsa_65 = other.signature.ml_dsa_65; }), root.publicKey), { ok: false, reason: 'bad_signature' }, 'ML-DSA half of another certificate');
  t.same(verifyCertificate(edited((c) => { c.signature.ed25519 = other.signature.ed25519; }), root.publicKey), { ok: false, reason: 'bad_signature' }, 'Ed25519 half of another certificate');
  // The same payload signed under another domain.
  const wrongDomain = { payload: good.payload, signature: signatureToJson(rootSigner.sign('proof', new TextEncoder().encode(canonicalize(good.payload)))) };
  t.not(CERT_DOMAIN, 'proof');
  t.same(verifyCertificate(wrongDomain, root.publicKey), { ok: false, reason: 'bad_signature' }, 'signature of another domain');
  t.same(verifyCertificate('{}', root.publicKey), { ok: false, reason: 'malformed' });
  t.same(verifyCertificate(null, root.publicKey), { ok: false, reason: 'malformed' });
});

t.test('shape errors', async (t) => {
  const cases: [string, unknown, string][] = [
    ['not an object', 'cert', 'certificate must be {payload, signature}'],
    ['array', [good.payload, good.signature], 'certificate must be {payload, signature}'],
    ['extra top member', edited((c) => { c.extra = 1; }), 'certificate must be {payload, signature}'],
    ['no signature', edited((c) => { delete c.signature; }), 'certificate must be {payload, signature}'],
    ['payload missing member', edited((c) => { delete c.payload.request_id; }), 'payload members'],
    ['payload extra member', edited((c) => { c.payload.admin = true; }), 'payload members'],
    ['version 2', edited((c) => { c.payload.v = 2; }), 'version or type'],
    ['version as string', edited((c) => { c.payload.v = '1'; }), 'version or type'],
    ['other type', edited((c) => { c.payload.typ = 'agent-authz.proof'; }), 'version or type'],
    ['cert_id without prefix', edited((c) => { c.payload.cert_id = randomUUID(); }), 'cert_id'],
    ['cert_id uppercase', edited((c) => { c.payload.cert_id = c.payload.cert_id.toUpperCase().replace('CERT-', 'cert-'); }), 'cert_id'],
    ['cert_id not a UUID', edited((c) => { c.payload.cert_id = 'cert-1'; }), 'cert_id'],
    ['request_id', edited((c) => { c.payload.request_id = 'r1'; }), 'request_id'],
    ['connection_id', edited((c) => { c.payload.connection_id = 42; }), 'connection_id'],
    ['issuer extra member', edited((c) => { c.payload.issuer.name = 'x'; }), 'issuer'],
    ['issuer account_id not a string', edited((c) => { c.payload.issuer.account_id = 1; }), 'issuer'],
    ['issuer key wrong alg', edited((c) => { c.payload.issuer.public_key.alg = 'ed25519'; }), 'issuer'],
    ['issuer key short', edited((c) => { c.payload.issuer.public_key.ed25519 = c.payload.issuer.public_key.ed25519.slice(0, 40); }), 'issuer'],
    ['subject key missing half', edited((c) => { delete c.payload.subject.public_key.ml_dsa_65; }), 'subject'],
    ['subject agent_id missing', edited((c) => { delete c.payload.subject.agent_id; }), 'subject'],
    ['scopes empty', edited((c) => { c.payload.scopes = []; }), 'scopes'],
    ['scopes wildcard', edited((c) => { c.payload.scopes = ['data:*']; }), 'scopes'],
    ['scopes star', edited((c) => { c.payload.scopes = ['*']; }), 'scopes'],
    ['scopes non-string', edited((c) => { c.payload.scopes = [1]; }), 'scopes'],
    ['scopes not an array', edited((c) => { c.payload.scopes = 'data:read'; }), 'scopes'],
    ['constraints unknown kind', edited((c) => { c.payload.constraints = { anything: true }; }), 'constraints'],
    ['constraints array', edited((c) => { c.payload.constraints = []; }), 'constraints'],
    ['constraints bad amount', edited((c) => { c.payload.constraints = { max_amount: { amount: '1e3', currency: 'EUR' } }; }), 'constraints'],
    ['issued_at without ms', edited((c) => { c.payload.issued_at = '2030-01-01T00:00:00Z'; }), 'issued_at'],
    ['issued_at with offset', edited((c) => { c.payload.issued_at = '2030-01-01T00:00:00.000+00:00'; }), 'issued_at'],
    ['issued_at number', edited((c) => { c.payload.issued_at = T0; }), 'issued_at'],
    ['expires_at garbage', edited((c) => { c.payload.expires_at = 'never'; }), 'expires_at'],
    ['expires_at number', edited((c) => { c.payload.expires_at = T0; }), 'expires_at'],
    ['signature missing half', edited((c) => { delete c.signature.ml_dsa_65; }), 'signature'],
    ['signature extra member', edited((c) => { c.signature.rsa = 'x'; }), 'signature'],
    ['signature short', edited((c) => { c.signature.ed25519 = c.signature.ed25519.slice(0, 80); }), 'signature'],
    ['signature padded base64', edited((c) => { c.signature.ed25519 += '=='; }), 'signature'],
    ['signature standard base64', edited((c) => { c.signature.ed25519 = Buffer.from(c.signature.ed25519, 'base64url').toString('base64').replace(/=+$/, '').replace(/[A-Za-z0-9]/, '+'); }), 'signature'],
  ];
  for (const [label, cert, reason] of cases) {
    t.equal(certificateShapeError(cert), reason, `${label}: ${reason}`);
    t.same(verifyCertificate(cert, root.publicKey), { ok: false, reason: 'malformed' }, `${label}: malformed`);
  }
  const noExpiry = edited((c) => { c.payload.expires_at = null; c.payload.constraints = null; });
  t.equal(certificateShapeError(noExpiry), null, 'null expiry and constraints are well-formed');
});

t.test('signing refuses payloads outside canonical JSON', async (t) => {
  t.throws(() => signCertificate({ ...payload(), constraints: { max_amount: { amount: 1.5 } } } as never, rootSigner), TypeError);
  t.throws(() => signCertificate({ ...payload(), expires_at: undefined } as never, rootSigner), TypeError);
});
