/**
 * PostgreSQL implementation of {@link ProofStore}: challenges, presentation
 * (the claim, then the audit row), the verify commit, audit reads and the
 * challenge purge.
 *
 * A verify commit is one transaction: `authz_decide` (migrations.ts: the
 * certificate re-read, consume + debit, approval and usage-counter effects),
 * the new pending approval and its event if asked for, then the audit rows
 * appended to the account's hash chain (audit-append.ts). Without a new
 * approval it is one statement, `authz_commit_decision`, so the account's
 * row lock is held for one round trip. The
 * transaction does not wait for its WAL flush, so the account's row lock is
 * released at once and the commits of one busy account share their flushes.
 * Before answering, a committed decision passes a flush barrier: a tiny
 * transaction that does wait for its own commit record to be flushed, which
 * (the WAL being one sequence) flushes every commit before it; concurrent
 * commits share one barrier. So every
 * acknowledged verify is on disk; what a crash between the two can lose was
 * never acknowledged (the caller answered `indeterminate`).
 */
import type { PgDb } from './db.js';
import { appendArgs, appendAudits } from './audit-append.js';
import { insertOutboxEvent } from './outbox.js';
import { insertApproval } from './approvals.js';
import type { AuditEventRecord, AuditQuery, ChallengeRecord, DecisionCommit, DecisionCommitResult, ProofStore } from '../types.js';
import { auditFromRow, challengeFromRow } from '../rows.js';
import type { AuditRow, ChallengeRow } from '../rows.js';

const RESULTS: ReadonlySet<string> = new Set(['committed', 'invalid_challenge', 'credits_exhausted', 'certificate_revoked',
  'approval_used', 'approval_exists', 'budget_exceeded', 'rate_exceeded']);

function result(r: { r: string } | undefined): DecisionCommitResult {
  if (!r || !RESULTS.has(r.r)) throw new Error(`unexpected commit result ${JSON.stringify(r)}`);
  return r.r as DecisionCommitResult;
}

/** Thrown inside a transaction to roll it back with a result. */
class Refused {
  readonly result: DecisionCommitResult;
  constructor(result: DecisionCommitResult) {
    this.result = result;
  }
}

/** Challenges, decisions and audit on PostgreSQL. */
export class PgProofStore implements ProofStore {
  private readonly db: PgDb;
  private readonly chain: boolean;
  /** The flush barrier in flight, and the one queued behind it (see barrier()). */
  private flushing: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(db: PgDb, chain = true) {
    this.db = db;
    this.chain = chain;
  }

  async insertChallenge(c: ChallengeRecord): Promise<void> {
    await this.db.run('INSERT INTO challenges (id, audience_connection_id, account_id, expires_at, presented_at, consumed_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [c.id, c.audienceConnectionId, c.accountId, c.expiresAt, c.presentedAt, c.consumedAt, c.createdAt]);
  }

  async getChallenge(id: string): Promise<ChallengeRecord | undefined> {
    const r = await this.db.get<ChallengeRow>('SELECT * FROM challenges WHERE id = $1', [id]);
    return r && challengeFromRow(r);
  }

  async claimChallenge(id: string, audience: string, now: number): Promise<ChallengeRecord | undefined> {
    // Committed without waiting for its WAL flush: the barrier of recordPresentation flushes
    // it before a bundle is returned; a claim lost in a crash had returned nothing.
    const r = await this.db.tx(async (q) => {
      if ((await q.run("SELECT set_config('synchronous_commit', 'off', true)")) !== 1) throw new Error('set_config failed');
      return q.get<ChallengeRow>('UPDATE challenges SET presented_at = $3 WHERE id = $1 AND audience_connection_id = $2 AND presented_at IS NULL AND consumed_at IS NULL AND expires_at > $3 RETURNING *',
        [id, audience, now]);
    });
    return r && challengeFromRow(r);
  }

  async recordPresentation(a: AuditEventRecord): Promise<void> {
    await this.db.tx(async (q) => {
      if ((await q.run("SELECT set_config('synchronous_commit', 'off', true)")) !== 1) throw new Error('set_config failed');
      await appendAudits(q, [a], this.chain);
    });
    await this.barrier();
  }

  async creditsOf(accountId: string): Promise<number> {
    return (await this.db.get<{ c: number }>('SELECT credits_micros AS c FROM accounts WHERE id = $1', [accountId]))?.c ?? 0;
  }

  /**
   * Waits until the WAL is flushed past every commit made so far (see the file header). Callers
   * share barriers: a barrier that starts after a caller's commit returned covers it, so while one
   * is in flight the callers that arrive wait for the next one, which starts when it ends.
   */
  private barrier(): Promise<void> {
    if (!this.flushing) {
      const p = this.db.run('SELECT pg_current_xact_id()').then(() => undefined);
      this.flushing = p;
      // Both outcomes handled here: a `finally()` copy of a failed barrier (the database cut
      // mid-flush) would be a second, unhandled rejection, and that ends the process.
      const clear = (): void => { this.flushing = undefined; };
      p.then(clear, clear);
      return p;
    }
    this.queued ??= this.flushing.catch(() => undefined).then(() => {
      this.queued = undefined;
      return this.barrier();
    });
    return this.queued;
  }

  async commitDecision(c: DecisionCommit): Promise<DecisionCommitResult> {
    const e = c.effects;
    const debits = (e?.debits ?? []).map((d) => ({ cert_id: d.certId, kind: d.kind, window_start: d.windowStart, amount: d.amount, lim: d.limit }));
    const decide = [c.challengeId, c.audienceConnectionId, c.now, c.accountId, c.priceMicros, c.decision, c.certId, e?.useApproval ?? null, JSON.stringify(debits)];
    let r: DecisionCommitResult;
    if (!e?.requestApproval) {
      // The usual commit: one statement, so the account's locks are held for one round trip.
      const params = [...decide, ...appendArgs([c.audit], this.chain)];
      r = result(await this.db.get<{ r: string }>(`SELECT authz_commit_decision(${params.map((_, i) => `$${i + 1}`).join(', ')}) AS r`, params));
      if (r === 'committed') await this.barrier();
      return r;
    }
    try {
      r = await this.db.tx(async (q) => {
        const decided = result(await q.get<{ r: string }>('SELECT authz_decide($1, $2, $3, $4, $5, $6, $7, $8, $9) AS r', decide));
        if (decided !== 'committed') throw new Refused(decided);
        if (!(await insertApproval(q, e.requestApproval!.approval))) throw new Refused('approval_exists');
        await insertOutboxEvent(q, e.requestApproval!.event);
        await appendAudits(q, [e.requestApproval!.audit, c.audit], this.chain);
        return 'committed' as const;
      });
    } catch (err) {
      if (err instanceof Refused) return err.result;
      throw err;
    }
    await this.barrier();
    return r;
  }

  async consumeAndDebit(challengeId: string | null, audience: string, now: number, accountId: string, price: number): Promise<DecisionCommitResult> {
    const r = result(await this.db.get<{ r: string }>('SELECT authz_consume($1, $2, $3, $4, $5, 0, 0) AS r', [challengeId, audience, now, accountId, price]));
    if (r === 'committed') await this.barrier();
    return r;
  }

  async listAudit(q: AuditQuery): Promise<AuditEventRecord[]> {
    const where = ['account_id = $1'];
    const params: unknown[] = [q.accountId];
    const add = (sql: (p: string) => string, v: unknown): void => { params.push(v); where.push(sql(`$${params.length}`)); };
    if (q.before !== undefined) add((p) => `seq < ${p}`, q.before);
    if (q.eventType !== undefined) add((p) => `event_type = ${p}`, q.eventType);
    if (q.agentId !== undefined) add((p) => `agent_id = ${p}`, q.agentId);
    if (q.from !== undefined) add((p) => `created_at >= ${p}`, q.from);
    if (q.to !== undefined) add((p) => `created_at < ${p}`, q.to);
    if (q.decision !== undefined) add((p) => `details::jsonb ->> 'decision' = ${p}`, q.decision);
    if (q.reason !== undefined) add((p) => `details::jsonb ->> 'decision_reason' = ${p}`, q.reason);
    if (q.scope !== undefined) add((p) => `required_scope = ${p}`, q.scope);
    if (q.certId !== undefined) add((p) => `cert_id = ${p}`, q.certId);
    params.push(q.limit);
    return (await this.db.all<AuditRow>(`SELECT * FROM audit_events WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.length}`, params)).map(auditFromRow);
  }

  async purgeChallenges(olderThan: number): Promise<number> {
    return this.db.run('DELETE FROM challenges WHERE (consumed_at IS NOT NULL AND consumed_at < $1) OR expires_at < $1', [olderThan]);
  }
}
