/**
 * The push export of audit events (one {@link AuditExporter} per sink, `http`
 * or `otlp`; `sinks.ts`). The audit table is the outbox: every row was written
 * in its decision's transaction, so a per-account cursor per sink (in the
 * store, with a lease) replaces a second copy of each event, and the verify path
 * writes nothing more with the export on.
 *
 * - **At least once.** A batch (up to `SIDECAR_AUDIT_EXPORT_BATCH` events, from
 *   the accounts furthest behind) is read after the cursors, sent, and only a
 *   2xx (OTLP: success) moves the cursors. A crash or a failure sends the same
 *   events again with the same `event_id` (dedupe on it); the batch id is
 *   derived from the cursors it covers.
 * - **Retries.** A failed send is retried with exponential backoff (from
 *   `SIDECAR_AUDIT_EXPORT_FLUSH_MS`, at most a minute, with jitter), honouring
 *   `Retry-After`; the events stay in the table meanwhile and nothing is lost.
 * - **Bounded backlog.** An account more than `SIDECAR_AUDIT_EXPORT_MAX_BACKLOG`
 *   rows behind has its oldest unexported rows skipped (counted as `skipped`);
 *   rows removed by retention before export are counted as `pruned`. Both stay
 *   verifiable in the database (or in its export) until retention removes them.
 */
import { createHash } from 'node:crypto';
import type { AuditStore, ChainedAuditEvent } from '../store/types.js';
import type { ExportSink } from './sinks.js';

/** Options of {@link AuditExporter}. */
export interface ExporterOptions {
  store: AuditStore;
  sink: ExportSink;
  clock: () => number;
  batch: number;
  maxBacklog: number;
  flushMs: number;
  /** How long a claim holds an account's cursor (longer than a send). */
  leaseMs: number;
  log: { warn(obj: object, msg?: string): void; error(obj: object, msg?: string): void };
  onEvents: (result: 'delivered' | 'skipped' | 'pruned', n: number) => void;
  onFailure: () => void;
  random?: () => number;
}

/** What one {@link AuditExporter.tick} did. */
export interface TickResult { delivered: number; skipped: number; pruned: number; failed: boolean; retryAfterMs: number | null; full: boolean }

/** Longest wait between retries (ms). */
const MAX_BACKOFF_MS = 60_000;

/** Exports audit events to one sink. */
export class AuditExporter {
  private readonly o: ExporterOptions;
  private running = false;
  private loopDone: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private failures = 0;
  private readonly abort = new AbortController();

  constructor(o: ExporterOptions) {
    if (!Number.isInteger(o.batch) || o.batch < 1) throw new TypeError('AuditExporter: batch must be a positive integer');
    this.o = o;
  }

  /** Starts the loop (idempotent). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Wakes the loop early (tests; after a burst). */
  nudge(): void {
    this.wake?.();
  }

  /** Stops the loop (an in-flight send is aborted; its events go out again later) and closes the sink. */
  async stop(): Promise<void> {
    this.running = false;
    this.abort.abort();
    this.wake?.();
    await this.loopDone;
    await this.o.sink.close().catch(() => undefined);
  }

  /** One batch: claim, read, send, move the cursors (or release them). */
  async tick(): Promise<TickResult> {
    const { store, sink } = this.o;
    const claims = await store.claimExport(sink.name, this.o.clock(), this.o.leaseMs, this.o.batch);
    const out: TickResult = { delivered: 0, skipped: 0, pruned: 0, failed: false, retryAfterMs: null, full: false };
    if (claims.length === 0) return out;
    const kept: { accountId: string; from: number; to: number }[] = [];
    const sent: { accountId: string; from: number; to: number }[] = [];
    const events: ChainedAuditEvent[] = [];
    for (const c of claims) {
      let start = c.after;
      if (c.head - start > this.o.maxBacklog) {
        out.skipped += c.head - this.o.maxBacklog - start;
        start = c.head - this.o.maxBacklog;
      }
      const budget = this.o.batch - events.length;
      const rows = budget > 0 ? await store.readChain(c.accountId, start, budget) : [];
      const first = rows[0]?.position ?? (budget > 0 ? c.head + 1 : start + 1);
      if (first > start + 1) {
        out.pruned += first - start - 1;
        start = first - 1;
      }
      if (start > c.after) kept.push({ accountId: c.accountId, from: c.after, to: start });
      if (rows.length > 0) {
        events.push(...rows);
        sent.push({ accountId: c.accountId, from: start, to: rows[rows.length - 1]!.position });
      }
    }
    out.full = events.length >= this.o.batch;
    let ok = true;
    if (events.length > 0) {
      const id = batchId(sink.name, sent);
      const r = await sink.send(events, id, this.abort.signal);
      ok = r.ok;
      if (!ok) {
        out.failed = true;
        out.retryAfterMs = r.retryAfterMs;
        this.o.log.warn({ sink: sink.name, batchId: id, events: events.length, error: r.error }, 'audit export failed; will retry');
      }
    }
    // Skipped and pruned rows move the cursor whatever the send did; the sent ones only on success.
    const moves = new Map<string, { accountId: string; from: number; to: number }>();
    for (const k of kept) moves.set(k.accountId, k);
    if (ok) for (const s of sent) moves.set(s.accountId, { accountId: s.accountId, from: moves.get(s.accountId)?.from ?? s.from, to: s.to });
    if (moves.size > 0) await store.advanceExport(sink.name, [...moves.values()]);
    const moved = new Set(moves.keys());
    const release = claims.map((c) => c.accountId).filter((id) => !moved.has(id) || (!ok && sent.some((s) => s.accountId === id)));
    if (release.length > 0) await store.releaseExport(sink.name, release);
    if (ok) out.delivered = events.length;
    if (out.delivered) this.o.onEvents('delivered', out.delivered);
    if (out.skipped) this.o.onEvents('skipped', out.skipped);
    if (out.pruned) this.o.onEvents('pruned', out.pruned);
    if (out.failed) this.o.onFailure();
    if (out.skipped) this.o.log.warn({ sink: sink.name, skipped: out.skipped },
      'audit export backlog over SIDECAR_AUDIT_EXPORT_MAX_BACKLOG: oldest events skipped');
    return out;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      let wait = this.o.flushMs;
      try {
        const r = await this.tick();
        if (r.failed) {
          this.failures++;
          const backoff = Math.min(this.o.flushMs * 2 ** Math.min(this.failures, 16), MAX_BACKOFF_MS) * (0.5 + (this.o.random ?? Math.random)() / 2);
          wait = Math.max(backoff, Math.min(r.retryAfterMs ?? 0, 5 * MAX_BACKOFF_MS));
        } else {
          this.failures = 0;
          if (r.full) wait = 0;
        }
      } catch (err) {
        this.failures++;
        this.o.log.error({ err, sink: this.o.sink.name }, 'audit export tick failed (store)');
        wait = Math.min(this.o.flushMs * 2 ** Math.min(this.failures, 16), MAX_BACKOFF_MS);
      }
      if (!this.running) break;
      if (wait > 0) await this.sleep(wait);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.wake = undefined;
        resolve();
      }
      this.wake = done;
    });
  }
}

/** A batch's id: the same cursors covered give the same id. */
export function batchId(sink: string, sent: readonly { accountId: string; from: number; to: number }[]): string {
  const h = createHash('sha256').update(sink);
  for (const s of sent) h.update(`\n${s.accountId}:${s.from}:${s.to}`);
  return `audit-batch-${h.digest('hex').slice(0, 32)}`;
}
