/**
 * {@link OutboxStore} on either engine: the transactional webhook outbox and
 * its delivery-attempt log.
 *
 * Events are written by the other stores with {@link insertOutboxEvent}
 * inside the same transaction as the state change they describe, so an event
 * exists exactly when its change committed. The delivery worker
 * (`sidecar/webhooks/worker.ts`) drains the table through this store.
 *
 * Delivery states (column `outbox.state`):
 * - `pending`: waiting for its next attempt (`next_attempt_at`). A claimed
 *   delivery stays `pending` with `lease_until` set; if the process dies the
 *   lease runs out and the delivery becomes due again (same id, same body).
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
 *
 * On PostgreSQL a claim locks due rows with `FOR UPDATE SKIP LOCKED` and leases
 * them in the same statement, so each delivery goes to exactly one replica per
 * lease; SQLite's single writer claims with a SELECT and UPDATEs in one transaction.
 */
import { all, and, bytes, dialectOf, get, pick, run, sql } from './core.js';
import type { Runner, Work } from './core.js';
import type {
  ClaimedDelivery, DeliveryAttemptRecord, DeliveryRecord, OutboxEventInput, OutboxStore,
} from '../types.js';
import { DELIVERY_COLUMNS, attemptFromRow, claimFromRow, clipError as clip, deliveryFromRow } from '../rows.js';
import type { AttemptRow, ClaimRow, OutboxRow } from '../rows.js';
import { raw } from './core.js';

const COLUMNS = raw(DELIVERY_COLUMNS);
/** Due = pending and scheduled, or parked by a 410 whose platform was re-enabled since. Never leased or held. */
const due = (now: number) => sql`((o.state = 'pending' AND o.next_attempt_at <= ${now}) OR o.state = 'disabled')
            AND (o.lease_until IS NULL OR o.lease_until <= ${now})
            AND p.callback_url IS NOT NULL AND p.callback_disabled_at IS NULL`;

/**
 * Puts one event in the outbox, inside the caller's transaction: state `pending`, due at
 * `createdAt` (attempt 1 is immediate); `seq` is MAX + 1 on SQLite, the identity on PostgreSQL.
 */
export function* insertOutboxEvent(e: OutboxEventInput): Work<void> {
  const seq = (yield* dialectOf()) === 'sqlite' ? sql`(SELECT COALESCE(MAX(seq), 0) + 1 FROM outbox)` : sql`DEFAULT`;
  yield* run(sql`INSERT INTO outbox (id, seq, account_id, platform_id, connection_id, event_type, body_enc, state,
    attempts, next_attempt_at, created_at)
    VALUES (${e.id}, ${seq}, ${e.accountId}, ${e.platformId}, ${e.connectionId}, ${e.eventType}, ${bytes(e.bodyEnc)},
      'pending', 0,
    ${e.createdAt}, ${e.createdAt})`);
}

/** The webhook outbox. */
export class SqlOutboxStore implements OutboxStore {
  protected readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async claimDue(now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    const claim = `o.id, o.platform_id, o.event_type, o.body_enc, o.attempts, o.created_at`;
    const secrets = 'p.callback_url, p.callback_disabled_at, p.webhook_secret_enc';
    if (this.r.dialect === 'pg') {
      return (await this.r.read(all<ClaimRow>(sql`WITH due AS (
         SELECT o.id FROM outbox o JOIN platforms p ON p.id = o.platform_id WHERE ${due(now)}
          ORDER BY o.next_attempt_at, o.seq LIMIT ${limit} FOR UPDATE OF o SKIP LOCKED),
       leased AS (
         UPDATE outbox o SET state = 'pending', lease_until = ${now + leaseMs} FROM due WHERE o.id = due.id
         RETURNING ${raw(claim)}, o.next_attempt_at, o.seq)
       SELECT l.*, ${raw(secrets)} FROM leased l JOIN platforms p ON p.id = l.platform_id
         ORDER BY l.next_attempt_at, l.seq`))).map(claimFromRow);
    }
    return this.r.tx((function* () {
      const rows = yield* all<ClaimRow>(sql`SELECT ${raw(claim)}, ${raw(secrets)} FROM outbox o
        JOIN platforms p ON p.id = o.platform_id
        WHERE ${due(now)} ORDER BY o.next_attempt_at, o.seq LIMIT ${limit}`);
      for (const row of rows) yield* run(sql`UPDATE outbox SET state = 'pending', lease_until = ${now + leaseMs}
        WHERE id = ${row.id}`);
      return rows.map(claimFromRow);
    })());
  }

  async recordAttempt(
    id: string, a: DeliveryAttemptRecord, next: { state: DeliveryRecord['state']; nextAttemptAt: number },
  ): Promise<void> {
    await this.r.tx((function* () {
      yield* run(sql`INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, status, error, duration_ms)
        VALUES (${id}, ${a.attempt}, ${a.attemptedAt}, ${a.status}, ${clip(a.error)},
          ${Math.max(0, Math.round(a.durationMs))})`);
      yield* run(sql`UPDATE outbox SET attempts = ${pick('MAX', 'GREATEST')}(attempts, ${a.attempt}), state =
        ${next.state},
        next_attempt_at = ${next.nextAttemptAt}, lease_until = NULL, last_status = ${a.status}, last_error =
          ${clip(a.error)},
        delivered_at = CASE WHEN ${next.state === 'delivered' ? 1 : 0} = 1 THEN ${a.attemptedAt} ELSE delivered_at END
          WHERE id = ${id}`);
      if (next.state === 'disabled') {
        // 410 Gone: disable the platform's callback atomically with the attempt.
        yield* run(sql`UPDATE platforms SET callback_disabled_at = ${a.attemptedAt}
          WHERE id = (SELECT platform_id FROM outbox WHERE id = ${id}) AND callback_disabled_at IS NULL`);
      }
    })());
  }

  async release(id: string): Promise<void> {
    await this.r.write(run(sql`UPDATE outbox SET lease_until = NULL WHERE id = ${id}`));
  }

  async listDeliveries(
    q: { accountId: string; platformId?: string; state?: string; limit: number; before?: number },
  ): Promise<DeliveryRecord[]> {
    const where = and([sql`account_id = ${q.accountId}`, q.platformId !== undefined && sql`platform_id =
      ${q.platformId}`,
      q.state !== undefined && sql`state = ${q.state}`, q.before !== undefined && sql`seq < ${q.before}`]);
    const limit = Math.max(0, Math.floor(q.limit));
    const rows = await this.r.read(all<OutboxRow>(sql`SELECT ${COLUMNS} FROM outbox WHERE ${where} ORDER BY seq DESC
      LIMIT ${limit}`));
    return rows.map(deliveryFromRow);
  }

  async getDelivery(id: string): Promise<(DeliveryRecord & { accountId: string }) | undefined> {
    const row = await this.r.read(get<OutboxRow>(sql`SELECT ${COLUMNS} FROM outbox WHERE id = ${id}`));
    return row && { ...deliveryFromRow(row), accountId: row.account_id };
  }

  async listAttempts(deliveryId: string): Promise<DeliveryAttemptRecord[]> {
    return (await this.r.read(all<AttemptRow>(
      sql`SELECT attempt, attempted_at, status, error, duration_ms FROM delivery_attempts
        WHERE delivery_id = ${deliveryId} ORDER BY attempt, id`,
    ))).map(attemptFromRow);
  }

  /**
   * Makes a delivery due now (same id, same body), whatever its state. The attempt count is
   * kept: a dead delivery gets one more attempt (and is dead again if that fails); a pending one
   * continues its schedule. A delivery that is in flight keeps its lease and the in-flight result wins.
   */
  async redeliver(id: string, now: number): Promise<void> {
    await this.r.write(run(sql`UPDATE outbox SET state = 'pending', next_attempt_at = ${now} WHERE id = ${id}`));
  }

  /** Backlog of deliverable pending deliveries (held ones — no URL or disabled callback — are not counted). */
  async stats(): Promise<{ pending: number; oldestPendingAt: number | null }> {
    const row = (await this.r.read(get<{ n: number; oldest: number | null }>(sql`SELECT COUNT(*) AS n, MIN(o.created_at)
      AS oldest
      FROM outbox o JOIN platforms p ON p.id = o.platform_id
      WHERE o.state = 'pending' AND p.callback_url IS NOT NULL AND p.callback_disabled_at IS NULL`)))!;
    return { pending: row.n, oldestPendingAt: row.oldest };
  }
}
