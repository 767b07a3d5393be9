/**
 * The store's Prometheus metrics, the same families for every engine (one
 * connection, idle, on SQLite; no notifications there):
 *
 * - `agent_authz_store_pool_connections{state}`: in_use, idle, waiting;
 * - `agent_authz_store_notification_lag_seconds`: change made → notification received;
 * - `agent_authz_store_resyncs_total`: full resyncs after a lost notification connection;
 * - `agent_authz_store_errors_total`: failed database operations.
 *
 * `createStoreMetrics` returns the {@link StoreMonitor} to open the store with.
 */
import client from 'prom-client';
import type { PoolStats, StoreMonitor } from './types.js';

/** Notification lag buckets: 1 ms to 5 s. */
export const LAG_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** The store metrics on `registry`. */
export interface StoreMetrics {
  /** Pass to the store's options. */
  readonly monitor: StoreMonitor;
  /** Connects the pool gauge to the open store. */
  bindPool(stats: () => PoolStats): void;
}

/**
 * Creates the store metric families on `registry`. `transaction` is the
 * embedded engine's write-transaction observer (kept with the other metrics).
 */
export function createStoreMetrics(registry: client.Registry, transaction?: (seconds: number, ok: boolean) => void): StoreMetrics {
  const reg = [registry];
  let pool: (() => PoolStats) | undefined;
  new client.Gauge({
    name: 'agent_authz_store_pool_connections', help: 'Database connections of the store by state (in_use, idle, waiting: callers waiting for one).',
    labelNames: ['state'], registers: reg,
    collect() {
      const s = pool?.();
      if (!s) return;
      this.set({ state: 'in_use' }, s.inUse);
      this.set({ state: 'idle' }, s.idle);
      this.set({ state: 'waiting' }, s.waiting);
    },
  });
  const lag = new client.Histogram({
    name: 'agent_authz_store_notification_lag_seconds',
    help: 'Time from a change on any replica to its change notification arriving here (cache invalidation).',
    buckets: LAG_BUCKETS, registers: reg,
  });
  const resyncs = new client.Counter({
    name: 'agent_authz_store_resyncs_total', help: 'Full cache resyncs after a lost change-notification connection.', registers: reg,
  });
  const errors = new client.Counter({
    name: 'agent_authz_store_errors_total', help: 'Failed database operations (including lost connections).', registers: reg,
  });
  return {
    monitor: {
      error: () => errors.inc(),
      notificationLag: (s) => lag.observe(s),
      resync: () => resyncs.inc(),
      ...(transaction ? { transaction } : {}),
    },
    bindPool(stats) { pool = stats; },
  };
}
