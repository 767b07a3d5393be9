/**
 * SQLite implementation of {@link OutboxStore}: the transactional webhook
 * outbox and its delivery-attempt log.
 *
 * Events are written by the other store modules with {@link insertOutboxEvent}
 * inside the same `db.tx` as the state change they describe, so an event
 * exists exactly when its change committed. The delivery worker
 * (`sidecar/webhooks/worker.ts`) drains the table through this store.
 *
 * Delivery states (column `outbox.state`):
 * - `pending`: waiting for its next attempt (`next_attempt_at`). A claimed
 *   delivery stays `pending` with `lease_until` set; if the process dies the
 *   lease runs out and the delivery becomes due again (same id, same body);
 *   a restarted worker releases the leases at once ({@link SqliteOutboxStore.releaseAllLeases}).
 * - `delivered`: a 2xx answer was received.
 * - `dead`: the retry schedule is exhausted (dead letter).
 * - `disabled`: the receiver answered 410 Gone; the platform's callback was
 *   disabled in the same transaction. It is parked, not lost: once the
 *   platform's callback is re-enabled (a new callback URL is set, which clears
 *   `platforms.callback_disabled_at`) it is claimed again like a due
 *   delivery, keeping its id, body and attempt count.
 *
 * Held deliveries: while a platform has no callback URL, or its callback is
 * disabled, its deliveries are not claimed and no attempts are spent; they
 * stay `pending` and go out (oldest first) once a URL is set / re-enabled.
 */
import type { Db } from './db.js';
import type {
  ClaimedDelivery, DeliveryAttemptRecord, DeliveryRecord, OutboxEventInput, OutboxStore,
} from '../types.js';
import { DELIVERY_COLUMNS, attemptFromRow, claimFromRow, clipError as clip, deliveryFromRow } from '../rows.js';
import type { AttemptRow, ClaimRow, OutboxRow } from '../rows.js';

/**
 * Puts one event in the outbox. Synchronous: call it inside the caller's
 * `db.tx` so the event commits together with its state change. Assigns
 * `seq = MAX(seq) + 1`, state `pending`, `next_attempt_at = createdAt`
 * (attempt 1 is immediate).
 */
export function insertOutboxEvent(db: Db, e: OutboxEventInput): void {
  db.run(
    `INSERT INTO outbox (id, seq, account_id, platform_id, connection_id, event_type, body_enc, state, attempts, next_attempt_at, created_at)
     SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, 'pending', 0, ?, ? FROM outbox`,
    e.id, e.accountId, e.platformId, e.connectionId, e.eventType, Buffer.from(e.bodyEnc), e.createdAt, e.createdAt,
  );
}

/** The webhook outbox on SQLite. */
export class SqliteOutboxStore implements OutboxStore {
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  async claimDue(now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    return this.db.tx(() => {
      // Due = pending and scheduled, or parked by a 410 whose platform was re-enabled since.
      // Never: leased (in flight), or for a platform without a usable callback (held).
      const rows = this.db.all<ClaimRow>(
        `SELECT o.id, o.platform_id, o.event_type, o.body_enc, o.attempts, o.created_at,
                p.callback_url, p.callback_disabled_at, p.webhook_secret_enc
           FROM outbox o JOIN platforms p ON p.id = o.platform_id
          WHERE ((o.state = 'pending' AND o.next_attempt_at <= ?) OR o.state = 'disabled')
            AND (o.lease_until IS NULL OR o.lease_until <= ?)
            AND p.callback_url IS NOT NULL AND p.callback_disabled_at IS NULL
          ORDER BY o.next_attempt_at, o.seq
          LIMIT ?`,
        now, now, limit,
      );
      for (const r of rows) {
        this.db.run("UPDATE outbox SET state = 'pending', lease_until = ? WHERE id = ?", now + leaseMs, r.id);
      }
      return rows.map(claimFromRow);
    });
  }

  async recordAttempt(id: string, a: DeliveryAttemptRecord, next: { state: DeliveryRecord['state']; nextAttemptAt: number }): Promise<void> {
    this.db.tx(() => {
      this.db.run('INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, status, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?)',
        id, a.attempt, a.attemptedAt, a.status, clip(a.error), Math.max(0, Math.round(a.durationMs)));
      this.db.run(
        `UPDATE outbox SET attempts = MAX(attempts, ?), state = ?, next_attempt_at = ?, lease_until = NULL,
                last_status = ?, last_error = ?, delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at END
          WHERE id = ?`,
        a.attempt, next.state, next.nextAttemptAt, a.status, clip(a.error), next.state, a.attemptedAt, id,
      );
      if (next.state === 'disabled') {
        // 410 Gone: disable the platform's callback atomically with the attempt.
        this.db.run(
          'UPDATE platforms SET callback_disabled_at = ? WHERE id = (SELECT platform_id FROM outbox WHERE id = ?) AND callback_disabled_at IS NULL',
          a.attemptedAt, id,
        );
      }
    });
  }

  async release(id: string): Promise<void> {
    this.db.run('UPDATE outbox SET lease_until = NULL WHERE id = ?', id);
  }

  /**
   * Clears the lease of every pending delivery (worker start). Only valid
   * while no other process works on this database file: the deployment runs
   * one sidecar process per database.
   */
  async releaseAllLeases(): Promise<number> {
    return this.db.tx(() => this.db.run("UPDATE outbox SET lease_until = NULL WHERE state = 'pending' AND lease_until IS NOT NULL"));
  }

  async listDeliveries(q: { accountId: string; platformId?: string; state?: string; limit: number; before?: number }): Promise<DeliveryRecord[]> {
    const where = ['account_id = ?'];
    const params: unknown[] = [q.accountId];
    if (q.platformId !== undefined) { where.push('platform_id = ?'); params.push(q.platformId); }
    if (q.state !== undefined) { where.push('state = ?'); params.push(q.state); }
    if (q.before !== undefined) { where.push('seq < ?'); params.push(q.before); }
    params.push(Math.max(0, Math.floor(q.limit)));
    return this.db.all<OutboxRow>(`SELECT ${DELIVERY_COLUMNS} FROM outbox WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT ?`, ...params)
      .map(deliveryFromRow);
  }

  async getDelivery(id: string): Promise<(DeliveryRecord & { accountId: string }) | undefined> {
    const r = this.db.get<OutboxRow>(`SELECT ${DELIVERY_COLUMNS} FROM outbox WHERE id = ?`, id);
    return r && { ...deliveryFromRow(r), accountId: r.account_id };
  }

  async listAttempts(deliveryId: string): Promise<DeliveryAttemptRecord[]> {
    return this.db.all<AttemptRow>(
      'SELECT attempt, attempted_at, status, error, duration_ms FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt, id', deliveryId,
    ).map(attemptFromRow);
  }

  /**
   * Makes a delivery due now (same id, same body), whatever its state. The
   * attempt count is kept: a dead delivery gets one more attempt (and is dead
   * again if that fails); a pending one continues its schedule. A delivery
   * that is in flight keeps its lease and the in-flight result wins.
   */
  async redeliver(id: string, now: number): Promise<void> {
    this.db.tx(() => {
      this.db.run("UPDATE outbox SET state = 'pending', next_attempt_at = ? WHERE id = ?", now, id);
    });
  }

  /** Backlog of deliverable pending deliveries (held ones — no URL or disabled callback — are not counted). */
  async stats(): Promise<{ pending: number; oldestPendingAt: number | null }> {
    const r = this.db.get<{ n: number; oldest: number | null }>(
      `SELECT COUNT(*) AS n, MIN(o.created_at) AS oldest
         FROM outbox o JOIN platforms p ON p.id = o.platform_id
        WHERE o.state = 'pending' AND p.callback_url IS NOT NULL AND p.callback_disabled_at IS NULL`,
    )!;
    return { pending: r.n, oldestPendingAt: r.oldest };
  }
}
