/**
 * The crypto worker pool: hybrid proof signing (present) and the proof
 * signature check of verify (the signature stage) run on `node:worker_threads`, so a
 * second core works while the main thread keeps HTTP, SQLite and the caches.
 * Sized by `SIDECAR_CRYPTO_WORKERS` (default one per core, at most 2; the
 * measurements behind it are in docs/proofs.md); with 0 the same calls run
 * inline on the main thread ({@link createProofCrypto}). With workers, every
 * task goes to a worker: there is no second, inline path to choose between.
 *
 * Key material crosses to a worker once: KeyObjects cannot be transferred,
 * so the first task for a key carries its bytes (a public key, or the agent's
 * 64-byte seed, copied out of the main thread and zeroed there), and the
 * worker caches the prepared verifier or signer by id (public-key hash or
 * agent id) in a bounded LRU. The main thread keeps a mirror of each worker's
 * LRU (same bound, same order of operations), so it knows when to send the
 * bytes; a worker that lacks a key anyway answers `nokey` and the task is
 * sent again with the bytes.
 *
 * Fails closed: a task whose worker errors, crashes, exits or stalls
 * (no answer for {@link POOL_LIMITS}.stallMs while busy, or not loaded after
 * `startMs`) is rejected with a
 * {@link CryptoPoolError} — verify answers 200 `indeterminate`
 * (`internal_error`), present 503 `service_unavailable` — and the worker is
 * replaced. Tasks beyond {@link POOL_LIMITS}.maxPending are refused the same
 * way. Workers start when the server is ready (`warm()`, else on the first
 * task) and are terminated by `close()` (the server's `onClose`).
 *
 * This file holds the policy (which worker, replacement and stalls); one
 * worker's task bookkeeping and batching is `slot.ts`, and the
 * messages between the threads are `protocol.ts`.
 */
import type { Worker } from 'node:worker_threads';
import { getMlDsaBackend } from '../../src/crypto/hybrid.js';
import type { HybridSignature, HybridSignatureJson } from '../../src/crypto/hybrid.js';
import { WORKER_READY } from './protocol.js';
import type { CryptoWorkerInit, CryptoWorkerReply, CryptoWorkerRequest } from './protocol.js';
import { WorkerSlot } from './slot.js';
import type { Built, Task } from './slot.js';
import { CryptoPoolError, InlineCrypto, POOL_LIMITS } from './proof-crypto.js';
import type { CryptoOp, CryptoTaskHook, PoolLimits, ProofCrypto, SignKey, VerifyKey } from './proof-crypto.js';

/** Re-exported from proof-crypto.ts so the pool's users need one import. */
export { CryptoPoolError, InlineCrypto, POOL_LIMITS } from './proof-crypto.js';
export type { CryptoOp, CryptoTaskHook, CryptoThread, PoolLimits, ProofCrypto, SignKey, VerifyKey } from './proof-crypto.js';

/** Options of {@link createProofCrypto}. */
export interface ProofCryptoOptions {
  /** Error logging (worker crashes and stalls). */
  log?: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** Overrides of {@link POOL_LIMITS} (tests). */
  limits?: Partial<PoolLimits>;
  /** Called once per task with where it runs (metrics). */
  onTask?: CryptoTaskHook;
}

/** The pool for `workers` threads, or the inline implementation for 0. */
export function createProofCrypto(workers: number, opts: ProofCryptoOptions = {}): ProofCrypto {
  if (!Number.isInteger(workers) || workers < 0) throw new TypeError('crypto workers: a non-negative integer');
  return workers === 0 ? new InlineCrypto(opts.limits, opts.onTask) : new CryptoPool(workers, opts);
}

/** A worker that dies sooner than this after its start is replaced on the next task, not at once (no restart loop). */
const QUICK_DEATH_MS = 1_000;

/** Signature work on `size` worker threads. */
export class CryptoPool implements ProofCrypto {
  /** Number of worker threads. */
  readonly workers: number;
  /** For tests: called with the worker a task is about to be posted to. */
  beforePost: ((worker: Worker, op: CryptoOp) => void) | undefined;
  private readonly slots: (WorkerSlot | undefined)[];
  private readonly limits: PoolLimits;
  private readonly init: CryptoWorkerInit;
  private readonly log: ProofCryptoOptions['log'];
  private nextId = 1;
  private closed = false;
  private watchdog: NodeJS.Timeout | undefined;
  /** Threads started so far, replacements included (tests and logs). */
  started = 0;
  private readonly onTask: CryptoTaskHook | undefined;

  constructor(size: number, opts: ProofCryptoOptions = {}) {
    if (!Number.isInteger(size) || size < 1) throw new TypeError('crypto pool: size must be an integer ≥ 1');
    this.workers = size;
    this.slots = new Array<WorkerSlot | undefined>(size).fill(undefined);
    this.limits = { ...POOL_LIMITS, ...opts.limits };
    this.log = opts.log;
    // Workers use the backend the main thread uses (tests and benchmarks may force one).
    this.init = { backend: getMlDsaBackend(), verifiers: this.limits.verifiers, signers: this.limits.signers };
    this.onTask = opts.onTask;
  }

  /** The live worker threads (tests). */
  threads(): Worker[] {
    return this.slots.filter((s): s is WorkerSlot => s !== undefined && !s.dead).map((s) => s.worker);
  }

  /** Checks both halves of a hybrid signature on a worker (the public key crosses once per worker and key). */
  verify(key: VerifyKey, domain: string, message: Uint8Array, signature: HybridSignature): Promise<boolean> {
    return this.submit<boolean>('verify', (slot, id) => {
      const base = { id, op: 'verify' as const, key: key.id, domain, message, signature };
      const cached = slot.verifiers.get(key.id) !== undefined;
      if (!cached) slot.verifiers.set(key.id, true);
      return {
        msg: cached ? base : { ...base, publicKey: key.publicKey },
        again: () => { slot.verifiers.set(key.id, true); return { msg: { ...base, publicKey: key.publicKey } }; },
      };
    });
  }

  /** Makes a hybrid signature on a worker (the seed crosses once per worker and key, then is zeroed here). */
  sign(key: SignKey, domain: string, message: Uint8Array): Promise<HybridSignatureJson> {
    // The seed is copied into a buffer of its own, transferred (not cloned) to the worker and zeroed here.
    const withSeed = (base: CryptoWorkerRequest & { op: 'sign' }): { msg: CryptoWorkerRequest; transfer: ArrayBuffer[] } => {
      const s = key.seed();
      const seed = new Uint8Array(s);
      s.fill(0);
      return { msg: { ...base, seed }, transfer: [seed.buffer] };
    };
    return this.submit<HybridSignatureJson>('sign', (slot, id) => {
      const base = { id, op: 'sign' as const, key: key.id, domain, message };
      const cached = slot.signers.get(key.id) !== undefined;
      const first = cached ? { msg: base } : withSeed(base);
      if (!cached) slot.signers.set(key.id, true);
      return {
        ...first,
        again: () => { const m = withSeed(base); slot.signers.set(key.id, true); return m; },
      };
    });
  }

  /** Starts the workers now (the server calls it when ready); a failure is logged and retried on the first task. */
  warm(): void {
    if (this.closed) return;
    try {
      this.pick();
    } catch (err) {
      this.log?.error({ err }, 'crypto workers could not start; retrying on the first task');
    }
  }

  /** Rejects every pending task and terminates the workers. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.watchdog) clearInterval(this.watchdog);
    const exits: Promise<unknown>[] = [];
    for (const slot of this.slots) {
      if (!slot || slot.dead) continue;
      slot.fail(new CryptoPoolError('crypto pool closed'));
      exits.push(slot.worker.terminate());
    }
    await Promise.allSettled(exits);
  }

  private submit<T>(op: CryptoOp, build: (slot: WorkerSlot, id: number) => Built & { again: () => Built }): Promise<T> {
    if (this.closed) return Promise.reject(new CryptoPoolError('crypto pool closed'));
    if (this.inFlight() >= this.limits.maxPending) return Promise.reject(new CryptoPoolError('crypto queue full'));
    let slot: WorkerSlot;
    try {
      slot = this.pick();
    } catch (err) {
      return Promise.reject(new CryptoPoolError(`crypto worker could not start: ${(err as Error).message}`));
    }
    const id = this.nextId++;
    let first: Built & { again: () => Built };
    try {
      first = build(slot, id);
    } catch (err) {
      // E.g. the seed cannot be opened: the promise rejects with that error, nothing is queued.
      return Promise.reject(err as Error);
    }
    this.onTask?.(op, 'worker');
    return new Promise<T>((resolve, reject) => {
      const task: Task = {
        resolve: resolve as (v: unknown) => void,
        reject,
        resend: () => { const m = first.again(); this.post(slot, op, m); },
      };
      slot.add(id, task);
      try {
        this.post(slot, op, first);
      } catch (err) {
        slot.settle(id);
        reject(new CryptoPoolError(`crypto task could not be sent: ${(err as Error).message}`));
      }
    });
  }

  /** Tasks in flight or queued, over all workers. */
  private inFlight(): number {
    let n = 0;
    for (const slot of this.slots) if (slot) n += slot.pending.size;
    return n;
  }

  /** Queues a task for `slot`'s worker (see {@link WorkerSlot.post}). */
  private post(slot: WorkerSlot, op: CryptoOp, m: Built): void {
    this.beforePost?.(slot.worker, op);
    slot.post(m);
  }

  /** The least busy live worker, starting workers that are missing or were replaced lazily. */
  private pick(): WorkerSlot {
    let best: WorkerSlot | undefined;
    for (let i = 0; i < this.slots.length; i++) {
      let s = this.slots[i];
      if (!s || s.dead) s = this.spawn(i);
      if (!best || s.pending.size < best.pending.size) best = s;
    }
    return best!;
  }

  /** Starts the worker of slot `index` and wires its events. */
  private spawn(index: number): WorkerSlot {
    const slot = new WorkerSlot(index, this.init, this.limits);
    const worker = slot.worker;
    this.slots[index] = slot;
    this.started++;
    worker.on('message', (replies: CryptoWorkerReply[] | typeof WORKER_READY) => {
      if (replies === WORKER_READY) {
        slot.ready = true;
        slot.lastActivity = performance.now();
        return;
      }
      for (const m of replies) slot.onReply(m);
    });
    worker.on('error', (err) => {
      this.log?.error({ err, worker: index }, 'crypto worker failed; failing its tasks closed and replacing it');
      this.retire(slot, new CryptoPoolError(`crypto worker failed: ${err.message}`));
    });
    worker.on('messageerror', (err) => {
      this.log?.error({ err, worker: index }, 'crypto worker message could not be read; replacing the worker');
      this.retire(slot, new CryptoPoolError('crypto worker message error'));
    });
    worker.on('exit', (code) => {
      if (!slot.dead && !this.closed) this.log?.error({ code, worker: index }, 'crypto worker exited; failing its tasks closed and replacing it');
      this.retire(slot, new CryptoPoolError(`crypto worker exited (code ${code})`));
    });
    if (!this.watchdog) {
      this.watchdog = setInterval(() => this.checkStalls(), Math.max(50, Math.min(1_000, this.limits.stallMs / 4, this.limits.startMs / 4)));
      this.watchdog.unref();
    }
    return slot;
  }

  /** Fails `slot`'s tasks, stops it and starts its replacement (at once, or on the next task after a quick death). */
  private retire(slot: WorkerSlot, err: Error): void {
    if (slot.dead) return;
    slot.fail(err);
    void slot.worker.terminate();
    if (this.closed || this.slots[slot.index] !== slot) return;
    if (performance.now() - slot.startedAt < QUICK_DEATH_MS) return;
    try {
      this.spawn(slot.index);
    } catch (e) {
      this.log?.error({ err: e, worker: slot.index }, 'crypto worker could not be replaced; retrying on the next task');
    }
  }

  /** The watchdog: replaces workers that did not load within `startMs` or owe answers for longer than `stallMs`. */
  private checkStalls(): void {
    const now = performance.now();
    for (const slot of this.slots) {
      if (!slot || slot.dead) continue;
      if (!slot.ready) {
        if (now - slot.startedAt < this.limits.startMs) continue;
        this.log?.error({ worker: slot.index, waited_ms: Math.round(now - slot.startedAt) },
          'crypto worker did not finish loading; terminating and replacing it');
        this.retire(slot, new CryptoPoolError('crypto worker did not start'));
        continue;
      }
      if (slot.pending.size === 0 || now - slot.lastActivity < this.limits.stallMs) continue;
      this.log?.error(
        { worker: slot.index, pending: slot.pending.size, stalled_ms: Math.round(now - slot.lastActivity) },
        'crypto worker stalled; terminating and replacing it');
      this.retire(slot, new CryptoPoolError('crypto worker stalled'));
    }
  }
}
