/**
 * src/operation.ts and the bound bundle of src/proof.ts: strict parsing of
 * an operation (members, formats), the comparison with a verified request
 * (each member, a missing context member, the query hash), and a bound bundle: parsed with
 * its operation, signed over it (changing the operation breaks the
 * signature), sized with it, and unbound bundles unchanged.
 */
import t from 'tap';
import { parseOperation, operationMismatch } from '../../src/operation.js';
import type { BoundOperation } from '../../src/operation.js';
import { MAX_BUNDLE_BYTES, PROOF_DOMAIN, PROOF_TYPE, parseProofBundle, proofSignedBytes, signProof } from '../../src/proof.js';
import type { ProofPayload } from '../../src/proof.js';
import { createSigner, createVerifier, generateHybridKeyPair } from '../../src/crypto/hybrid.js';
import { canonicalBytes } from '../../src/canonical.js';

const SHA = 'b'.repeat(64);
const op: BoundOperation = { scope: 'payments:send', method: 'POST', path: '/v1/payments', body_sha256: SHA };

t.test('parseOperation accepts the documented shape and nothing else', async (t) => {
  t.same(parseOperation(op), { ok: true, value: op });
  t.same(parseOperation({ method: 'POST', tool: 'send_payment', body_sha256: SHA }), { ok: true, value: { method: 'POST', tool: 'send_payment', body_sha256: SHA } });
  t.same(parseOperation({ ...op, query_sha256: 'c'.repeat(64) }), { ok: true, value: { ...op, query_sha256: 'c'.repeat(64) } }, 'with the query hash');
  const bad: [unknown, string][] = [
    [null, ''], [[], ''], ['x', ''], [new Date(), ''],
    [{ ...op, extra: 1 }, 'extra'],
    [{ ...op, method: 'post' }, 'method'], [{ ...op, method: undefined }, 'method'], [{ ...op, method: 'P'.repeat(17) }, 'method'],
    [{ ...op, body_sha256: 'B'.repeat(64) }, 'body_sha256'], [{ ...op, body_sha256: 'b'.repeat(63) }, 'body_sha256'],
    [{ method: 'GET', body_sha256: SHA }, 'path'],
    [{ ...op, path: 'v1/payments' }, 'path'], [{ ...op, path: '/v1/../admin' }, 'path'], [{ ...op, path: '/v1/%2e%2e/admin' }, 'path'],
    [{ ...op, path: '/a//b' }, 'path'], [{ ...op, path: `/${'a'.repeat(2048)}` }, 'path'], [{ ...op, path: 7 }, 'path'],
    [{ ...op, tool: 'send payment' }, 'tool'], [{ ...op, tool: 't'.repeat(129) }, 'tool'], [{ ...op, tool: '' }, 'tool'],
    [{ ...op, scope: 'payments:*' }, 'scope'], [{ ...op, scope: 'nope' }, 'scope'],
    [{ ...op, query_sha256: 'Q'.repeat(64) }, 'query_sha256'], [{ ...op, query_sha256: '' }, 'query_sha256'], [{ ...op, query_sha256: 7 }, 'query_sha256'],
  ];
  for (const [input, member] of bad) {
    const r = parseOperation(input);
    t.equal(r.ok, false, `refused: ${JSON.stringify(input)?.slice(0, 80)}`);
    if (!r.ok) t.equal(r.member, member, `names ${member || 'the operation'}`);
  }
});

t.test('operationMismatch compares every member it binds', async (t) => {
  const ctx = { method: 'POST', path: '/v1/payments', body_sha256: SHA, amount: '5.00', currency: 'USD' };
  t.equal(operationMismatch(op, 'payments:send', ctx), null, 'the same operation');
  t.equal(operationMismatch(op, 'payments:send', { ...ctx, method: 'post' }), null, 'the context method in lower case (ASCII)');
  t.equal(operationMismatch(op, 'payments:refund', ctx), 'scope');
  t.equal(operationMismatch(op, 'payments:send', { ...ctx, method: 'PUT' }), 'method');
  t.equal(operationMismatch(op, 'payments:send', { ...ctx, method: 'poſt' }), 'method', 'no non-ASCII case folding');
  t.equal(operationMismatch(op, 'payments:send', { ...ctx, path: '/v1/payments/7' }), 'path');
  t.equal(operationMismatch(op, 'payments:send', { ...ctx, body_sha256: 'c'.repeat(64) }), 'body_sha256');
  t.equal(operationMismatch(op, 'payments:send', undefined), 'method', 'no context at all');
  const { path: _p, ...noPath } = ctx;
  t.equal(operationMismatch(op, 'payments:send', noPath), 'path', 'a missing context member is a mismatch');
  const { body_sha256: _b, ...noBody } = ctx;
  t.equal(operationMismatch(op, 'payments:send', noBody), 'body_sha256');
  const tool: BoundOperation = { method: 'POST', tool: 'send_payment', body_sha256: SHA };
  t.equal(operationMismatch(tool, 'payments:send', { method: 'POST', path: '/accounts/9', tool: 'send_payment', body_sha256: SHA }), null,
    'a tool binding does not compare the path (an MCP route may send the tool\'s resource)');
  t.equal(operationMismatch(tool, 'payments:send', { method: 'POST', tool: 'refund', body_sha256: SHA }), 'tool');
  t.equal(operationMismatch(tool, 'payments:send', { method: 'POST', body_sha256: SHA }), 'tool', 'no tool in the context');
  t.equal(operationMismatch({ method: 'GET', path: '/x', body_sha256: SHA }, 'data:read', { method: 'GET', path: '/x', body_sha256: SHA }), null, 'no scope bound: any scope');
});

t.test('operationMismatch: the query string, by its hash', async (t) => {
  const Q = 'c'.repeat(64);
  const ctx = { method: 'POST', path: '/v1/payments', body_sha256: SHA };
  t.equal(operationMismatch({ ...op, query_sha256: Q }, 'payments:send', { ...ctx, query_sha256: Q }), null, 'the same query');
  t.equal(operationMismatch({ ...op, query_sha256: Q }, 'payments:send', { ...ctx, query_sha256: 'd'.repeat(64) }), 'query_sha256', 'another query');
  t.equal(operationMismatch({ ...op, query_sha256: Q }, 'payments:send', ctx), 'query_sha256', 'bound to a query, sent without one');
  t.equal(operationMismatch(op, 'payments:send', { ...ctx, query_sha256: Q }), 'query_sha256', 'bound without a query, sent with one');
  t.equal(operationMismatch(op, 'payments:send', ctx), null, 'neither has a query');
  const tool: BoundOperation = { method: 'POST', tool: 'send_payment', body_sha256: SHA };
  t.equal(operationMismatch(tool, 'payments:send', { method: 'POST', tool: 'send_payment', body_sha256: SHA, query_sha256: Q }), 'query_sha256', 'a tool call too');
});

t.test('a bound bundle: parsed, signed over its operation, sized with it', async (t) => {
  const keys = generateHybridKeyPair();
  const signer = createSigner(keys.secretSeed);
  const verifier = createVerifier(keys.publicKey);
  const payload: ProofPayload = {
    v: 1, typ: PROOF_TYPE, challenge: 'Q2hhbGxlbmdlLXZhbHVlLTAxMjM0NTY3ODlhYmNkZWZnaA', aud: '0b6c5a53-4f3e-4c4b-9f1e-2a1c3d4e5f60',
    agent_id: '1c7d6b64-5a4f-4d5c-8a2f-3b2d4e5f6a71', cert_id: 'cert-2d8e7c75-6b5a-4e6d-9b3a-4c3e5f6a7b82',
    cert_sha256: 'a'.repeat(64), presented_at: '2030-01-04T09:30:00.123Z', operation: op,
  };
  const bundle = JSON.parse(JSON.stringify(signProof(payload, signer))) as Record<string, unknown>;
  const p = parseProofBundle(bundle);
  t.ok(p, 'parses');
  t.same(p!.payload.operation, op);
  t.same(proofSignedBytes(p!.payload), canonicalBytes(payload), 'the operation is in the signed bytes');
  t.ok(verifier.verify(PROOF_DOMAIN, proofSignedBytes(p!.payload), p!.signature), 'verifies');
  const other = parseProofBundle({ ...bundle, operation: { ...op, path: '/v1/admin' } });
  t.ok(other, 'another operation parses');
  t.notOk(verifier.verify(PROOF_DOMAIN, proofSignedBytes(other!.payload), other!.signature), 'but its signature does not verify');
  const { operation: _o, ...unbound } = bundle;
  const u = parseProofBundle(unbound);
  t.ok(u, 'the bundle without its operation parses (as an unbound one)');
  t.notOk(verifier.verify(PROOF_DOMAIN, proofSignedBytes(u!.payload), u!.signature), 'and does not verify: removing the binding breaks the signature');
  t.equal(parseProofBundle({ ...bundle, operation: { ...op, extra: 'x' } }), null, 'a malformed operation: not a bundle');
  t.equal(parseProofBundle({ ...bundle, operation: null }), null);
  const long = { ...op, path: `/${'p'.repeat(2000)}` };
  const longPayload = { ...payload, operation: long };
  t.ok(parseProofBundle(JSON.parse(JSON.stringify(signProof(longPayload, signer)))), 'a 2 KB path still fits');
  t.ok(canonicalBytes(signProof(longPayload, signer)).length <= MAX_BUNDLE_BYTES);
});
