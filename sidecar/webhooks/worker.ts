/**
 * The webhook delivery worker: drains the transactional outbox
 * ({@link OutboxStore}) and POSTs each event, signed, to its platform's
 * callback URL. See docs/webhooks.md for the rules; in short:
 *
 * - Claim due deliveries with a lease (`leaseMs`); a crash leaves the lease to
 *   run out and the delivery becomes due again — same id, same body. `start()`
 *   releases every lease first on SQLite (one process per database: whatever is
 *   leased at start belonged to a dead process), so after a restart they go out
 *   at once; on PostgreSQL, shared by replicas, leases only run out.
 * - Open the sealed body (aad `outbox:<id>:body`) and the sealed webhook secret
 *   (aad `platform:<id>:webhook_secret`), sign `timestamp + "." + body` with a
 *   fresh timestamp on every attempt, and send the plaintext bytes exactly.
 * - 2xx within `timeoutMs` → `delivered`. 410 → `disabled` (the platform's
 *   callback is disabled; its other deliveries are held). Anything else
 *   (including 3xx — redirects are never followed —, timeouts, network and
 *   SSRF refusals) → retry on the schedule of `schedule.ts`, honouring
 *   `Retry-After`; after the 10th attempt → `dead`.
 * - Connections go only to public addresses over https unless
 *   `allowInsecure` (see `ssrf.ts`).
 *
 * A delivery whose body or secret cannot be opened (wrong master key) is not
 * attempted and keeps its lease, so it is retried after `leaseMs` without
 * spending attempts; an error is logged each time.
 *
 * This file holds the scheduling (claims, leases, the poll loop, start / stop /
 * nudge) and each attempt's bookkeeping; sending one signed request and
 * classifying its outcome is in `deliver.ts`.
 */
import { performance } from 'node:perf_hooks';
import type { Agent } from 'undici';
import type { ClaimedDelivery, OutboxStore } from '../store/types.js';
import { AAD } from '../secrets.js';
import type { SecretBox } from '../secrets.js';
import type { SafeDispatcherOptions } from './ssrf.js';
import { STOP, classifyOutcome, sendSigned } from './deliver.js';
import type { AttemptOutcome, WebhookWorkerOptions, WorkerLogger } from './types.js';

/** The worker's options, logger, and attempt outcome types (defined in `types.ts`). */
export type { AttemptOutcome, DeliveryResult, WebhookWorkerOptions, WorkerLogger } from './types.js';

/** Drains the webhook outbox. Construct with the store and box; `start()` / `stop()` from the server. */
export class WebhookWorker {
  private readonly store: OutboxStore;
  private readonly platforms: WebhookWorkerOptions['platforms'];
  private readonly box: SecretBox;
  private readonly clock: () => number;
  private readonly allowInsecure: boolean;
  private readonly timeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly stopGraceMs: number;
  private readonly log: WorkerLogger;
  private readonly onResult: WebhookWorkerOptions['onResult'];
  private readonly random: () => number;
  private readonly dispatcherOptions: SafeDispatcherOptions;
  /** The SSRF-guarded agent, made with the first delivery (loading undici and ssrf.ts then, not at start). */
  private dispatcher: Promise<Agent> | undefined;

  private running = false;
  private closed = false;
  private loopDone: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private nudged = false;
  private readonly inflight = new Map<string, { done: Promise<AttemptOutcome>; abort: AbortController }>();

  constructor(opts: WebhookWorkerOptions) {
    this.store = opts.store;
    this.platforms = opts.platforms;
    this.box = opts.box;
    this.clock = opts.clock ?? Date.now;
    this.allowInsecure = opts.allowInsecure;
    this.timeoutMs = opts.timeoutMs ?? 15_000;
    this.pollIntervalMs = opts.pollIntervalMs ?? 1_000;
    this.concurrency = opts.concurrency ?? 4;
    this.leaseMs = opts.leaseMs ?? Math.max(60_000, 2 * this.timeoutMs + 10_000);
    this.stopGraceMs = opts.stopGraceMs ?? 5_000;
    this.log = opts.logger;
    this.onResult = opts.onResult;
    this.random = opts.random ?? Math.random;
    if (!(this.timeoutMs > 0)) throw new TypeError('timeoutMs must be positive');
    if (!(this.leaseMs > this.timeoutMs)) throw new TypeError('leaseMs must exceed timeoutMs');
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new TypeError('concurrency must be a positive integer');
    this.dispatcherOptions = {
      allowInsecure: this.allowInsecure,
      connectTimeoutMs: this.timeoutMs,
      ...(opts.resolve ? { resolve: opts.resolve } : {}),
    };
  }

  /**
   * Starts polling (idempotent). Before the first poll it releases every lease
   * left in the store when the engine offers it ({@link OutboxStore.releaseAllLeases},
   * SQLite only: one sidecar process per database file, so a leased delivery at
   * start was claimed by a process that died).
   * A stopped worker cannot be started again: construct a new one.
   */
  start(): void {
    if (this.closed) throw new Error('the webhook worker was stopped');
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Wakes the poller soon (call after committing a transaction that enqueued an event). */
  nudge(): void {
    this.nudged = true;
    this.wake?.();
  }

  /**
   * Stops polling; waits up to `stopGraceMs` for in-flight deliveries, then
   * aborts the rest and releases their leases (no attempt is recorded, so
   * they go out again after a restart). Closes the HTTP agent.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.closed = true;
    this.wake?.();
    await this.loopDone;
    this.loopDone = undefined;
    if (this.inflight.size > 0) {
      const all = Promise.allSettled([...this.inflight.values()].map((f) => f.done));
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        all.then(() => false),
        new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(true), this.stopGraceMs); }),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        for (const f of this.inflight.values()) f.abort.abort(STOP);
        await all;
      }
    }
    await this.dispatcher?.then((d) => d.close()).catch(() => undefined);
  }

  /**
   * One poll: claims the due deliveries (up to the free concurrency), sends
   * them and waits until every delivery in flight has finished. For tests
   * with an injected clock; the running worker uses the same path.
   */
  async tick(): Promise<AttemptOutcome[]> {
    if (this.closed) throw new Error('the webhook worker was stopped');
    await this.fill();
    const settled = await Promise.allSettled([...this.inflight.values()].map((f) => f.done));
    return settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  }

  /** Deliveries currently in flight. */
  get inFlight(): number {
    return this.inflight.size;
  }

  // -------------------------------------------------------------------------

  private async loop(): Promise<void> {
    // On an engine owned by one process (SQLite; docs/storage.md) nothing can be in flight
    // yet: a lease left now was held by a process that died. Release them so those
    // deliveries go out at once (same id, same body) instead of after `leaseMs`. A shared
    // engine (PostgreSQL) has no releaseAllLeases: a live peer may hold those leases.
    try {
      const released = this.store.releaseAllLeases ? await this.store.releaseAllLeases() : 0;
      if (released > 0) this.log.info({ released }, 'webhook worker start: released leases left by a previous process');
    } catch (err) {
      this.log.error({ err }, 'webhook worker start: releasing stale leases failed; they run out after the lease');
    }
    let idleMs = this.pollIntervalMs;
    while (this.running) {
      let claimed = 0;
      try {
        claimed = await this.fill();
        idleMs = this.pollIntervalMs;
      } catch (err) {
        this.log.error({ err }, 'webhook outbox poll failed');
        idleMs = Math.min(idleMs * 2, 30_000);
      }
      if (!this.running) break;
      // More may be due when the batch was full and a slot is free: poll again at once.
      if (claimed > 0 && this.inflight.size < this.concurrency) continue;
      await this.sleep(idleMs);
    }
  }

  /** Waits for `ms`, a nudge, a finished delivery or stop. */
  private sleep(ms: number): Promise<void> {
    if (this.nudged) {
      this.nudged = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.wake = undefined;
        self.nudged = false;
        resolve();
      }
      this.wake = done;
    });
  }

  /** Claims up to the free slots and starts each delivery; returns how many were claimed. */
  private async fill(): Promise<number> {
    const free = this.concurrency - this.inflight.size;
    if (free <= 0) return 0;
    const claimed = await this.store.claimDue(this.clock(), free, this.leaseMs);
    for (const d of claimed) {
      if (this.inflight.has(d.id)) continue;
      const abort = new AbortController();
      const done = this.deliver(d, abort.signal)
        .catch((err: unknown): AttemptOutcome => {
          this.log.error({ err, deliveryId: d.id }, 'webhook delivery bookkeeping failed');
          return { deliveryId: d.id, attempt: d.attempts + 1, result: 'skipped', status: null, error: String(err) };
        })
        .finally(() => {
          this.inflight.delete(d.id);
          this.wake?.();
        });
      this.inflight.set(d.id, { done, abort });
    }
    return claimed.length;
  }

  /** One attempt of one claimed delivery, recorded in the store. */
  private async deliver(d: ClaimedDelivery, stopSignal: AbortSignal): Promise<AttemptOutcome> {
    const attempt = d.attempts + 1;
    const logCtx = { deliveryId: d.id, platformId: d.platformId, eventType: d.eventType, attempt };

    if (d.callbackUrl === null || d.callbackDisabled) {
      // Held: the store should not have returned it. Keep the lease (re-checked after leaseMs).
      this.log.debug(logCtx, 'webhook delivery held: no usable callback URL');
      return { deliveryId: d.id, attempt, result: 'skipped', status: null, error: null };
    }

    let body: Uint8Array;
    let secret: Uint8Array;
    try {
      body = this.box.open(d.bodyEnc, AAD.outboxBody(d.id));
      secret = this.box.open(d.webhookSecretEnc, AAD.webhookSecret(d.platformId));
    } catch (err) {
      // Wrong master key or corrupt row: not the receiver's fault; spend no attempt.
      this.log.error({ ...logCtx, err }, 'webhook delivery cannot be opened; leaving it leased');
      return { deliveryId: d.id, attempt, result: 'skipped', status: null, error: 'cannot open sealed body or secret' };
    }

    this.dispatcher ??= import('./ssrf.js').then((m) => m.createSafeDispatcher(this.dispatcherOptions));
    const dispatcher = await this.dispatcher;
    const attemptedAt = this.clock();
    const t0 = performance.now();
    const sent = await sendSigned({
      deliveryId: d.id, callbackUrl: d.callbackUrl, body, secret, attemptedAt, allowInsecure: this.allowInsecure,
      timeoutMs: this.timeoutMs, dispatcher, stopSignal, clock: this.clock, log: this.log, logCtx,
    });
    if (sent.stopped) {
      await this.store.release(d.id);
      this.log.info(logCtx, 'webhook delivery aborted by shutdown; lease released');
      return { deliveryId: d.id, attempt, result: 'released', status: null, error: 'aborted by shutdown' };
    }
    const { status } = sent;

    const finishedAt = this.clock();
    const seconds = (performance.now() - t0) / 1000;
    const { state, result, next, error } = classifyOutcome(attempt, finishedAt, sent, this.random);

    await this.store.recordAttempt(d.id, { attempt, attemptedAt, status, error, durationMs: seconds * 1000 }, { state, nextAttemptAt: next });
    if (state === 'disabled') await this.platforms?.disableCallback(d.platformId, finishedAt);

    this.onResult?.(result, seconds);
    const line = { ...logCtx, status, error, result, nextAttemptAt: state === 'pending' ? new Date(next).toISOString() : undefined };
    if (result === 'delivered') this.log.debug(line, 'webhook delivered');
    else if (result === 'failed') this.log.info(line, 'webhook delivery failed; will retry');
    else this.log.warn(line, result === 'dead' ? 'webhook delivery dead-lettered' : 'webhook endpoint answered 410; callback disabled');
    return { deliveryId: d.id, attempt, result, status, error };
  }
}

