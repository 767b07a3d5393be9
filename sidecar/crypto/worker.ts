/**
 * A crypto worker thread of the sidecar (started by `pool.ts` through
 * `worker.dev.mjs` from the sources): verifies and makes hybrid signatures. Prepared
 * verifiers and signers are cached by the id the pool gives (public-key hash,
 * agent id) in bounded LRUs, in the same order of operations as the pool's
 * mirror of them; a task without key bytes for an id that is not cached is
 * answered `nokey`. A seed is zeroed once its signer is prepared. Tasks come
 * in batches (arrays); each batch is answered with one array of replies.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import { createSigner, createVerifier, setMlDsaBackend, signatureToJson } from '../../src/crypto/hybrid.js';
import type { HybridSigner, HybridVerifier } from '../../src/crypto/hybrid.js';
import { WORKER_READY } from './protocol.js';
import type { CryptoWorkerBatch, CryptoWorkerInit, CryptoWorkerReply, CryptoWorkerRequest } from './protocol.js';

const init = workerData as CryptoWorkerInit;
setMlDsaBackend(init.backend);
const verifiers = new LRUCache<string, HybridVerifier>({ max: init.verifiers });
const signers = new LRUCache<string, HybridSigner>({ max: init.signers });
const port = parentPort!;

function handle(m: CryptoWorkerRequest): CryptoWorkerReply {
  if (m.op === 'verify') {
    let v: HybridVerifier | undefined;
    if (m.publicKey) {
      v = createVerifier(m.publicKey);
      verifiers.set(m.key, v);
    } else {
      v = verifiers.get(m.key);
      if (!v) return { id: m.id, ok: false, error: 'verifier not cached', nokey: true };
    }
    return { id: m.id, ok: true, value: v.verify(m.domain, m.message, m.signature) };
  }
  if (m.op === 'sign') {
    let s: HybridSigner | undefined;
    if (m.seed) {
      try { s = createSigner(m.seed); } finally { m.seed.fill(0); }
      signers.set(m.key, s);
    } else {
      s = signers.get(m.key);
      if (!s) return { id: m.id, ok: false, error: 'signer not cached', nokey: true };
    }
    return { id: m.id, ok: true, value: signatureToJson(s.sign(m.domain, m.message)) };
  }
  return { id: (m as { id: number }).id, ok: false, error: 'unknown operation' };
}

// The pool posts tasks in batches; each batch is answered with one message.
port.on('message', (batch: CryptoWorkerBatch) => {
  const replies: CryptoWorkerReply[] = [];
  for (const m of batch) {
    try {
      replies.push(handle(m));
    } catch (err) {
      replies.push({ id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  }
  port.postMessage(replies);
});
// Loaded: from now on the pool's stall limit applies.
port.postMessage(WORKER_READY);
