/**
 * Sub-delegation links checked offline (src/chain.ts): a child signed by its
 * parent's agent, naming the parent, within its right and no wider, holds;
 * each way a link can be wrong fails with its fault; the optional payload
 * members are shape-checked (src/certificate.ts).
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { CERT_TYPE, certificateHash, certificateShapeError, signCertificate } from '../../src/certificate.js';
import type { CertificatePayload, DelegationCertificate } from '../../src/certificate.js';
import { checkLink, delegationRightOf, depthOf } from '../../src/chain.js';
import { createSigner, generateHybridKeyPair, publicKeyToJson } from '../../src/crypto/hybrid.js';

const root = generateHybridKeyPair();
const parentAgent = generateHybridKeyPair();
const childAgent = generateHybridKeyPair();
const stranger = generateHybridKeyPair();
const T0 = Date.UTC(2030, 0, 1);
const account = randomUUID();
const connection = randomUUID();
const parentAgentId = randomUUID();

const parent = signCertificate({
  v: 1, typ: CERT_TYPE, cert_id: `cert-${randomUUID()}`, request_id: randomUUID(),
  issuer: { account_id: account, public_key: publicKeyToJson(root.publicKey) },
  subject: { agent_id: parentAgentId, public_key: publicKeyToJson(parentAgent.publicKey) },
  connection_id: connection, scopes: ['data:read', 'payments:send'],
  constraints: { max_amount: { amount: '50.00', currency: 'USD' } },
  issued_at: new Date(T0).toISOString(), expires_at: new Date(T0 + 3_600_000).toISOString(), max_delegation_depth: 2,
}, createSigner(root.secretSeed));

/** A child payload of `parent` with `over` applied. */
function childPayload(over: Partial<CertificatePayload> = {}): CertificatePayload {
  return {
    v: 1, typ: CERT_TYPE, cert_id: `cert-${randomUUID()}`, request_id: randomUUID(),
    issuer: { account_id: account, agent_id: parentAgentId, public_key: publicKeyToJson(parentAgent.publicKey) },
    subject: { agent_id: randomUUID(), public_key: publicKeyToJson(childAgent.publicKey) },
    connection_id: connection, scopes: ['payments:send'],
    constraints: { max_amount: { amount: '20.00', currency: 'USD' } },
    issued_at: new Date(T0 + 1000).toISOString(), expires_at: new Date(T0 + 600_000).toISOString(),
    max_delegation_depth: 1,
    parent: { cert_id: parent.payload.cert_id, cert_sha256: certificateHash(parent), depth: 1 },
    ...over,
  };
}
const signed = (p: CertificatePayload, by = parentAgent): DelegationCertificate =>
  signCertificate(p, createSigner(by.secretSeed));
const fault = (c: unknown, p: DelegationCertificate = parent): string | undefined => {
  const r = checkLink(c, p);
  return r.ok ? undefined : r.fault;
};

t.test('a narrower child signed by the parent agent holds', async (t) => {
  const child = signed(childPayload());
  t.equal(certificateShapeError(child), null);
  const r = checkLink(child, parent);
  t.ok(r.ok);
  t.equal(depthOf(child.payload), 1);
  t.equal(depthOf(parent.payload), 0);
  t.equal(delegationRightOf(child.payload), 1);
  const { max_delegation_depth: _, ...noRight } = childPayload();
  t.ok(checkLink(signed(noRight), parent).ok, 'a child without a right of its own');
});

t.test('each way a link is wrong fails with its fault', async (t) => {
  const ref = { cert_id: parent.payload.cert_id, cert_sha256: certificateHash(parent), depth: 1 };
  const cases: [string, unknown, string][] = [
    ['signed by another key', signed(childPayload(), stranger), 'bad_signature'],
    ['signed by the account root', signed(childPayload(), root), 'bad_signature'],
    ['naming another key as its issuer', signed(childPayload({ issuer: { account_id: account, agent_id: parentAgentId,
      public_key: publicKeyToJson(stranger.publicKey) } }), stranger), 'wrong_issuer'],
    ['another parent id', signed(childPayload({ parent: { ...ref, cert_id: `cert-${randomUUID()}` } })),
      'parent_mismatch'],
    ['another parent hash', signed(childPayload({ parent: { ...ref, cert_sha256: 'a'.repeat(64) } })),
      'parent_mismatch'],
    ['a wrong depth', signed(childPayload({ parent: { ...ref, depth: 2 } })), 'parent_mismatch'],
    ['another issuer agent id', signed(childPayload({ issuer: { account_id: account, agent_id: randomUUID(),
      public_key: publicKeyToJson(parentAgent.publicKey) } })), 'wrong_issuer'],
    ['another account', signed(childPayload({ issuer: { account_id: randomUUID(), agent_id: parentAgentId,
      public_key: publicKeyToJson(parentAgent.publicKey) } })), 'wrong_issuer'],
    ['another connection', signed(childPayload({ connection_id: randomUUID() })), 'wrong_issuer'],
    ['a right as large as the parent\'s', signed(childPayload({ max_delegation_depth: 2 })), 'no_right'],
    ['a wider scope', signed(childPayload({ scopes: ['data:read', 'data:write'] })), 'widens'],
    ['a larger amount', signed(childPayload({ constraints: { max_amount: { amount: '60.00', currency: 'USD' } } })),
      'widens'],
    ['a later expiry', signed(childPayload({ expires_at: new Date(T0 + 7_200_000).toISOString() })), 'widens'],
    ['no parent', signed((({ parent: _p, ...rest }) => rest)(childPayload()) as CertificatePayload), 'malformed'],
  ];
  for (const [what, cert, want] of cases) t.equal(fault(cert), want, what);
  const child = signed(childPayload());
  const tampered = structuredClone(child);
  tampered.payload.subject.agent_id = randomUUID();
  t.equal(fault(tampered), 'bad_signature', 'a changed payload');
  const { max_delegation_depth: _, ...noRight } = parent.payload;
  const rightless = signCertificate(noRight as CertificatePayload, createSigner(root.secretSeed));
  const { max_delegation_depth: _r, ...plain } = childPayload({
    parent: { cert_id: rightless.payload.cert_id, cert_sha256: certificateHash(rightless), depth: 1 } });
  const under = signed(plain);
  t.equal(fault(JSON.parse(JSON.stringify(under)), rightless), 'no_right', 'a parent with no right to delegate');
});

t.test('the optional members are shape-checked', async (t) => {
  const p = childPayload();
  const bad = (over: Record<string, unknown>): string | null =>
    certificateShapeError({ ...signed(p), payload: { ...p, ...over } });
  t.equal(bad({ max_delegation_depth: 0 }), 'max_delegation_depth');
  t.equal(bad({ max_delegation_depth: 9 }), 'max_delegation_depth');
  t.equal(bad({ parent: { ...p.parent, depth: 9 } }), 'parent');
  t.equal(bad({ parent: { ...p.parent, extra: 1 } }), 'parent');
  t.equal(bad({ parent: { ...p.parent, cert_sha256: 'xyz' } }), 'parent');
  t.equal(bad({ parent: { ...p.parent, cert_id: p.cert_id } }), 'parent', 'not its own parent');
  t.equal(bad({ issuer: { account_id: account, public_key: p.issuer.public_key } }), 'issuer',
    'a sub-delegated certificate names the issuing agent');
  t.equal(certificateShapeError({ ...parent, payload: { ...parent.payload, issuer: { ...parent.payload.issuer,
    agent_id: parentAgentId } } }), 'issuer', 'a root certificate names none');
});
