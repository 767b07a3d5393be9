/**
 * Checkpoints and retention of the audit chain. The checkpoint job signs every
 * account's chain head that has rows after its last checkpoint once either
 * `SIDECAR_AUDIT_CHECKPOINT_ROWS` rows were appended since, or
 * `SIDECAR_AUDIT_CHECKPOINT_SECONDS` passed; it polls the heads (a cheap read)
 * and signs outside any transaction. Several processes may run it on one
 * database: a position is signed once per kind (the store keeps the first).
 *
 * Retention ({@link pruneAudit}) removes whole chain prefixes older than the
 * cut-off and leaves a signed `anchor` checkpoint at the last removed row, so
 * the remaining chain still starts at a signed hash.
 */
import type { AuditStore } from '../store/types.js';
import type { CheckpointSigner } from './signer.js';

/** Heads signed per store read (the job reads again while a read comes back full). */
const BATCH = 100;
/** Most reads per run (bounds one run; the next poll continues). */
const MAX_BATCHES = 50;

/** Options of {@link CheckpointJob}. */
export interface CheckpointJobOptions {
  store: AuditStore;
  signer: CheckpointSigner;
  clock: () => number;
  /** Sign after this many new rows. */
  rows: number;
  /** ...or after this many seconds with new rows. */
  seconds: number;
  log: { error(obj: object, msg?: string): void };
  /** How often the heads are polled (ms); default min(1000, seconds × 1000). */
  pollMs?: number;
  /** Called with the number of checkpoints made by each run that made some. */
  onCheckpoints?: (n: number) => void;
}

/** Signs chain heads periodically. */
export class CheckpointJob {
  private readonly o: CheckpointJobOptions;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(o: CheckpointJobOptions) {
    if (!Number.isInteger(o.rows) || o.rows < 1) throw new TypeError('CheckpointJob: rows must be a positive integer');
    if (!(o.seconds > 0)) throw new TypeError('CheckpointJob: seconds must be positive');
    this.o = o;
  }

  /** Starts polling (idempotent). */
  start(): void {
    if (this.timer) return;
    const every = this.o.pollMs ?? Math.min(1000, this.o.seconds * 1000);
    this.timer = setInterval(() => { void this.runOnce().catch((err: unknown) => this.o.log.error({ err }, 'audit checkpoint job failed')); }, every);
    this.timer.unref();
  }

  /** Stops polling and waits for a run in progress. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => 0);
  }

  /** One run: signs every due head; resolves to the number of checkpoints stored. Runs never overlap. */
  runOnce(): Promise<number> {
    this.running ??= this.run().finally(() => { this.running = undefined; });
    return this.running;
  }

  private async run(): Promise<number> {
    let made = 0;
    for (let i = 0; i < MAX_BATCHES; i++) {
      const now = this.o.clock();
      const due = await this.o.store.headsDue({ rows: this.o.rows, olderThan: now - this.o.seconds * 1000, limit: BATCH });
      for (const h of due) {
        if (await this.o.store.insertCheckpoint(this.o.signer.sign(h.accountId, h.position, h.hash, 'periodic', now))) made++;
      }
      if (due.length < BATCH) break;
    }
    if (made > 0) this.o.onCheckpoints?.(made);
    return made;
  }
}

/**
 * Retention: for every account with rows older than `olderThan`, signs an anchor at the end
 * of the longest prefix of such rows and removes the prefix (`AuditStore.pruneTo`). Returns
 * the rows removed and the anchors left.
 */
export async function pruneAudit(store: AuditStore, signer: CheckpointSigner, olderThan: number, now: number): Promise<{ rows: number; anchors: number }> {
  let removed = 0;
  let anchors = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const points = await store.prunePoints(olderThan, BATCH);
    let progressed = false;
    for (const p of points) {
      const n = await store.pruneTo(signer.sign(p.accountId, p.position, p.hash, 'anchor', now));
      if (n > 0) { removed += n; anchors++; progressed = true; }
    }
    if (points.length < BATCH || !progressed) break;
  }
  return { rows: removed, anchors };
}
