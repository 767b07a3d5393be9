/**
 * SQLite implementation of {@link ProofStore}: challenges, the one-transaction
 * verify commit (challenge consumption + debit + audit row, linked into the
 * account's hash chain by `audit-append.ts`), audit reads and the challenge purge
 * (audit retention, which leaves a signed anchor, is in `audit.ts`).
 */
import type { Db } from './db.js';
import { applyEffects } from './effects.js';
import type { AuditEventRecord, AuditQuery, ChallengeRecord, DecisionCommit, DecisionCommitResult, ProofStore } from '../types.js';
import { appendAudit } from './audit-append.js';
import { auditFromRow, challengeFromRow } from '../rows.js';
import type { AuditRow, ChallengeRow } from '../rows.js';


/** Challenges, decisions and audit on SQLite. */
export class SqliteProofStore implements ProofStore {
  private readonly db: Db;
  private readonly chain: boolean;
  /** `chain`: link audit rows into the hash chain (false only with SIDECAR_AUDIT_CHAIN=off). */
  constructor(db: Db, chain = true) {
    this.db = db;
    this.chain = chain;
  }

  /** Appends one audit row, linked into its account's hash chain, inside the caller's transaction (the approval store writes its rows with it too). */
  insertAudit(a: AuditEventRecord): void {
    appendAudit(this.db, a, this.chain);
  }

  /**
   * Consumes the challenge and debits the account, counting the call (and, for a decision, its
   * allow or deny) in the same UPDATE; returns what failed (the caller rolls back).
   */
  private consume(challengeId: string | null, audience: string, now: number, accountId: string, price: number, decision?: 'allow' | 'deny'): DecisionCommitResult {
    if (challengeId !== null) {
      const consumed = this.db.run('UPDATE challenges SET consumed_at = ? WHERE id = ? AND consumed_at IS NULL AND expires_at > ? AND audience_connection_id = ?',
        now, challengeId, now, audience);
      if (consumed !== 1) return 'invalid_challenge';
    }
    const allows = decision === 'allow' ? 1 : 0;
    const denies = decision === 'deny' ? 1 : 0;
    const debited = this.db.run('UPDATE accounts SET credits_micros = credits_micros - ?, verify_calls = verify_calls + 1, verify_allows = verify_allows + ?, verify_denies = verify_denies + ? WHERE id = ? AND credits_micros >= ?',
      price, allows, denies, accountId, price);
    if (debited !== 1) return 'credits_exhausted';
    return 'committed';
  }

  // The write paths of challenge, present and verify use group commit (Db.groupTx): under load,
  // the transactions of one event-loop turn share one COMMIT; each resolves after that COMMIT.

  async insertChallenge(c: ChallengeRecord): Promise<void> {
    await this.db.groupTx(() => {
      this.db.run('INSERT INTO challenges (id, audience_connection_id, account_id, expires_at, presented_at, consumed_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        c.id, c.audienceConnectionId, c.accountId, c.expiresAt, c.presentedAt, c.consumedAt, c.createdAt);
    });
  }

  async getChallenge(id: string): Promise<ChallengeRecord | undefined> {
    const r = this.db.get<ChallengeRow>('SELECT * FROM challenges WHERE id = ?', id);
    return r && challengeFromRow(r);
  }

  async claimChallenge(id: string, audience: string, now: number): Promise<ChallengeRecord | undefined> {
    const r = await this.db.groupTx(() => this.db.get<ChallengeRow>(
      'UPDATE challenges SET presented_at = ? WHERE id = ? AND audience_connection_id = ? AND presented_at IS NULL AND consumed_at IS NULL AND expires_at > ? RETURNING *',
      now, id, audience, now));
    return r && challengeFromRow(r);
  }

  async recordPresentation(audit: AuditEventRecord): Promise<void> {
    await this.db.groupTx(() => this.insertAudit(audit));
  }

  async creditsOf(accountId: string): Promise<number> {
    return this.db.get<{ c: number }>('SELECT credits_micros AS c FROM accounts WHERE id = ?', accountId)?.c ?? 0;
  }

  async commitDecision(c: DecisionCommit): Promise<DecisionCommitResult> {
    const rollback = Symbol('rollback');
    let result: DecisionCommitResult = 'committed';
    try {
      await this.db.groupTx(() => {
        if (c.decision === 'allow' && c.certId !== null
          && this.db.get<{ status: string }>('SELECT status FROM certificates WHERE id = ?', c.certId)?.status !== 'approved') {
          result = 'certificate_revoked';
          throw rollback;
        }
        result = this.consume(c.challengeId, c.audienceConnectionId, c.now, c.accountId, c.priceMicros, c.decision);
        if (result !== 'committed') throw rollback;
        if (c.effects) result = applyEffects(this.db, c.effects, c.now, (a) => this.insertAudit(a));
        if (result !== 'committed') throw rollback;
        this.insertAudit(c.audit);
      });
    } catch (err) {
      if (err !== rollback) throw err;
    }
    return result;
  }

  async consumeAndDebit(challengeId: string | null, audience: string, now: number, accountId: string, price: number): Promise<DecisionCommitResult> {
    const rollback = Symbol('rollback');
    let result: DecisionCommitResult = 'committed';
    try {
      await this.db.groupTx(() => {
        result = this.consume(challengeId, audience, now, accountId, price);
        if (result !== 'committed') throw rollback;
      });
    } catch (err) {
      if (err !== rollback) throw err;
    }
    return result;
  }

  async listAudit(q: AuditQuery): Promise<AuditEventRecord[]> {
    const where = ['account_id = ?'];
    const params: unknown[] = [q.accountId];
    const add = (sql: string, v: unknown): void => { where.push(sql); params.push(v); };
    if (q.before !== undefined) add('seq < ?', q.before);
    if (q.eventType !== undefined) add('event_type = ?', q.eventType);
    if (q.agentId !== undefined) add('agent_id = ?', q.agentId);
    if (q.from !== undefined) add('created_at >= ?', q.from);
    if (q.to !== undefined) add('created_at < ?', q.to);
    if (q.decision !== undefined) add("json_extract(details, '$.decision') = ?", q.decision);
    if (q.reason !== undefined) add("json_extract(details, '$.decision_reason') = ?", q.reason);
    if (q.scope !== undefined) add('required_scope = ?', q.scope);
    if (q.certId !== undefined) add('cert_id = ?', q.certId);
    params.push(q.limit);
    return this.db.all<AuditRow>(`SELECT * FROM audit_events WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT ?`, ...params).map(auditFromRow);
  }

  async purgeChallenges(olderThan: number): Promise<number> {
    return this.db.tx(() => this.db.run('DELETE FROM challenges WHERE (consumed_at IS NOT NULL AND consumed_at < ?) OR expires_at < ?', olderThan, olderThan));
  }
}
