/**
 * The messages between the crypto pool (main thread, `pool.ts`) and
 * its worker threads (`worker.ts`). Kept apart from the pool so the
 * worker imports these without loading the pool.
 */
import type { HybridPublicKey, HybridSignature, HybridSignatureJson, MlDsaBackendName } from '../../src/crypto/hybrid.js';

/** What a worker posts once it has loaded, before any answer. */
export const WORKER_READY = 'ready';

/** Data every worker starts with. */
export interface CryptoWorkerInit {
  backend: MlDsaBackendName;
  verifiers: number;
  signers: number;
}

/** A task sent to a worker. */
export type CryptoWorkerRequest =
  | { id: number; op: 'verify'; key: string; publicKey?: HybridPublicKey; domain: string; message: Uint8Array; signature: HybridSignature }
  | { id: number; op: 'sign'; key: string; seed?: Uint8Array; domain: string; message: Uint8Array };

/** What crosses to a worker in one message: the tasks posted to it in one event-loop turn. */
export type CryptoWorkerBatch = CryptoWorkerRequest[];

/** A worker's answer to one task (a worker answers each batch with one array of these). */
export type CryptoWorkerReply =
  | { id: number; ok: true; value: boolean | HybridSignatureJson }
  | { id: number; ok: false; error: string; nokey?: boolean };
