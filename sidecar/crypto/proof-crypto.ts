/**
 * Signature work of the sidecar, as routes and the decision pipeline see it:
 * the {@link ProofCrypto} interface (hybrid proof signing for present, the
 * proof-signature check of verify), its bounds, and {@link InlineCrypto}, the
 * implementation that runs on the main thread, used when
 * `SIDECAR_CRYPTO_WORKERS=0` (the worker pool is `pool.ts`).
 */
import { LRUCache } from 'lru-cache';
import { createSigner, createVerifier, signatureToJson } from '../../src/crypto/hybrid.js';
import type { HybridPublicKey, HybridSignature, HybridSignatureJson, HybridSigner, HybridVerifier } from '../../src/crypto/hybrid.js';

/** Bounds of the pool and of each worker's key caches. */
export interface PoolLimits {
  /** Prepared verifiers per worker, and in {@link InlineCrypto}. */
  verifiers: number;
  /** Prepared signers per worker, and in {@link InlineCrypto}. */
  signers: number;
  /** Tasks in flight or queued, over all workers; more are refused. */
  maxPending: number;
  /** A busy worker that answers nothing for this long is terminated and replaced. */
  stallMs: number;
  /** A worker that has not finished loading after this long is terminated and replaced. */
  startMs: number;
}

/** The default {@link PoolLimits}. */
export const POOL_LIMITS: Readonly<PoolLimits> = Object.freeze({
  verifiers: 10_000,
  signers: 2_000,
  maxPending: 1024,
  stallMs: 10_000,
  startMs: 60_000,
});

/** Why a task could not be done by the pool (fail closed: indeterminate / 503). */
export class CryptoPoolError extends Error {
  override name = 'CryptoPoolError';
}

/** A public key to verify against; `id` names it (e.g. the SHA-256 of its JSON) and must be unique to it. */
export interface VerifyKey {
  readonly id: string;
  readonly publicKey: HybridPublicKey;
}

/** A signing key: `id` names it (the agent id); `seed()` returns a fresh copy of its 64-byte secret, called only when a worker lacks it. */
export interface SignKey {
  readonly id: string;
  seed(): Uint8Array;
}

/** Signature work of the sidecar: on worker threads, or all on the main thread when sized 0. */
export interface ProofCrypto {
  /** Worker threads (0 = inline on the main thread). */
  readonly workers: number;
  /**
   * `true` only when both halves of `signature` verify over `domain` + `message`. Rejects with
   * {@link CryptoPoolError} when a worker fails, or with the underlying error when it ran on the
   * main thread (e.g. a malformed key).
   */
  verify(key: VerifyKey, domain: string, message: Uint8Array, signature: HybridSignature): Promise<boolean>;
  /** A hybrid signature (JSON form) over `domain` + `message`. Rejects with {@link CryptoPoolError} when a worker fails. */
  sign(key: SignKey, domain: string, message: Uint8Array): Promise<HybridSignatureJson>;
  /** Starts the workers now instead of on the first task (does not wait for them). */
  warm(): void;
  /** Terminates the workers; pending tasks are rejected. */
  close(): Promise<void>;
}

/** The two kinds of signature work. */
export type CryptoOp = 'verify' | 'sign';

/** Where a task ran: on the main thread or on a worker thread. */
export type CryptoThread = 'main' | 'worker';

/** Called once per task, when it starts (metrics: `agent_authz_crypto_tasks_total`). */
export type CryptoTaskHook = (op: CryptoOp, thread: CryptoThread) => void;

/** Signature work on the main thread, with the same bounded caches a worker has. */
export class InlineCrypto implements ProofCrypto {
  readonly workers = 0;
  private readonly verifiers: LRUCache<string, HybridVerifier>;
  private readonly signers: LRUCache<string, HybridSigner>;
  private readonly onTask: CryptoTaskHook | undefined;

  constructor(limits: Partial<PoolLimits> = {}, onTask?: CryptoTaskHook) {
    this.verifiers = new LRUCache({ max: limits.verifiers ?? POOL_LIMITS.verifiers });
    this.signers = new LRUCache({ max: limits.signers ?? POOL_LIMITS.signers });
    this.onTask = onTask;
  }

  async verify(key: VerifyKey, domain: string, message: Uint8Array, signature: HybridSignature): Promise<boolean> {
    this.onTask?.('verify', 'main');
    let v = this.verifiers.get(key.id);
    if (!v) {
      v = createVerifier(key.publicKey);
      this.verifiers.set(key.id, v);
    }
    return v.verify(domain, message, signature);
  }

  async sign(key: SignKey, domain: string, message: Uint8Array): Promise<HybridSignatureJson> {
    this.onTask?.('sign', 'main');
    let s = this.signers.get(key.id);
    if (!s) {
      const seed = key.seed();
      try { s = createSigner(seed); } finally { seed.fill(0); }
      this.signers.set(key.id, s);
    }
    return signatureToJson(s.sign(domain, message));
  }

  warm(): void { /* nothing to start */ }

  async close(): Promise<void> { /* nothing to release */ }
}
