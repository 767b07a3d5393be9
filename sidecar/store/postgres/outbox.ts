/**
 * PostgreSQL implementation of {@link OutboxStore}: the transactional webhook
 * outbox shared by every replica (states and holding rules as in
 * sqlite/outbox.ts). Claims lock due rows with `FOR UPDATE SKIP LOCKED` and
 * lease them in the same statement, so each delivery goes to exactly one
 * replica per lease. There is no `releaseAllLeases`: a starting replica
 * cannot tell a dead peer's lease from a live one's, so leases only run out.
 */
import type { PgDb, Querier } from './db.js';
import type { ClaimedDelivery, DeliveryAttemptRecord, DeliveryRecord, OutboxEventInput, OutboxStore } from '../types.js';
import { DELIVERY_COLUMNS, attemptFromRow, claimFromRow, clipError, deliveryFromRow } from '../rows.js';
import type { AttemptRow, ClaimRow, OutboxRow } from '../rows.js';

/**
 * Puts one event in the outbox inside the caller's transaction (`seq` from the table's
 * identity), state `pending`, due at `createdAt`.
 */
export async function insertOutboxEvent(q: Querier, e: OutboxEventInput): Promise<void> {
  await q.run(
    `INSERT INTO outbox (id, account_id, platform_id, connection_id, event_type, body_enc, state, attempts, next_attempt_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7)`,
    [e.id, e.accountId, e.platformId, e.connectionId, e.eventType, Buffer.from(e.bodyEnc.buffer, e.bodyEnc.byteOffset, e.bodyEnc.byteLength), e.createdAt],
  );
}

/** The webhook outbox on PostgreSQL. */
export class PgOutboxStore implements OutboxStore {
  private readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  async claimDue(now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    const rows = await this.db.all<ClaimRow & { next_attempt_at: number; seq: number }>(
      `WITH due AS (
         SELECT o.id FROM outbox o JOIN platforms p ON p.id = o.platform_id
          WHERE ((o.state = 'pending' AND o.next_attempt_at <= $1) OR o.state = 'disabled')
            AND (o.lease_until IS NULL OR o.lease_until <= $1)
            AND p.callback_url IS NOT NULL AND p.callback_disabled_at IS NULL
          ORDER BY o.next_attempt_at, o.seq
          LIMIT $2
          FOR UPDATE OF o SKIP LOCKED),
       leased AS (
         UPDATE outbox o SET state = 'pending', lease_until = $3 FROM due WHERE o.id = due.id
         RETURNING o.id, o.platform_id, o.event_type, o.body_enc, o.attempts, o.created_at, o.next_attempt_at, o.seq)
       SELECT l.*, p.callback_url, p.callback_disabled_at, p.webhook_secret_enc
         FROM leased l JOIN platforms p ON p.id = l.platform_id
        ORDER BY l.next_attempt_at, l.seq`,
      [now, limit, now + leaseMs],
    );
    return rows.map(claimFromRow);
  }

  async recordAttempt(id: string, a: DeliveryAttemptRecord, next: { state: DeliveryRecord['state']; nextAttemptAt: number }): Promise<void> {
    await this.db.tx(async (q) => {
      await q.run('INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, status, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)',
        [id, a.attempt, a.attemptedAt, a.status, clipError(a.error), Math.max(0, Math.round(a.durationMs))]);
      await q.run(
        `UPDATE outbox SET attempts = GREATEST(attempts, $1), state = $2, next_attempt_at = $3, lease_until = NULL,
                last_status = $4, last_error = $5, delivered_at = CASE WHEN $2 = 'delivered' THEN $6 ELSE delivered_at END
          WHERE id = $7`,
        [a.attempt, next.state, next.nextAttemptAt, a.status, clipError(a.error), a.attemptedAt, id],
      );
      if (next.state === 'disabled') {
        await q.run('UPDATE platforms SET callback_disabled_at = $1 WHERE id = (SELECT platform_id FROM outbox WHERE id = $2) AND callback_disabled_at IS NULL', [a.attemptedAt, id]);
      }
    });
  }

  async release(id: string): Promise<void> {
    await this.db.run('UPDATE outbox SET lease_until = NULL WHERE id = $1', [id]);
  }

  async listDeliveries(q: { accountId: string; platformId?: string; state?: string; limit: number; before?: number }): Promise<DeliveryRecord[]> {
    const where = ['account_id = $1'];
    const params: unknown[] = [q.accountId];
    if (q.platformId !== undefined) { params.push(q.platformId); where.push(`platform_id = $${params.length}`); }
    if (q.state !== undefined) { params.push(q.state); where.push(`state = $${params.length}`); }
    if (q.before !== undefined) { params.push(q.before); where.push(`seq < $${params.length}`); }
    params.push(Math.max(0, Math.floor(q.limit)));
    return (await this.db.all<OutboxRow>(`SELECT ${DELIVERY_COLUMNS} FROM outbox WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.length}`, params))
      .map(deliveryFromRow);
  }

  async getDelivery(id: string): Promise<(DeliveryRecord & { accountId: string }) | undefined> {
    const r = await this.db.get<OutboxRow>(`SELECT ${DELIVERY_COLUMNS} FROM outbox WHERE id = $1`, [id]);
    return r && { ...deliveryFromRow(r), accountId: r.account_id };
  }

  async listAttempts(deliveryId: string): Promise<DeliveryAttemptRecord[]> {
    return (await this.db.all<AttemptRow>(
      'SELECT attempt, attempted_at, status, error, duration_ms FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt, id', [deliveryId],
    )).map(attemptFromRow);
  }

  async redeliver(id: string, now: number): Promise<void> {
    await this.db.run("UPDATE outbox SET state = 'pending', next_attempt_at = $1 WHERE id = $2", [now, id]);
  }

  async stats(): Promise<{ pending: number; oldestPendingAt: number | null }> {
    const r = (await this.db.get<{ n: number; oldest: number | null }>(
      `SELECT COUNT(*) AS n, MIN(o.created_at) AS oldest
         FROM outbox o JOIN platforms p ON p.id = o.platform_id
        WHERE o.state = 'pending' AND p.callback_url IS NOT NULL AND p.callback_disabled_at IS NULL`,
    ))!;
    return { pending: r.n, oldestPendingAt: r.oldest };
  }
}
