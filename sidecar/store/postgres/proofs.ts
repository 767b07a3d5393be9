/**
 * PostgreSQL implementation of {@link ProofStore}: challenges, presentation,
 * the verify commit (one statement calling `authz_commit_decision`, see
 * migrations.ts: all or nothing), audit reads and purges.
 *
 * The verify commit's transaction does not wait for its WAL flush, so that
 * the account's row lock is released at once and the commits of one busy
 * account share their flushes. Before answering, a committed decision passes
 * a flush barrier: a tiny transaction that does wait for its own commit
 * record to be flushed, which (the WAL being one sequence) flushes every
 * commit before it. So every acknowledged verify is on disk; what a crash
 * between the two can lose was never acknowledged (the caller answered
 * `indeterminate`).
 */
import type { PgDb } from './db.js';
import type { AuditEventRecord, ChallengeRecord, DecisionCommit, DecisionCommitResult, ProofStore } from '../types.js';
import { auditFromRow, challengeFromRow } from '../rows.js';
import type { AuditRow, ChallengeRow } from '../rows.js';

const RESULTS: ReadonlySet<string> = new Set(['committed', 'invalid_challenge', 'credits_exhausted', 'certificate_revoked']);

function result(r: { r: string } | undefined): DecisionCommitResult {
  if (!r || !RESULTS.has(r.r)) throw new Error(`unexpected commit result ${JSON.stringify(r)}`);
  return r.r as DecisionCommitResult;
}

/** Challenges, decisions and audit on PostgreSQL. */
export class PgProofStore implements ProofStore {
  private readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  async insertChallenge(c: ChallengeRecord): Promise<void> {
    await this.db.run('INSERT INTO challenges (id, audience_connection_id, account_id, expires_at, presented_at, consumed_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [c.id, c.audienceConnectionId, c.accountId, c.expiresAt, c.presentedAt, c.consumedAt, c.createdAt]);
  }

  async getChallenge(id: string): Promise<ChallengeRecord | undefined> {
    const r = await this.db.get<ChallengeRow>('SELECT * FROM challenges WHERE id = $1', [id]);
    return r && challengeFromRow(r);
  }

  async presentChallenge(id: string, now: number, a: AuditEventRecord): Promise<boolean> {
    // One statement: the audit row is inserted only if the UPDATE marked the challenge, and a
    // failing insert takes the UPDATE back with it.
    return (await this.db.run(
      `WITH c AS (UPDATE challenges SET presented_at = $2 WHERE id = $1 AND presented_at IS NULL AND consumed_at IS NULL AND expires_at > $2 RETURNING id)
       INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at)
       SELECT $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text, $11::bigint FROM c`,
      [id, now, a.id, a.accountId, a.eventType, a.connectionId, a.agentId, a.certId, a.requiredScope, JSON.stringify(a.details), a.createdAt])) === 1;
  }

  async creditsOf(accountId: string): Promise<number> {
    return (await this.db.get<{ c: number }>('SELECT credits_micros AS c FROM accounts WHERE id = $1', [accountId]))?.c ?? 0;
  }

  /** Waits until the WAL is flushed past every commit made so far (see the file header). */
  private async flushed(r: DecisionCommitResult): Promise<DecisionCommitResult> {
    if (r === 'committed') await this.db.run('SELECT pg_current_xact_id()');
    return r;
  }

  async commitDecision(c: DecisionCommit): Promise<DecisionCommitResult> {
    const a = c.audit;
    return this.flushed(result(await this.db.get<{ r: string }>(
      'SELECT authz_commit_decision($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) AS r',
      [c.challengeId, c.audienceConnectionId, c.now, c.accountId, c.priceMicros, c.decision, c.certId,
        a.id, a.eventType, a.connectionId, a.agentId, a.certId, a.requiredScope, JSON.stringify(a.details), a.createdAt])));
  }

  async consumeAndDebit(challengeId: string | null, audience: string, now: number, accountId: string, price: number): Promise<DecisionCommitResult> {
    return this.flushed(result(await this.db.get<{ r: string }>('SELECT authz_consume($1, $2, $3, $4, $5, 0, 0) AS r', [challengeId, audience, now, accountId, price])));
  }

  async listAudit(q: { accountId: string; limit: number; before?: number; eventType?: string; agentId?: string }): Promise<AuditEventRecord[]> {
    const where = ['account_id = $1'];
    const params: unknown[] = [q.accountId];
    if (q.before !== undefined) { params.push(q.before); where.push(`seq < $${params.length}`); }
    if (q.eventType !== undefined) { params.push(q.eventType); where.push(`event_type = $${params.length}`); }
    if (q.agentId !== undefined) { params.push(q.agentId); where.push(`agent_id = $${params.length}`); }
    params.push(q.limit);
    return (await this.db.all<AuditRow>(`SELECT * FROM audit_events WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.length}`, params)).map(auditFromRow);
  }

  async purgeChallenges(olderThan: number): Promise<number> {
    return this.db.run('DELETE FROM challenges WHERE (consumed_at IS NOT NULL AND consumed_at < $1) OR expires_at < $1', [olderThan]);
  }

  async purgeAudit(olderThan: number): Promise<number> {
    return this.db.run('DELETE FROM audit_events WHERE created_at < $1', [olderThan]);
  }
}
