/**
 * Wycheproof known-answer tests for the raw primitives, in-process: Ed25519 (node:crypto),
 * ML-DSA-65 under noble always, and under native when this runtime has it. (The
 * cross-backend test runs the native backend in a Node 24 child regardless.)
 */
import t, { type Test } from 'tap';
import { detectMlDsaBackend, type MlDsaBackendName } from '../../../src/crypto/backend.js';
import { EXPECTED_COUNTS, runEd25519Kat, runMlDsaSignSeedKat, runMlDsaVerifyKat, type KatReport } from './fixtures/kat.js';

function check(tt: Test, rep: KatReport): void {
  const expected = EXPECTED_COUNTS[rep.file as keyof typeof EXPECTED_COUNTS];
  tt.ok(rep.count > 0, `${rep.file}: read some vectors`);
  tt.equal(rep.count, expected, `${rep.file}: read all ${expected} vectors`);
  tt.equal(rep.declared, expected, `${rep.file}: numberOfTests as expected`);
  tt.same(rep.failures, [], `${rep.file}: every vector gives its expected result`);
  if (rep.keygenOnly > 0) tt.comment(`${rep.file}: ${rep.keygenOnly} external-mu cases checked for keygen only`);
}

t.test('Ed25519 Wycheproof', async (tt) => check(tt, runEd25519Kat()));

const backends: MlDsaBackendName[] = detectMlDsaBackend() === 'native' ? ['noble', 'native'] : ['noble'];
for (const b of backends) {
  t.test(`ML-DSA-65 verify Wycheproof (${b})`, async (tt) => check(tt, runMlDsaVerifyKat(b)));
  t.test(`ML-DSA-65 sign-from-seed Wycheproof (${b})`, async (tt) => check(tt, runMlDsaSignSeedKat(b)));
}
