/**
 * Tampered bundles: every member changed, signature halves altered,
 * stripped, emptied or swapped, members added or removed. None may allow;
 * each gets the exact 400 code of the stage that catches it.
 */
import t from 'tap';
import { specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Client, Flow, TestSidecar } from '../../helpers/sidecar.js';
import { auditAll, bundleFor, clone, expectError, flipB64, verify } from './helpers.js';
import type { Bundle } from './helpers.js';

let sc: TestSidecar;
let a: Flow;
let b: Flow;
t.before(async () => {
  sc = await startSidecar();
  a = await specFlow(sc, 'tamper-a@example.com', { approve: ['data:read'] });
  b = await specFlow(sc, 'tamper-b@example.com', { approve: ['data:read'] });
});
t.teardown(async () => { await sc.close(); });

/** ed25519 group order L. */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

/** S + L in the ed25519 signature (a non-canonical S that verifies on lax implementations). */
function malleate(sigB64: string): string {
  const raw = Buffer.from(sigB64, 'base64url');
  let s = 0n;
  for (let i = 31; i >= 0; i--) s = (s << 8n) | BigInt(raw[32 + i]!);
  s += L;
  for (let i = 0; i < 32; i++) { raw[32 + i] = Number(s & 0xffn); s >>= 8n; }
  return raw.toString('base64url');
}

const randomUuid = (): string => crypto.randomUUID();
const isoShift = (iso: string, ms: number): string => new Date(Date.parse(iso) + ms).toISOString();

interface Case {
  name: string;
  code: 'invalid_proof' | 'invalid_signature' | 'invalid_challenge' | 'proof_stale' | 'invalid_request';
  /** Mutates a copy of a fresh bundle; may use another fresh bundle `other` of the same agent and one `foreign` of B's agent. */
  mutate: (x: Bundle, other: Bundle, foreign: Bundle) => Bundle;
  /** Who verifies (default: A's platform). */
  by?: () => Client;
}

const MEMBERS = ['v', 'typ', 'challenge', 'aud', 'agent_id', 'cert_id', 'cert_sha256', 'presented_at', 'sig'];

const cases: Case[] = [
  { name: 'v: 2', code: 'invalid_proof', mutate: (x) => ({ ...x, v: 2 }) },
  { name: 'v: "1"', code: 'invalid_proof', mutate: (x) => ({ ...x, v: '1' }) },
  { name: 'v: 1.5', code: 'invalid_proof', mutate: (x) => ({ ...x, v: 1.5 }) },
  { name: 'typ changed', code: 'invalid_proof', mutate: (x) => ({ ...x, typ: 'agent-authz.proof2' }) },
  { name: 'typ: certificate type', code: 'invalid_proof', mutate: (x) => ({ ...x, typ: 'agent-authz.delegation-certificate' }) },
  { name: 'challenge: unknown, well-formed', code: 'invalid_challenge', mutate: (x) => ({ ...x, challenge: flipB64(x.challenge) }) },
  { name: 'challenge: malformed', code: 'invalid_proof', mutate: (x) => ({ ...x, challenge: 'abc' }) },
  { name: 'challenge: another live presented challenge', code: 'invalid_signature', mutate: (x, o) => ({ ...x, challenge: o.challenge }) },
  { name: 'aud: random connection', code: 'invalid_challenge', mutate: (x) => ({ ...x, aud: randomUuid() }) },
  { name: 'aud: B\'s connection, verified by A', code: 'invalid_challenge', mutate: (x) => ({ ...x, aud: b.reg.connection_id }) },
  { name: 'aud: B\'s connection, verified by B', code: 'invalid_challenge', mutate: (x) => ({ ...x, aud: b.reg.connection_id }), by: () => b.platform },
  { name: 'aud: uppercase', code: 'invalid_proof', mutate: (x) => ({ ...x, aud: String(x.aud).toUpperCase() }) },
  { name: 'agent_id: random', code: 'invalid_proof', mutate: (x) => ({ ...x, agent_id: randomUuid() }) },
  { name: 'agent_id: B\'s agent', code: 'invalid_proof', mutate: (x) => ({ ...x, agent_id: b.agentId }) },
  { name: 'cert_id: random', code: 'invalid_proof', mutate: (x) => ({ ...x, cert_id: `cert-${randomUuid()}` }) },
  { name: 'cert_id: B\'s certificate', code: 'invalid_proof', mutate: (x) => ({ ...x, cert_id: b.certId }) },
  { name: 'cert_id: without prefix', code: 'invalid_proof', mutate: (x) => ({ ...x, cert_id: String(x.cert_id).slice(5) }) },
  {
    // B's certificate was issued for B's connection: refused before any signature work.
    name: 'agent_id, cert_id, cert_sha256 all B\'s', code: 'invalid_proof',
    mutate: (x, _o, f) => ({ ...x, agent_id: f.agent_id, cert_id: f.cert_id, cert_sha256: f.cert_sha256 }),
  },
  { name: 'cert_sha256: one hex digit changed', code: 'invalid_proof', mutate: (x) => ({ ...x, cert_sha256: (x.cert_sha256[0] === '0' ? '1' : '0') + x.cert_sha256.slice(1) }) },
  { name: 'cert_sha256: uppercase', code: 'invalid_proof', mutate: (x) => ({ ...x, cert_sha256: String(x.cert_sha256).toUpperCase() === x.cert_sha256 ? 'G' + x.cert_sha256.slice(1) : String(x.cert_sha256).toUpperCase() }) },
  { name: 'presented_at: +1 ms', code: 'invalid_signature', mutate: (x) => ({ ...x, presented_at: isoShift(x.presented_at, 1) }) },
  { name: 'presented_at: -1 ms (before the challenge)', code: 'proof_stale', mutate: (x) => ({ ...x, presented_at: isoShift(x.presented_at, -1) }) },
  { name: 'presented_at: a day earlier', code: 'proof_stale', mutate: (x) => ({ ...x, presented_at: isoShift(x.presented_at, -86_400_000) }) },
  { name: 'presented_at: 10 s in the future', code: 'proof_stale', mutate: (x) => ({ ...x, presented_at: isoShift(x.presented_at, 10_000) }) },
  { name: 'presented_at: no milliseconds', code: 'invalid_proof', mutate: (x) => ({ ...x, presented_at: String(x.presented_at).replace(/\.\d{3}Z$/, 'Z') }) },
  { name: 'presented_at: impossible date', code: 'invalid_proof', mutate: (x) => ({ ...x, presented_at: '2030-02-30T00:00:00.000Z' }) },
  { name: 'presented_at: a number', code: 'invalid_proof', mutate: (x) => ({ ...x, presented_at: Date.parse(x.presented_at) }) },
  { name: 'sig.ed25519 altered', code: 'invalid_signature', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: flipB64(x.sig.ed25519) } }) },
  { name: 'sig.ml_dsa_65 altered', code: 'invalid_signature', mutate: (x) => ({ ...x, sig: { ...x.sig, ml_dsa_65: flipB64(x.sig.ml_dsa_65) } }) },
  { name: 'sig.ml_dsa_65 altered near the end', code: 'invalid_signature', mutate: (x) => ({ ...x, sig: { ...x.sig, ml_dsa_65: flipB64(x.sig.ml_dsa_65, x.sig.ml_dsa_65.length - 10) } }) },
  { name: 'sig.ed25519 S + L (malleated)', code: 'invalid_signature', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: malleate(x.sig.ed25519) } }) },
  { name: 'sig.ed25519 all zero', code: 'invalid_signature', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: Buffer.alloc(64).toString('base64url') } }) },
  { name: 'sig.ed25519 stripped', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ml_dsa_65: x.sig.ml_dsa_65 } }) },
  { name: 'sig.ml_dsa_65 stripped', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ed25519: x.sig.ed25519 } }) },
  { name: 'sig.ed25519 empty', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: '' } }) },
  { name: 'sig.ml_dsa_65 empty', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ...x.sig, ml_dsa_65: '' } }) },
  { name: 'sig halves swapped', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ed25519: x.sig.ml_dsa_65, ml_dsa_65: x.sig.ed25519 } }) },
  { name: 'sig.ed25519 padded base64', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: `${x.sig.ed25519}==` } }) },
  { name: 'sig.ed25519 standard base64', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: Buffer.from(x.sig.ed25519, 'base64url').toString('base64') } }) },
  { name: 'sig.ed25519 truncated', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ...x.sig, ed25519: x.sig.ed25519.slice(0, -4) } }) },
  { name: 'sig extra member', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: { ...x.sig, alg: 'ed25519' } }) },
  { name: 'sig: null', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: null }) },
  { name: 'sig: a string', code: 'invalid_proof', mutate: (x) => ({ ...x, sig: x.sig.ed25519 }) },
  { name: 'sig: another bundle\'s signature', code: 'invalid_signature', mutate: (x, o) => ({ ...x, sig: o.sig }) },
  { name: 'sig: ed25519 half from another bundle', code: 'invalid_signature', mutate: (x, o) => ({ ...x, sig: { ...x.sig, ed25519: o.sig.ed25519 } }) },
  { name: 'sig: ml_dsa_65 half from another bundle', code: 'invalid_signature', mutate: (x, o) => ({ ...x, sig: { ...x.sig, ml_dsa_65: o.sig.ml_dsa_65 } }) },
  { name: 'sig: B\'s agent signature', code: 'invalid_signature', mutate: (x, _o, f) => ({ ...x, sig: f.sig }) },
  { name: 'extra member', code: 'invalid_proof', mutate: (x) => ({ ...x, scope: 'data:write' }) },
  // The JSON body parser refuses __proto__ keys outright (protoAction 'error').
  { name: 'extra __proto__ member', code: 'invalid_request', mutate: (x) => JSON.parse(JSON.stringify(x).replace(/^\{/, '{"__proto__":{"v":1},')) as Bundle },
  { name: 'extra member, one member removed', code: 'invalid_proof', mutate: (x) => { const y: Bundle = { ...x, extra: 1 }; delete y.v; return y; } },
  ...MEMBERS.map((m): Case => ({ name: `${m} missing`, code: 'invalid_proof', mutate: (x) => { const y = { ...x }; delete y[m]; return y; } })),
  ...MEMBERS.map((m): Case => ({ name: `${m}: null`, code: 'invalid_proof', mutate: (x) => ({ ...x, [m]: null }) })),
];

t.test('every tampering is refused with its exact code, never allowed', async (t) => {
  const foreign = await bundleFor(b); // B's agent and audience: a real bundle of another agent
  for (const c of cases) {
    const x = await bundleFor(a);
    const other = await bundleFor(a);
    const tampered = c.mutate(clone(x), clone(other), clone(foreign));
    t.not(JSON.stringify(tampered), JSON.stringify(x), `${c.name}: the bundle changed`);
    const r = await verify(c.by ? c.by() : a.platform, tampered, 'data:read');
    expectError(t, r, 400, c.code, c.name);
  }
  const verified = [...await auditAll(a.user, 'event_type=proof.verified'), ...await auditAll(b.user, 'event_type=proof.verified')];
  t.equal(verified.length, 0, 'no allow was ever recorded');
  const rejected = await auditAll(a.user, 'event_type=proof.rejected');
  t.equal(rejected.length, 0, '400s leave no decision rows');
});

t.test('the untampered bundle still verifies after parse-level tampering attempts', async (t) => {
  const x = await bundleFor(a);
  expectError(t, await verify(a.platform, { ...x, v: 2 }, 'data:read'), 400, 'invalid_proof');
  expectError(t, await verify(a.platform, { ...x, sig: { ed25519: x.sig.ed25519 } }, 'data:read'), 400, 'invalid_proof');
  expectError(t, await verify(a.platform, { ...x, aud: randomUuid() }, 'data:read'), 400, 'invalid_challenge');
  const r = await verify(a.platform, x, 'data:read');
  t.equal(r.body?.decision, 'allow', 'a malformed copy does not spend the real challenge');
});
