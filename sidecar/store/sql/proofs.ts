/**
 * {@link ProofStore} on either engine, but for the verify commit: challenges,
 * presentation (the claim, then the audit row), audit reads and the challenge
 * purge. The verify commit (challenge consumption + debit + effects + audit
 * rows in one transaction) is each engine's own: SQLite runs it in its group
 * commit (sqlite/proofs.ts), PostgreSQL in one round trip to PL/pgSQL
 * (postgres/proofs.ts).
 *
 * On PostgreSQL the claim and the presentation commit without waiting for
 * their WAL flush, and the presentation passes the flush barrier before a
 * bundle is returned: a claim lost in a crash had returned nothing.
 */
import { all, get, join, pick, run, sql } from './core.js';
import type { Runner } from './core.js';
import { appendAudits } from './audit-append.js';
import type {
  AuditEventRecord, AuditQuery, ChallengeRecord, DecisionCommit, DecisionCommitResult, ProofStore,
} from '../types.js';
import { auditFromRow, challengeFromRow } from '../rows.js';
import type { AuditRow, ChallengeRow } from '../rows.js';

/** Thrown inside a commit's transaction to roll it back with a result. */
export class Refused {
  readonly result: DecisionCommitResult;
  constructor(result: DecisionCommitResult) {
    this.result = result;
  }
}

/** Runs a commit that may be refused: its result, or the refusal's. */
export async function refusable(commit: Promise<DecisionCommitResult>): Promise<DecisionCommitResult> {
  try {
    return await commit;
  } catch (err) {
    if (err instanceof Refused) return err.result;
    throw err;
  }
}

/** A JSON field of `audit_events.details`. */
const detail = (field: string) => pick(`json_extract(details, '$.${field}')`, `details::jsonb ->> '${field}'`);

/** Challenges, presentations and audit reads; the engines add the verify commit. */
export abstract class SqlProofStore implements ProofStore {
  protected readonly r: Runner;
  protected readonly chain: boolean;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(r: Runner, chain = true) {
    this.r = r;
    this.chain = chain;
  }

  abstract commitDecision(c: DecisionCommit): Promise<DecisionCommitResult>;
  abstract consumeAndDebit(
    challengeId: string | null, audience: string, now: number, accountId: string, price: number,
  ): Promise<DecisionCommitResult>;

  // The write paths of challenge and present use SQLite's group commit: under load, the
  // transactions of one event-loop turn share one COMMIT; each resolves after that COMMIT.

  async insertChallenge(c: ChallengeRecord): Promise<void> {
    await this.r.write(run(sql`INSERT INTO challenges (id, audience_connection_id, account_id, expires_at, presented_at,
      consumed_at, created_at)
      VALUES (${c.id}, ${c.audienceConnectionId}, ${c.accountId}, ${c.expiresAt}, ${c.presentedAt}, ${c.consumedAt},
        ${c.createdAt})`), { group: true });
  }

  async getChallenge(id: string): Promise<ChallengeRecord | undefined> {
    const row = await this.r.read(get<ChallengeRow>(sql`SELECT * FROM challenges WHERE id = ${id}`));
    return row && challengeFromRow(row);
  }

  async claimChallenge(id: string, audience: string, now: number): Promise<ChallengeRecord | undefined> {
    const row = await this.r.write(get<ChallengeRow>(sql`UPDATE challenges SET presented_at = ${now} WHERE id = ${id}
      AND audience_connection_id = ${audience} AND presented_at IS NULL AND consumed_at IS NULL AND expires_at > ${now}
        RETURNING *`),
    { group: true, lazy: true });
    return row && challengeFromRow(row);
  }

  async recordPresentation(a: AuditEventRecord): Promise<void> {
    await this.r.write(appendAudits([a], this.chain), { group: true, lazy: true });
    await this.r.flushBarrier();
  }

  async creditsOf(accountId: string): Promise<number> {
    return (await this.r.read(get<{ c: number }>(sql`SELECT credits_micros AS c FROM accounts
      WHERE id = ${accountId}`)))?.c ?? 0;
  }

  async listAudit(q: AuditQuery): Promise<AuditEventRecord[]> {
    const where = [sql`account_id = ${q.accountId}`];
    if (q.before !== undefined) where.push(sql`seq < ${q.before}`);
    if (q.eventType !== undefined) where.push(sql`event_type = ${q.eventType}`);
    if (q.agentId !== undefined) where.push(sql`agent_id = ${q.agentId}`);
    if (q.from !== undefined) where.push(sql`created_at >= ${q.from}`);
    if (q.to !== undefined) where.push(sql`created_at < ${q.to}`);
    if (q.decision !== undefined) where.push(sql`${detail('decision')} = ${q.decision}`);
    if (q.reason !== undefined) where.push(sql`${detail('decision_reason')} = ${q.reason}`);
    if (q.scope !== undefined) where.push(sql`required_scope = ${q.scope}`);
    if (q.certId !== undefined) where.push(sql`cert_id = ${q.certId}`);
    return (await this.r.read(all<AuditRow>(sql`SELECT * FROM audit_events WHERE ${join(where, ' AND ')}
      ORDER BY seq DESC LIMIT ${q.limit}`)))
      .map(auditFromRow);
  }

  async purgeChallenges(olderThan: number): Promise<number> {
    return this.r.write(run(sql`DELETE FROM challenges WHERE (consumed_at IS NOT NULL AND consumed_at < ${olderThan})
      OR expires_at < ${olderThan}`));
  }
}
