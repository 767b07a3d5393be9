/**
 * The crypto-only ceiling (child process of bench/run.ts): hybrid sign and
 * verify per second on one core, an in-process loop over
 * `createSigner(...).sign` / `createVerifier(...).verify` with the ML-DSA
 * backend given on the command line. Prints one JSON line.
 *
 *   node --import tsx bench/crypto-ceiling.ts --backend=native --seconds=1.5
 */
import { randomBytes } from 'node:crypto';
import { createSigner, createVerifier, getMlDsaBackend, setMlDsaBackend } from '../src/crypto/hybrid.js';
import type { MlDsaBackendName } from '../src/crypto/hybrid.js';
import { canonicalBytes } from '../src/canonical.js';
import { PROOF_DOMAIN, PROOF_TYPE } from '../src/proof.js';

const arg = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const backend = arg('backend', 'noble') as MlDsaBackendName;
const seconds = Number(arg('seconds', '1.5'));
const MAX_OPS = 1_000_000;

setMlDsaBackend(backend);
// A message shaped like a real proof payload (the sidecar signs/verifies these).
const message = canonicalBytes({
  v: 1, typ: PROOF_TYPE, challenge: randomBytes(32).toString('base64url'), aud: crypto.randomUUID(), agent_id: crypto.randomUUID(),
  cert_id: `cert-${crypto.randomUUID()}`, cert_sha256: randomBytes(32).toString('hex'), presented_at: new Date().toISOString(),
});
const signer = createSigner(new Uint8Array(randomBytes(64)));
const verifier = createVerifier(signer.publicKey);
const sig = signer.sign(PROOF_DOMAIN, message);
if (!verifier.verify(PROOF_DOMAIN, message, sig)) throw new Error('self-check failed');

/** Runs `fn` in a loop for `seconds` (after a short warm-up); returns ops per second. */
function rate(fn: () => unknown): { opsPerSec: number; usPerOp: number; ops: number; cpuUsPerOp: number; cpuShare: number } {
  const warm = performance.now() + Math.min(300, seconds * 200);
  for (let i = 0; i < MAX_OPS && performance.now() < warm; i++) fn();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  let ops = 0;
  while (ops < MAX_OPS && performance.now() < end) { fn(); ops++; }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuUs = cpu.user + cpu.system;
  // cpuShare < 1: the loop was descheduled (a busy machine) or helped by other threads.
  return { opsPerSec: (ops * 1000) / ms, usPerOp: (ms * 1000) / ops, ops, cpuUsPerOp: cpuUs / ops, cpuShare: cpuUs / (ms * 1000) };
}

const verify = rate(() => verifier.verify(PROOF_DOMAIN, message, sig));
const sign = rate(() => signer.sign(PROOF_DOMAIN, message));
process.stdout.write(JSON.stringify({ backend: getMlDsaBackend(), node: process.version, verify, sign }) + '\n');
