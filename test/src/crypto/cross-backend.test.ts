/**
 * Cross-backend test: signatures made with the native ML-DSA backend (node:crypto, run in a
 * Node 24 child from the `node@24` devDependency) must verify under noble in-process, and
 * vice versa; the same seed must give the same public key under both; and the Wycheproof
 * ML-DSA-65 vectors must pass under native. A missing Node 24 binary FAILS the test.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import {
  createSigner,
  createVerifier,
  publicKeyFromJson,
  publicKeyToJson,
  setMlDsaBackend,
  signatureFromJson,
  signatureToJson,
} from '../../../src/crypto/hybrid.js';
import { NATIVE_CHILD, NODE24_BIN, PROJECT_ROOT, toHex } from './fixtures/helpers.js';
import { EXPECTED_COUNTS } from './fixtures/kat.js';
import type { ChildRequest, ChildResponse } from './fixtures/native-child.js';

const DOMAIN = 'cross-backend.test';
const message = new TextEncoder().encode('the same message under two ML-DSA implementations');
const seeds = [
  new Uint8Array(64).map((_, i) => i),
  new Uint8Array(64).fill(0xa5),
  new Uint8Array(randomBytes(64)),
];

function runChild(req: ChildRequest): ChildResponse {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const r = spawnSync(NODE24_BIN, ['--import', 'tsx', NATIVE_CHILD, '--stdin'], {
    cwd: PROJECT_ROOT,
    input: JSON.stringify(req),
    encoding: 'utf8',
    timeout: 20_000,
    maxBuffer: 16 * 1024 * 1024,
    env,
  });
  if (r.error !== undefined) throw r.error;
  if (r.status !== 0) throw new Error(`native child exited ${String(r.status)} (${String(r.signal)}): ${r.stderr}`);
  return JSON.parse(r.stdout) as ChildResponse;
}

t.test('Node 24 binary from the node@24 devDependency is present', async (tt) => {
  tt.ok(existsSync(NODE24_BIN), `${NODE24_BIN} exists (run npm ci to install devDependencies)`);
});

t.test('native (Node 24 child) <-> noble (in-process)', async (tt) => {
  if (!existsSync(NODE24_BIN)) {
    tt.fail('Node 24 binary missing: cannot run the native backend');
    return;
  }
  setMlDsaBackend('noble');
  const nobleSigners = seeds.map((s) => createSigner(s));
  const nobleSigs = nobleSigners.map((s) => s.sign(DOMAIN, message));
  const tampered = signatureToJson(nobleSigs[0]!);
  tampered.ml_dsa_65 = (tampered.ml_dsa_65[0] === 'A' ? 'B' : 'A') + tampered.ml_dsa_65.slice(1);

  const verify = nobleSigners.map((s, i) => ({
    publicKey: publicKeyToJson(s.publicKey),
    domain: DOMAIN,
    message: toHex(message),
    signature: signatureToJson(nobleSigs[i]!),
  }));
  verify.push({ ...verify[0]!, signature: tampered }); // must be rejected natively
  verify.push({ ...verify[0]!, domain: 'other-domain' }); // must be rejected natively

  const started = Date.now();
  const res = runChild({ sign: { seeds: seeds.map(toHex), domain: DOMAIN, message: toHex(message) }, verify, kat: true });
  tt.comment(`native child: ${res.version}, backend ${res.backend}, ${Date.now() - started} ms`);
  tt.match(res.version, /^v(2[4-9]|[3-9]\d)\./, 'child runs Node >= 24');
  tt.equal(res.backend, 'native', 'child used the native backend');

  // noble-made signatures verify natively; tampered / wrong-domain ones do not.
  tt.same(res.verified, [true, true, true, false, false], 'native verdicts on noble-made signatures');

  // Same seed -> same public key; native-made signatures verify under noble.
  tt.equal(res.signed.length, seeds.length);
  res.signed.forEach((s, i) => {
    tt.same(s.publicKey, publicKeyToJson(nobleSigners[i]!.publicKey), `seed ${i}: same public key under both backends`);
    const pk = publicKeyFromJson(s.publicKey);
    const sig = signatureFromJson(s.signature);
    tt.ok(pk !== null && sig !== null, `seed ${i}: child output parses`);
    if (pk === null || sig === null) return;
    const v = createVerifier(pk);
    tt.equal(v.verify(DOMAIN, message, sig), true, `seed ${i}: native signature verifies under noble`);
    tt.equal(v.verify('other-domain', message, sig), false, `seed ${i}: ...but not under another domain`);
  });

  // Wycheproof under native.
  tt.equal(res.kat.length, 2, 'child ran both ML-DSA KAT files');
  for (const rep of res.kat) {
    const expected = EXPECTED_COUNTS[rep.file as keyof typeof EXPECTED_COUNTS];
    tt.equal(rep.count, expected, `native ${rep.file}: read all ${expected} vectors`);
    tt.same(rep.failures, [], `native ${rep.file}: every vector gives its expected result`);
  }
});
