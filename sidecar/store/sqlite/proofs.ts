/**
 * The SQLite verify commit ({@link ProofStore.commitDecision}): in one
 * group-commit savepoint, the certificate re-read, the challenge consumed and
 * the account debited (counting the call, and its allow or deny, in the same
 * UPDATE), the decision's effects (spending a granted approval, debiting usage
 * counters, or recording a new pending approval with its audit row and event),
 * then the audit row linked into the account's hash chain and the decision's
 * explanation. Whatever fails rolls
 * the whole decision back and is the result. PostgreSQL's commit
 * (postgres/proofs.ts, PL/pgSQL) follows the same rules; the contract suite
 * holds both to them.
 */
import { get, run, sql } from '../sql/core.js';
import type { Work } from '../sql/core.js';
import { Refused, SqlProofStore, refusable } from '../sql/proofs.js';
import { appendAudits } from '../sql/audit-append.js';
import { insertApproval } from '../sql/approvals.js';
import { insertOutboxEvent } from '../sql/outbox.js';
import { insertExplanation } from '../sql/decisions.js';
import type { DecisionCommit, DecisionCommitResult, DecisionEffects } from '../types.js';

/** Consumes the challenge and debits the account; refuses with what failed. */
function* consume(challengeId: string | null, audience: string, now: number, accountId: string, price: number, decision?: 'allow' | 'deny'): Work<void> {
  if (challengeId !== null && (yield* run(sql`UPDATE challenges SET consumed_at = ${now} WHERE id = ${challengeId} AND consumed_at IS NULL
      AND expires_at > ${now} AND audience_connection_id = ${audience}`)) !== 1) throw new Refused('invalid_challenge');
  const allows = decision === 'allow' ? 1 : 0;
  const denies = decision === 'deny' ? 1 : 0;
  if ((yield* run(sql`UPDATE accounts SET credits_micros = credits_micros - ${price}, verify_calls = verify_calls + 1,
      verify_allows = verify_allows + ${allows}, verify_denies = verify_denies + ${denies} WHERE id = ${accountId} AND credits_micros >= ${price}`)) !== 1) {
    throw new Refused('credits_exhausted');
  }
}

/**
 * Applies `effects` at `now`; refuses with what failed. A counter debit is one upsert that adds
 * only while the sum stays within the limit, so concurrent debits never pass it together.
 */
function* applyEffects(effects: DecisionEffects, now: number, chain: boolean): Work<void> {
  if (effects.useApproval !== undefined && (yield* run(sql`UPDATE approvals SET state = 'used', settled_at = ${now}
      WHERE id = ${effects.useApproval} AND state = 'granted' AND expires_at > ${now}`)) !== 1) throw new Refused('approval_used');
  for (const d of effects.debits ?? []) {
    const exceeded = new Refused(d.kind === 'budget' ? 'budget_exceeded' : 'rate_exceeded');
    if (!(d.amount > 0) || d.amount > d.limit) throw exceeded;
    if ((yield* run(sql`INSERT INTO usage_counters (cert_id, kind, window_start, used) VALUES (${d.certId}, ${d.kind}, ${d.windowStart}, ${d.amount})
      ON CONFLICT (cert_id, kind, window_start) DO UPDATE SET used = used + excluded.used
      WHERE usage_counters.used + excluded.used <= ${d.limit}`)) !== 1) throw exceeded;
  }
  const r = effects.requestApproval;
  if (r !== undefined) {
    if (!(yield* insertApproval(r.approval))) throw new Refused('approval_exists');
    yield* appendAudits([r.audit], chain);
    yield* insertOutboxEvent(r.event);
  }
}

/** Challenges, decisions and audit on SQLite. */
export class SqliteProofStore extends SqlProofStore {
  async commitDecision(c: DecisionCommit): Promise<DecisionCommitResult> {
    const chain = this.chain;
    return refusable(this.r.tx((function* (): Work<DecisionCommitResult> {
      if (c.decision === 'allow' && c.certId !== null
        && (yield* get<{ status: string }>(sql`SELECT status FROM certificates WHERE id = ${c.certId}`))?.status !== 'approved') {
        throw new Refused('certificate_revoked');
      }
      yield* consume(c.challengeId, c.audienceConnectionId, c.now, c.accountId, c.priceMicros, c.decision);
      if (c.effects) yield* applyEffects(c.effects, c.now, chain);
      yield* appendAudits([c.audit], chain);
      if (c.explanation) yield* insertExplanation(c.explanation);
      return 'committed';
    })(), { group: true }));
  }

  async consumeAndDebit(challengeId: string | null, audience: string, now: number, accountId: string, price: number): Promise<DecisionCommitResult> {
    return refusable(this.r.tx((function* (): Work<DecisionCommitResult> {
      yield* consume(challengeId, audience, now, accountId, price);
      return 'committed';
    })(), { group: true }));
  }
}
