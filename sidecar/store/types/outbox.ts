/**
 * The store interface (types.ts), by subject: the transactional webhook outbox
 * and its delivery attempts.
 */

/** A lifecycle event to put in the webhook outbox in the same transaction as its state change. */
export interface OutboxEventInput {
  /** Delivery id (UUID), also inside the sealed body. */
  id: string;
  accountId: string;
  platformId: string;
  connectionId: string | null;
  eventType: string;
  /** Sealed JSON body (aad = delivery id). */
  bodyEnc: Uint8Array;
  createdAt: number;
}

/** A claimed delivery, ready to send. */
export interface ClaimedDelivery {
  id: string;
  platformId: string;
  eventType: string;
  bodyEnc: Uint8Array;
  /** Attempts made before this one. */
  attempts: number;
  createdAt: number;
  callbackUrl: string | null;
  callbackDisabled: boolean;
  webhookSecretEnc: Uint8Array;
}

/** A delivery as listed to the account holder. */
export interface DeliveryRecord {
  id: string;
  platformId: string;
  connectionId: string | null;
  eventType: string;
  state: 'pending' | 'delivered' | 'dead' | 'disabled';
  attempts: number;
  nextAttemptAt: number;
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: number | null;
  createdAt: number;
  seq: number;
}

/** One delivery attempt. */
export interface DeliveryAttemptRecord {
  attempt: number;
  attemptedAt: number;
  status: number | null;
  error: string | null;
  durationMs: number;
}

/** The webhook outbox (filled by the other stores inside their transactions). */
export interface OutboxStore {
  /** Leases up to `limit` due deliveries until `now + leaseMs`. */
  claimDue(now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]>;
  /**
   * Records an attempt and moves the delivery: `delivered`, `pending` with a
   * next attempt time, `dead` (schedule exhausted) or `disabled` (410).
   */
  recordAttempt(
    id: string, a: DeliveryAttemptRecord, next: { state: DeliveryRecord['state']; nextAttemptAt: number },
  ): Promise<void>;
  /** Releases a lease without recording an attempt (shutdown). */
  release(id: string): Promise<void>;
  /**
   * Releases every lease of a pending delivery, without recording attempts;
   * returns how many were released. Called once when the worker starts.
   *
   * Only an engine whose database belongs to ONE process implements it (SQLite:
   * at start nothing can be in flight, so any lease left was held by a process
   * that died). An engine shared by several replicas (PostgreSQL) must not: a
   * starting replica would take leases that a live peer holds; there a dead
   * replica's leases simply run out. See docs/storage.md.
   */
  releaseAllLeases?(): Promise<number>;
  listDeliveries(
    q: { accountId: string; platformId?: string; state?: string; limit: number; before?: number },
  ): Promise<DeliveryRecord[]>;
  getDelivery(id: string): Promise<(DeliveryRecord & { accountId: string }) | undefined>;
  listAttempts(deliveryId: string): Promise<DeliveryAttemptRecord[]>;
  /** Makes a delivery due now again (keeps its id and body). */
  redeliver(id: string, now: number): Promise<void>;
  /** Depth (pending) and the creation time of the oldest pending delivery. */
  stats(): Promise<{ pending: number; oldestPendingAt: number | null }>;
}
