/**
 * One crypto worker thread as the pool's main thread sees it: the tasks it
 * owes answers for, mirrors of its key caches, and the batching of tasks into
 * messages. The pool (`crypto/pool.ts`) decides which slot gets a task and
 * when a slot is replaced; a slot only tracks its own tasks, so everything
 * here is local to one worker.
 */
import { Worker } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import { CryptoPoolError } from './proof-crypto.js';
import type { PoolLimits } from './proof-crypto.js';
import type { CryptoWorkerBatch, CryptoWorkerInit, CryptoWorkerReply, CryptoWorkerRequest } from './protocol.js';

/** A message for a worker and the buffers it transfers. */
export interface Built {
  msg: CryptoWorkerRequest;
  transfer?: ArrayBuffer[];
}

/** A task a worker owes an answer for. */
export interface Task {
  resolve(value: unknown): void;
  reject(err: Error): void;
  /** Sends the task again with its key bytes (after a `nokey` answer); undefined once used. */
  resend: (() => void) | undefined;
}

/** Most tasks in one message to a worker (a worker answers once per message, which keeps the stall watchdog fed). */
const MAX_BATCH = 32;

/**
 * The entry of every worker: compiled, the sibling `worker.js`; from the TypeScript
 * sources (tests), `worker.dev.mjs`, which registers tsx first (see that file).
 */
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('./worker.dev.mjs', import.meta.url)
  : new URL('./worker.js', import.meta.url);

/** One worker thread and what the main thread knows about it. */
export class WorkerSlot {
  /** The thread. */
  readonly worker: Worker;
  /** Tasks posted or queued for the thread and not yet answered, by task id. */
  readonly pending = new Map<number, Task>();
  /** Mirror of the worker's verifier cache (key ids only): a cached key is sent without its bytes. */
  readonly verifiers: LRUCache<string, true>;
  /** Mirror of the worker's signer cache (agent ids only): a cached signer is sent without its seed. */
  readonly signers: LRUCache<string, true>;
  /** When the thread was started (the start limit and quick-death window count from here). */
  readonly startedAt: number;
  /** The worker has loaded (posted `WORKER_READY`); until then the start limit applies, not the stall limit. */
  ready = false;
  /** Last time the worker answered (or became busy). */
  lastActivity: number;
  /** Failed or replaced: its tasks were rejected and its thread terminated. */
  dead = false;
  /** Tasks not yet posted (sent together at the end of the event-loop turn) and the buffers they transfer. */
  private outbox: CryptoWorkerRequest[] = [];
  private outboxTransfer: ArrayBuffer[] = [];
  private flushScheduled = false;

  /**
   * Starts the worker thread (unref'd while it has no tasks); the caller wires its events.
   *
   * @param index - The slot's place in the pool (logs, replacement).
   */
  readonly index: number;

  constructor(index: number, init: CryptoWorkerInit, limits: PoolLimits) {
    this.index = index;
    this.worker = new Worker(WORKER_URL, { workerData: init });
    this.worker.unref();
    this.startedAt = performance.now();
    this.lastActivity = this.startedAt;
    this.verifiers = new LRUCache({ max: limits.verifiers });
    this.signers = new LRUCache({ max: limits.signers });
  }

  /** Registers task `id` (the worker is ref'd while it owes answers). */
  add(id: number, task: Task): void {
    if (this.pending.size === 0) {
      this.lastActivity = performance.now();
      this.worker.ref();
    }
    this.pending.set(id, task);
  }

  /** Removes a finished task. */
  settle(id: number): void {
    if (!this.pending.delete(id)) return;
    if (this.pending.size === 0) this.worker.unref();
  }

  /**
   * Queues a task for the worker. A task for an idle worker is posted at once; while the
   * worker is busy, tasks are collected and posted together at the end of the event-loop turn
   * (one message, one wake-up of the worker, instead of one per task), at most
   * {@link MAX_BATCH} in a message.
   */
  post(m: Built): void {
    this.outbox.push(m.msg);
    if (m.transfer) this.outboxTransfer.push(...m.transfer);
    if (this.pending.size <= 1 || this.outbox.length >= MAX_BATCH) {
      this.flush();
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => { this.flushScheduled = false; this.flush(); });
    }
  }

  /** Posts the queued tasks in one message; tasks that cannot be sent fail closed. */
  private flush(): void {
    if (this.outbox.length === 0) return;
    const batch: CryptoWorkerBatch = this.outbox;
    const transfer = this.outboxTransfer;
    this.outbox = [];
    this.outboxTransfer = [];
    if (this.dead) return;
    try {
      this.worker.postMessage(batch, transfer);
    } catch (err) {
      for (const msg of batch) {
        const task = this.pending.get(msg.id);
        if (!task) continue;
        this.settle(msg.id);
        task.reject(new CryptoPoolError(`crypto task could not be sent: ${(err as Error).message}`));
      }
    }
  }

  /** Settles the task a reply answers; a `nokey` answer sends the task again once, with its key. */
  onReply(m: CryptoWorkerReply): void {
    this.lastActivity = performance.now();
    const task = this.pending.get(m.id);
    if (!task) return;
    if (!m.ok && m.nokey && task.resend) {
      const resend = task.resend;
      task.resend = undefined;
      try {
        resend();
        return;
      } catch (err) {
        this.settle(m.id);
        task.reject(err instanceof Error ? err : new CryptoPoolError(String(err)));
        return;
      }
    }
    this.settle(m.id);
    if (m.ok) task.resolve(m.value);
    else task.reject(new CryptoPoolError(`crypto worker: ${m.error}`));
  }

  /** Rejects every task and marks the slot dead (the caller terminates the thread). */
  fail(err: Error): void {
    for (const task of this.pending.values()) task.reject(err);
    this.pending.clear();
    this.dead = true;
  }
}
