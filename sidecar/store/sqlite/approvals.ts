/**
 * SQLite implementation of {@link ApprovalStore} and {@link UsageStore}:
 * step-up approvals (each state change with its audit row and outbox event in
 * one transaction) and the usage counters of budgets and rate limits. The
 * writes a verify makes with its decision are in `effects.ts`.
 */
import type { Db } from './db.js';
import { insertOutboxEvent } from './outbox.js';
import type { ApprovalChange, ApprovalRecord, ApprovalState, ApprovalStore, AuditEventRecord, UsageStore } from '../types.js';
import { approvalFromRow } from '../rows-audit.js';
import type { ApprovalRow } from '../rows-audit.js';


/**
 * Inserts a new approval unless the certificate has a pending one with the same fingerprint
 * (the partial unique index `approvals_one_pending`); returns whether it was inserted. Call it
 * inside the caller's transaction.
 */
export function insertApproval(db: Db, a: ApprovalRecord): boolean {
  return db.run(`INSERT INTO approvals (id, account_id, connection_id, platform_id, agent_id, cert_id, scope, fingerprint, context, operation,
      state, note, created_at, expires_at, decided_at, settled_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
  a.id, a.accountId, a.connectionId, a.platformId, a.agentId, a.certId, a.scope, a.fingerprint, JSON.stringify(a.context),
  a.operation === null ? null : JSON.stringify(a.operation), a.state, a.note, a.createdAt, a.expiresAt, a.decidedAt, a.settledAt) === 1;
}

/** Approvals on SQLite. */
export class SqliteApprovalStore implements ApprovalStore {
  private readonly db: Db;
  private readonly insertAudit: (a: AuditEventRecord) => void;
  /** `insertAudit` writes one audit row inside the caller's transaction (the proof store's writer). */
  constructor(db: Db, insertAudit: (a: AuditEventRecord) => void) {
    this.db = db;
    this.insertAudit = insertAudit;
  }

  async getApproval(id: string): Promise<ApprovalRecord | undefined> {
    const r = this.db.get<ApprovalRow>('SELECT * FROM approvals WHERE id = ?', id);
    return r && approvalFromRow(r);
  }

  async listApprovals(q: { accountId: string; state?: ApprovalState; limit: number; before?: number }): Promise<ApprovalRecord[]> {
    const where = ['account_id = ?'];
    const params: unknown[] = [q.accountId];
    if (q.state !== undefined) { where.push('state = ?'); params.push(q.state); }
    if (q.before !== undefined) { where.push('seq < ?'); params.push(q.before); }
    params.push(Math.max(0, Math.floor(q.limit)));
    return this.db.all<ApprovalRow>(`SELECT * FROM approvals WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT ?`, ...params).map(approvalFromRow);
  }

  async findForOperation(certId: string, fingerprint: string, settledAfter: number): Promise<ApprovalRecord | undefined> {
    const r = this.db.get<ApprovalRow>(
      `SELECT * FROM approvals WHERE cert_id = ? AND fingerprint = ? AND (state IN ('pending', 'granted') OR settled_at > ?)
        ORDER BY seq DESC LIMIT 1`, certId, fingerprint, settledAfter);
    return r && approvalFromRow(r);
  }

  async decideApproval(id: string, d: { state: 'granted' | 'denied'; now: number; grantExpiresAt: number; note: string | null }, change: ApprovalChange): Promise<boolean> {
    return this.db.tx(() => {
      const granted = d.state === 'granted';
      const changed = this.db.run(
        `UPDATE approvals SET state = ?, decided_at = ?, expires_at = CASE WHEN ? = 1 THEN ? ELSE expires_at END, note = ?, settled_at = ?
          WHERE id = ? AND state = 'pending' AND expires_at > ?`,
        d.state, d.now, granted ? 1 : 0, d.grantExpiresAt, d.note, granted ? null : d.now, id, d.now);
      if (changed !== 1) return false;
      this.insertAudit(change.audit);
      insertOutboxEvent(this.db, change.event);
      return true;
    });
  }

  async expireDue(now: number, limit: number, change: (a: ApprovalRecord) => ApprovalChange): Promise<ApprovalRecord[]> {
    return this.db.tx(() => {
      const due = this.db.all<ApprovalRow>(
        "SELECT * FROM approvals WHERE state IN ('pending', 'granted') AND expires_at <= ? ORDER BY expires_at, seq LIMIT ?", now, Math.max(0, Math.floor(limit)),
      ).map(approvalFromRow);
      const out: ApprovalRecord[] = [];
      for (const a of due) {
        if (this.db.run("UPDATE approvals SET state = 'expired', settled_at = expires_at WHERE id = ? AND state = ?", a.id, a.state) !== 1) continue;
        const c = change(a);
        this.insertAudit(c.audit);
        insertOutboxEvent(this.db, c.event);
        out.push(a);
      }
      return out;
    });
  }
}

/** Usage counters on SQLite. */
export class SqliteUsageStore implements UsageStore {
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  async usage(certId: string, counters: { kind: 'budget' | 'calls'; windowStart: number }[]): Promise<number[]> {
    return counters.map((c) => this.db.get<{ used: number }>(
      'SELECT used FROM usage_counters WHERE cert_id = ? AND kind = ? AND window_start = ?', certId, c.kind, c.windowStart)?.used ?? 0);
  }
}
