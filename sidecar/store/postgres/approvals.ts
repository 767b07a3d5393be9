/**
 * PostgreSQL implementation of {@link ApprovalStore} and {@link UsageStore}:
 * step-up approvals (each state change with its chained audit row and outbox
 * event in one transaction; a decision and the expiry job race safely, each
 * change being a conditional UPDATE) and the usage counters of budgets and
 * rate limits (debited by `authz_decide` inside the verify commit).
 */
import type { PgDb, Querier } from './db.js';
import { insertOutboxEvent } from './outbox.js';
import { appendAudits } from './audit-append.js';
import type { ApprovalChange, ApprovalRecord, ApprovalState, ApprovalStore, UsageStore } from '../types.js';
import { approvalFromRow } from '../rows-audit.js';
import type { ApprovalRow } from '../rows-audit.js';

/**
 * Inserts a new approval unless the certificate has a pending one with the same fingerprint
 * (the partial unique index `approvals_one_pending`); returns whether it was inserted. Call it
 * inside the caller's transaction.
 */
export async function insertApproval(q: Querier, a: ApprovalRecord): Promise<boolean> {
  return (await q.run(`INSERT INTO approvals (id, account_id, connection_id, platform_id, agent_id, cert_id, scope, fingerprint, context, operation,
      state, note, created_at, expires_at, decided_at, settled_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) ON CONFLICT DO NOTHING`,
  [a.id, a.accountId, a.connectionId, a.platformId, a.agentId, a.certId, a.scope, a.fingerprint, JSON.stringify(a.context),
    a.operation === null ? null : JSON.stringify(a.operation), a.state, a.note, a.createdAt, a.expiresAt, a.decidedAt, a.settledAt])) === 1;
}

/** Approvals on PostgreSQL. */
export class PgApprovalStore implements ApprovalStore {
  private readonly db: PgDb;
  private readonly chain: boolean;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(db: PgDb, chain = true) {
    this.db = db;
    this.chain = chain;
  }

  async getApproval(id: string): Promise<ApprovalRecord | undefined> {
    const r = await this.db.get<ApprovalRow>('SELECT * FROM approvals WHERE id = $1', [id]);
    return r && approvalFromRow(r);
  }

  async listApprovals(q: { accountId: string; state?: ApprovalState; limit: number; before?: number }): Promise<ApprovalRecord[]> {
    const where = ['account_id = $1'];
    const params: unknown[] = [q.accountId];
    if (q.state !== undefined) { params.push(q.state); where.push(`state = $${params.length}`); }
    if (q.before !== undefined) { params.push(q.before); where.push(`seq < $${params.length}`); }
    params.push(Math.max(0, Math.floor(q.limit)));
    return (await this.db.all<ApprovalRow>(`SELECT * FROM approvals WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.length}`, params)).map(approvalFromRow);
  }

  async findForOperation(certId: string, fingerprint: string, settledAfter: number): Promise<ApprovalRecord | undefined> {
    const r = await this.db.get<ApprovalRow>(
      `SELECT * FROM approvals WHERE cert_id = $1 AND fingerprint = $2 AND (state IN ('pending', 'granted') OR settled_at > $3)
        ORDER BY seq DESC LIMIT 1`, [certId, fingerprint, settledAfter]);
    return r && approvalFromRow(r);
  }

  async decideApproval(id: string, d: { state: 'granted' | 'denied'; now: number; grantExpiresAt: number; note: string | null }, change: ApprovalChange): Promise<boolean> {
    return this.db.tx(async (q) => {
      const granted = d.state === 'granted';
      const changed = await q.run(
        `UPDATE approvals SET state = $1, decided_at = $2, expires_at = CASE WHEN $3 THEN $4::bigint ELSE expires_at END, note = $5, settled_at = $6
          WHERE id = $7 AND state = 'pending' AND expires_at > $2`,
        [d.state, d.now, granted, d.grantExpiresAt, d.note, granted ? null : d.now, id]);
      if (changed !== 1) return false;
      await appendAudits(q, [change.audit], this.chain);
      await insertOutboxEvent(q, change.event);
      return true;
    });
  }

  async expireDue(now: number, limit: number, change: (a: ApprovalRecord) => ApprovalChange): Promise<ApprovalRecord[]> {
    return this.db.tx(async (q) => {
      // SKIP LOCKED: replicas running the job at once take different rows.
      const due = (await q.all<ApprovalRow>(
        "SELECT * FROM approvals WHERE state IN ('pending', 'granted') AND expires_at <= $1 ORDER BY expires_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED",
        [now, Math.max(0, Math.floor(limit))])).map(approvalFromRow);
      const out: ApprovalRecord[] = [];
      for (const a of due) {
        if ((await q.run("UPDATE approvals SET state = 'expired', settled_at = expires_at WHERE id = $1 AND state = $2", [a.id, a.state])) !== 1) continue;
        const c = change(a);
        await appendAudits(q, [c.audit], this.chain);
        await insertOutboxEvent(q, c.event);
        out.push(a);
      }
      return out;
    });
  }
}

/** Usage counters on PostgreSQL. */
export class PgUsageStore implements UsageStore {
  private readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  async usage(certId: string, counters: { kind: 'budget' | 'calls'; windowStart: number }[]): Promise<number[]> {
    if (counters.length === 0) return [];
    const rows = await this.db.all<{ kind: string; window_start: number; used: number }>(
      'SELECT kind, window_start, used FROM usage_counters WHERE cert_id = $1 AND (kind, window_start) IN (SELECT * FROM unnest($2::text[], $3::bigint[]))',
      [certId, counters.map((c) => c.kind), counters.map((c) => c.windowStart)]);
    return counters.map((c) => rows.find((r) => r.kind === c.kind && r.window_start === c.windowStart)?.used ?? 0);
  }
}
