/**
 * The PostgreSQL change feed: one dedicated connection (outside the pool)
 * that `LISTEN`s on the channel the schema's triggers notify on commit, and
 * hands each change to the subscribers (the decision caches, wired in
 * sidecar/server.ts).
 *
 * When that connection is lost (server restart, network, a failed heartbeat)
 * the feed emits `stale` at once, so the caches read through to the database,
 * and reconnects with a growing delay (0.1 s to 2 s). Once it listens again it
 * emits `resync`: the caches reload what they keep and trust their contents
 * again. Because LISTEN is active before the reload reads, no change can fall
 * between the two.
 */
import pg from 'pg';
import { NOTIFY_CHANNEL, parseNotification } from './changes-protocol.js';
import type { ChangeFeed, StoreChange, StoreMonitor } from '../types.js';

/** Options of {@link PgChangeFeed}. */
export interface ChangeFeedOptions {
  /** Client configuration of the listening connection. */
  client: pg.ClientConfig;
  monitor?: StoreMonitor;
  /** Heartbeat period (ms): a query on the listening connection; a failure counts as a lost connection. */
  heartbeatMs?: number;
}

/** Notifications from every replica sharing the database. */
export class PgChangeFeed implements ChangeFeed {
  private readonly opts: ChangeFeedOptions;
  private readonly subscribers = new Set<(c: StoreChange) => void>();
  private client: pg.Client | null = null;
  private closed = false;
  private isLive = false;
  private delayMs = 100;
  private retry: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(opts: ChangeFeedOptions) {
    this.opts = opts;
  }

  get live(): boolean {
    return this.isLive;
  }

  subscribe(fn: (change: StoreChange) => void): () => void {
    this.subscribers.add(fn);
    return () => { this.subscribers.delete(fn); };
  }

  private emit(c: StoreChange): void {
    for (const fn of this.subscribers) {
      try { fn(c); } catch { /* a subscriber's failure must not stop the others */ }
    }
  }

  /** Connects and listens; rejects when the first connection fails (startup). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const c = new pg.Client(this.opts.client);
    c.on('error', () => this.lost(c));
    c.on('end', () => this.lost(c));
    c.on('notification', (m) => {
      if (m.channel !== NOTIFY_CHANNEL) return;
      const n = parseNotification(m.payload);
      if (!n) return;
      this.opts.monitor?.notificationLag?.(Math.max(0, Date.now() - n.at) / 1000);
      this.emit(n.change);
    });
    this.client = c;
    try {
      await c.connect();
      await c.query(`LISTEN ${NOTIFY_CHANNEL}`);
    } catch (err) {
      this.lost(c);
      throw err;
    }
    if (this.closed || this.client !== c) { await c.end().catch(() => {}); return; }
    this.delayMs = 100;
    const wasStale = !this.isLive;
    this.isLive = true;
    this.startHeartbeat(c);
    if (wasStale) this.emit({ type: 'resync' });
  }

  private startHeartbeat(c: pg.Client): void {
    clearInterval(this.heartbeat);
    const period = this.opts.heartbeatMs ?? 5_000;
    this.heartbeat = setInterval(() => {
      if (this.client !== c) return;
      const timer = setTimeout(() => this.lost(c), period);
      c.query('SELECT 1').then(() => clearTimeout(timer), () => { clearTimeout(timer); this.lost(c); });
    }, period);
    this.heartbeat.unref();
  }

  /** The connection `c` is gone: emit `stale` once and schedule a reconnect. */
  private lost(c: pg.Client): void {
    if (this.client !== c) return;
    this.client = null;
    clearInterval(this.heartbeat);
    c.removeAllListeners('notification');
    c.on('error', () => {});
    void c.end().catch(() => {});
    if (this.isLive) {
      this.isLive = false;
      this.opts.monitor?.error?.();
      this.emit({ type: 'stale' });
    }
    if (this.closed) return;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.closed || this.client) return;
      this.connect().catch(() => { /* lost() scheduled the next try */ });
    }, this.delayMs);
    this.retry.unref();
    this.delayMs = Math.min(this.delayMs * 2, 2_000);
  }

  /** Stops listening for good. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.heartbeat);
    const c = this.client;
    this.client = null;
    this.isLive = false;
    if (c) await c.end().catch(() => {});
  }
}
