/**
 * The PostgreSQL verify commit ({@link ProofStore.commitDecision}), one
 * transaction: `authz_decide` (migrations.ts: the certificate re-read,
 * consume + debit, approval and usage-counter effects), the new pending
 * approval and its event if asked for, then the audit rows appended to the
 * account's hash chain (sql/audit-append.ts) and the decision's explanation.
 * Without a new approval it is one statement, `authz_commit_decision` (with the
 * explanation's insert in a CTE), so the account's row lock is held for one
 * round trip. The transaction does not wait for its WAL flush, so the account's
 * row lock is released at once and the commits of one busy account share their
 * flushes. Before answering, a committed decision passes the flush barrier
 * (runner.ts), so every acknowledged verify is on disk; what a crash between
 * the two can lose was never acknowledged (the caller answered `indeterminate`).
 */
import { get, list, sql } from '../sql/core.js';
import type { Work } from '../sql/core.js';
import { Refused, SqlProofStore, refusable } from '../sql/proofs.js';
import { appendArgs, appendAudits } from '../sql/audit-append.js';
import { insertApproval } from '../sql/approvals.js';
import { insertOutboxEvent } from '../sql/outbox.js';
import { insertExplanation } from '../sql/decisions.js';
import type { DecisionCommit, DecisionCommitResult, DecisionRecord } from '../types.js';

const RESULTS: ReadonlySet<string> = new Set(['committed', 'invalid_challenge', 'credits_exhausted', 'certificate_revoked',
  'approval_used', 'approval_exists', 'budget_exceeded', 'rate_exceeded']);

/**
 * `commit` (one `SELECT … AS r` of a commit function) that also stores `x` when its result is
 * `committed`, in the same statement: the function runs once (a CTE read twice is materialized),
 * and the explanation is written in its transaction, or not at all.
 */
function withExplanation(commit: ReturnType<typeof sql>, x: DecisionRecord): ReturnType<typeof sql> {
  const json = JSON.stringify(x.explanation);
  return sql`WITH d AS (${commit}), e AS (INSERT INTO decision_explanations (id, account_id, connection_id, explanation,
      created_at) SELECT ${x.id}::text, ${x.accountId}::text, ${x.connectionId}::text, ${json}::text, ${x.createdAt}::bigint
      FROM d WHERE d.r = 'committed' ON CONFLICT DO NOTHING)
    SELECT r FROM d`;
}

function* decided(call: ReturnType<typeof sql>): Work<DecisionCommitResult> {
  const r = yield* get<{ r: string }>(call);
  if (!r || !RESULTS.has(r.r)) throw new Error(`unexpected commit result ${JSON.stringify(r)}`);
  return r.r as DecisionCommitResult;
}

/** Challenges, decisions and audit on PostgreSQL. */
export class PgProofStore extends SqlProofStore {
  async commitDecision(c: DecisionCommit): Promise<DecisionCommitResult> {
    const e = c.effects;
    const debits = (e?.debits ?? []).map((d) => ({ cert_id: d.certId, kind: d.kind, window_start: d.windowStart, amount: d.amount, lim: d.limit }));
    const decide = [c.challengeId, c.audienceConnectionId, c.now, c.accountId, c.priceMicros, c.decision, c.certId, e?.useApproval ?? null,
      JSON.stringify(debits)];
    const request = e?.requestApproval;
    const chain = this.chain;
    // The usual commit: one statement, so the account's locks are held for one round trip.
    const commit = sql`SELECT authz_commit_decision(${list([...decide, ...appendArgs([c.audit], chain)])}) AS r`;
    const x = c.explanation;
    const r = !request
      ? await this.r.read(decided(x ? withExplanation(commit, x) : commit))
      : await refusable(this.r.tx((function* (): Work<DecisionCommitResult> {
        const d = yield* decided(sql`SELECT authz_decide(${list(decide)}) AS r`);
        if (d !== 'committed') throw new Refused(d);
        if (!(yield* insertApproval(request.approval))) throw new Refused('approval_exists');
        yield* insertOutboxEvent(request.event);
        yield* appendAudits([request.audit, c.audit], chain);
        if (x) yield* insertExplanation(x);
        return 'committed';
      })()));
    if (r === 'committed') await this.r.flushBarrier();
    return r;
  }

  async consumeAndDebit(challengeId: string | null, audience: string, now: number, accountId: string, price: number): Promise<DecisionCommitResult> {
    const r = await this.r.read(decided(sql`SELECT authz_consume(${challengeId}, ${audience}, ${now}, ${accountId}, ${price}, 0, 0) AS r`));
    if (r === 'committed') await this.r.flushBarrier();
    return r;
  }
}
