/**
 * The store interface (types.ts), by subject: what differs between engines without
 * naming one: the change feed (an engine shared by several processes has one;
 * the embedded engine, owned by one process, has none), what an engine reports
 * for metrics, and the pool gauges.
 */

/**
 * A change another process (or this one) committed, or a state of the feed:
 * - `certificate_revoked`: the certificate's status became `revoked`;
 * - `connection_keys_changed`: an API key of the connection was rotated or removed;
 * - `stale`: the feed lost its connection, so changes may be missed: caches must
 *   read through to the store until `resync`;
 * - `resync`: the feed listens again; reload what the caches need, then trust them again.
 */
export type StoreChange =
  | { type: 'certificate_revoked'; certId: string }
  | { type: 'connection_keys_changed'; connectionId: string }
  | { type: 'stale' }
  | { type: 'resync' };

/** Changes committed by any process sharing the database. */
export interface ChangeFeed {
  /** Whether the feed is connected and listening (false between `stale` and `resync`). */
  readonly live: boolean;
  /** Calls `fn` for each change, in order; returns the unsubscribe function. */
  subscribe(fn: (change: StoreChange) => void): () => void;
}

/** What an engine reports for metrics; every method is optional. */
export interface StoreMonitor {
  /** A database operation failed. */
  error?(): void;
  /** A change notification arrived `seconds` after the change was made. */
  notificationLag?(seconds: number): void;
  /** The change feed resynced after a lost notification connection. */
  resync?(): void;
  /** A write transaction ended after `seconds` (the embedded engine). */
  transaction?(seconds: number, ok: boolean): void;
}

/** Connections of the store's pool. */
export interface PoolStats {
  /** Checked out, running a query or a transaction. */
  inUse: number;
  /** Open and idle. */
  idle: number;
  /** Callers waiting for a connection. */
  waiting: number;
}
