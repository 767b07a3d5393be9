/**
 * The crypto worker pool: hybrid proof signing (present) and the proof
 * signature check of verify (stage 6) run on `node:worker_threads`, so a
 * second core works while the main thread keeps HTTP, SQLite and the caches.
 * Sized by `SIDECAR_CRYPTO_WORKERS` (default one per core, at most 2); with
 * 0 the same calls run inline on the main thread ({@link createProofCrypto}).
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
 * Idle verifies run inline (`inlineWhenIdle`, `SIDECAR_CRYPTO_INLINE_WHEN_IDLE`):
 * when no task is in flight or queued, one verify per event-loop turn runs on
 * the main thread instead. A hand-off wakes the worker's thread and then the
 * main thread again, which on an idle machine costs more latency than the
 * check itself; under load the pool is never idle and every verify goes to
 * the workers, so both cores keep working. Signing always goes to the workers
 * (a signature takes several times a verify and would hold the event loop).
 */
import { Worker } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import { getMlDsaBackend } from '../src/crypto/hybrid.ts';
import type { HybridPublicKey, HybridSignature, HybridSignatureJson, MlDsaBackendName } from '../src/crypto/hybrid.ts';
import { CryptoPoolError, InlineCrypto, POOL_LIMITS } from './proof-crypto.ts';
import type { CryptoOp, CryptoTaskHook, PoolLimits, ProofCrypto, SignKey, VerifyKey } from './proof-crypto.ts';

export { CryptoPoolError, InlineCrypto, POOL_LIMITS } from './proof-crypto.ts';
export type { CryptoOp, CryptoTaskHook, CryptoThread, PoolLimits, ProofCrypto, SignKey, VerifyKey } from './proof-crypto.ts';

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

/** Options of {@link createProofCrypto}. */
export interface ProofCryptoOptions {
  /** Error logging (worker crashes and stalls). */
  log?: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** Overrides of {@link POOL_LIMITS} (tests). */
  limits?: Partial<PoolLimits>;
  /** Run a verify on the main thread when the pool is idle (see the file header). Default false here; the sidecar's config turns it on by default (`SIDECAR_CRYPTO_INLINE_WHEN_IDLE`). */
  inlineWhenIdle?: boolean;
  /** Called once per task with where it runs (metrics). */
  onTask?: CryptoTaskHook;
}

/** The pool for `workers` threads, or the inline implementation for 0. */
export function createProofCrypto(workers: number, opts: ProofCryptoOptions = {}): ProofCrypto {
  if (!Number.isInteger(workers) || workers < 0) throw new TypeError('crypto workers: a non-negative integer');
  return workers === 0 ? new InlineCrypto(opts.limits, opts.onTask) : new CryptoPool(workers, opts);
}

/** A message for a worker and the buffers it transfers. */
interface Built {
  msg: CryptoWorkerRequest;
  transfer?: ArrayBuffer[];
}

interface Task {
  resolve(value: unknown): void;
  reject(err: Error): void;
  /** Sends the task again with its key bytes (after a `nokey` answer); undefined once used. */
  resend: (() => void) | undefined;
}

/** One worker thread and what the main thread knows about it. */
interface Slot {
  readonly index: number;
  readonly worker: Worker;
  readonly pending: Map<number, Task>;
  /** Mirrors of the worker's key caches (ids only). */
  readonly verifiers: LRUCache<string, true>;
  readonly signers: LRUCache<string, true>;
  readonly startedAt: number;
  /** The worker has loaded (posted {@link WORKER_READY}); until then the start limit applies, not the stall limit. */
  ready: boolean;
  /** Tasks not yet posted (sent together at the end of the event-loop turn) and the buffers they transfer. */
  outbox: CryptoWorkerRequest[];
  outboxTransfer: ArrayBuffer[];
  flushScheduled: boolean;
  /** Last time the worker answered (or became busy). */
  lastActivity: number;
  dead: boolean;
}

/** Prepared verifiers kept on the main thread for the verifies it runs while the pool is idle. */
const INLINE_VERIFIERS = 1_000;

/** Most tasks in one message to a worker (a worker answers once per message, which keeps the stall watchdog fed). */
const MAX_BATCH = 32;

/** A worker that dies sooner than this after its start is replaced on the next task, not at once (no restart loop). */
const QUICK_DEATH_MS = 1_000;

/** The entry of every worker: registers tsx, then loads crypto-worker.ts (see the file). */
const WORKER_URL = new URL('./crypto-worker.mjs', import.meta.url);

/** Signature work on `size` worker threads. */
export class CryptoPool implements ProofCrypto {
  readonly workers: number;
  /** For tests: called with the worker a task is about to be posted to. */
  beforePost: ((worker: Worker, op: CryptoOp) => void) | undefined;
  private readonly slots: (Slot | undefined)[];
  private readonly limits: PoolLimits;
  private readonly init: CryptoWorkerInit;
  private readonly log: ProofCryptoOptions['log'];
  private nextId = 1;
  private inFlight = 0;
  private closed = false;
  private watchdog: NodeJS.Timeout | undefined;
  /** Threads started so far, replacements included (tests and logs). */
  started = 0;
  /** Verifies run on the main thread because the pool was idle (`inlineWhenIdle`). */
  private readonly inline: InlineCrypto | undefined;
  private readonly onTask: CryptoTaskHook | undefined;
  /** A verify ran inline in this event-loop turn (cleared by setImmediate). */
  private inlineThisTurn = false;
  private readonly endInlineTurn = (): void => { this.inlineThisTurn = false; };

  constructor(size: number, opts: ProofCryptoOptions = {}) {
    if (!Number.isInteger(size) || size < 1) throw new TypeError('crypto pool: size must be an integer ≥ 1');
    this.workers = size;
    this.slots = new Array<Slot | undefined>(size).fill(undefined);
    this.limits = { ...POOL_LIMITS, ...opts.limits };
    this.log = opts.log;
    // Workers use the backend the main thread uses (tests and benchmarks may force one).
    this.init = { backend: getMlDsaBackend(), verifiers: this.limits.verifiers, signers: this.limits.signers };
    this.onTask = opts.onTask;
    // Only verifies run there (signing always goes to a worker), so its signer cache stays minimal.
    if (opts.inlineWhenIdle) this.inline = new InlineCrypto({ verifiers: Math.min(INLINE_VERIFIERS, this.limits.verifiers), signers: 1 }, opts.onTask);
  }

  /** The live worker threads (tests). */
  threads(): Worker[] {
    return this.slots.filter((s): s is Slot => s !== undefined && !s.dead).map((s) => s.worker);
  }

  verify(key: VerifyKey, domain: string, message: Uint8Array, signature: HybridSignature): Promise<boolean> {
    if (this.inline && this.inFlight === 0 && !this.inlineThisTurn && !this.closed) {
      // At most one per turn: the requests read in the same turn as this one go to the workers.
      this.inlineThisTurn = true;
      setImmediate(this.endInlineTurn);
      return this.inline.verify(key, domain, message, signature);
    }
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

  warm(): void {
    if (this.closed) return;
    try {
      this.pick();
    } catch (err) {
      this.log?.error({ err }, 'crypto workers could not start; retrying on the first task');
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.watchdog) clearInterval(this.watchdog);
    const exits: Promise<unknown>[] = [];
    for (const slot of this.slots) {
      if (!slot || slot.dead) continue;
      this.fail(slot, new CryptoPoolError('crypto pool closed'));
      exits.push(slot.worker.terminate());
    }
    await Promise.allSettled(exits);
  }

  private submit<T>(op: CryptoOp, build: (slot: Slot, id: number) => Built & { again: () => Built }): Promise<T> {
    if (this.closed) return Promise.reject(new CryptoPoolError('crypto pool closed'));
    if (this.inFlight >= this.limits.maxPending) return Promise.reject(new CryptoPoolError('crypto queue full'));
    let slot: Slot;
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
      if (slot.pending.size === 0) {
        slot.lastActivity = performance.now();
        slot.worker.ref();
      }
      slot.pending.set(id, task);
      this.inFlight++;
      try {
        this.post(slot, op, first);
      } catch (err) {
        this.settle(slot, id);
        reject(new CryptoPoolError(`crypto task could not be sent: ${(err as Error).message}`));
      }
    });
  }

  /**
   * Queues a task for `slot`'s worker. A task for an idle worker is posted at once; while the
   * worker is busy, tasks are collected and posted together at the end of the event-loop turn
   * (one message, one wake-up of the worker, instead of one per task), at most
   * {@link MAX_BATCH} in a message.
   */
  private post(slot: Slot, op: CryptoOp, m: Built): void {
    this.beforePost?.(slot.worker, op);
    slot.outbox.push(m.msg);
    if (m.transfer) slot.outboxTransfer.push(...m.transfer);
    if (slot.pending.size <= 1 || slot.outbox.length >= MAX_BATCH) {
      this.flush(slot);
    } else if (!slot.flushScheduled) {
      slot.flushScheduled = true;
      setImmediate(() => { slot.flushScheduled = false; this.flush(slot); });
    }
  }

  /** Posts `slot`'s queued tasks in one message; tasks that cannot be sent fail closed. */
  private flush(slot: Slot): void {
    if (slot.outbox.length === 0) return;
    const batch: CryptoWorkerBatch = slot.outbox;
    const transfer = slot.outboxTransfer;
    slot.outbox = [];
    slot.outboxTransfer = [];
    if (slot.dead) return;
    try {
      slot.worker.postMessage(batch, transfer);
    } catch (err) {
      for (const msg of batch) {
        const task = slot.pending.get(msg.id);
        if (!task) continue;
        this.settle(slot, msg.id);
        task.reject(new CryptoPoolError(`crypto task could not be sent: ${(err as Error).message}`));
      }
    }
  }

  /** Removes a finished task from its slot. */
  private settle(slot: Slot, id: number): void {
    if (!slot.pending.delete(id)) return;
    this.inFlight--;
    if (slot.pending.size === 0) slot.worker.unref();
  }

  /** The least busy live worker, starting workers that are missing or were replaced lazily. */
  private pick(): Slot {
    let best: Slot | undefined;
    for (let i = 0; i < this.slots.length; i++) {
      let s = this.slots[i];
      if (!s || s.dead) s = this.spawn(i);
      if (!best || s.pending.size < best.pending.size) best = s;
    }
    return best!;
  }

  private spawn(index: number): Slot {
    const worker = new Worker(WORKER_URL, { workerData: this.init });
    worker.unref();
    const slot: Slot = {
      index, worker, pending: new Map(),
      verifiers: new LRUCache({ max: this.limits.verifiers }), signers: new LRUCache({ max: this.limits.signers }),
      startedAt: performance.now(), ready: false, outbox: [], outboxTransfer: [], flushScheduled: false, lastActivity: performance.now(), dead: false,
    };
    this.slots[index] = slot;
    this.started++;
    worker.on('message', (replies: CryptoWorkerReply[] | typeof WORKER_READY) => {
      if (replies === WORKER_READY) {
        slot.ready = true;
        slot.lastActivity = performance.now();
        return;
      }
      for (const m of replies) this.onReply(slot, m);
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

  private onReply(slot: Slot, m: CryptoWorkerReply): void {
    slot.lastActivity = performance.now();
    const task = slot.pending.get(m.id);
    if (!task) return;
    if (!m.ok && m.nokey && task.resend) {
      const resend = task.resend;
      task.resend = undefined;
      try {
        resend();
        return;
      } catch (err) {
        this.settle(slot, m.id);
        task.reject(err instanceof Error ? err : new CryptoPoolError(String(err)));
        return;
      }
    }
    this.settle(slot, m.id);
    if (m.ok) task.resolve(m.value);
    else task.reject(new CryptoPoolError(`crypto worker: ${m.error}`));
  }

  /** Rejects every task of `slot`. */
  private fail(slot: Slot, err: Error): void {
    for (const task of slot.pending.values()) task.reject(err);
    this.inFlight -= slot.pending.size;
    slot.pending.clear();
    slot.dead = true;
  }

  /** Fails `slot`'s tasks, stops it and starts its replacement (at once, or on the next task after a quick death). */
  private retire(slot: Slot, err: Error): void {
    if (slot.dead) return;
    this.fail(slot, err);
    void slot.worker.terminate();
    if (this.closed || this.slots[slot.index] !== slot) return;
    if (performance.now() - slot.startedAt < QUICK_DEATH_MS) return;
    try {
      this.spawn(slot.index);
    } catch (e) {
      this.log?.error({ err: e, worker: slot.index }, 'crypto worker could not be replaced; retrying on the next task');
    }
  }

  private checkStalls(): void {
    const now = performance.now();
    for (const slot of this.slots) {
      if (!slot || slot.dead) continue;
      if (!slot.ready) {
        if (now - slot.startedAt < this.limits.startMs) continue;
        this.log?.error({ worker: slot.index, waited_ms: Math.round(now - slot.startedAt) }, 'crypto worker did not finish loading; terminating and replacing it');
        this.retire(slot, new CryptoPoolError('crypto worker did not start'));
        continue;
      }
      if (slot.pending.size === 0 || now - slot.lastActivity < this.limits.stallMs) continue;
      this.log?.error({ worker: slot.index, pending: slot.pending.size, stalled_ms: Math.round(now - slot.lastActivity) }, 'crypto worker stalled; terminating and replacing it');
      this.retire(slot, new CryptoPoolError('crypto worker stalled'));
    }
  }
}
