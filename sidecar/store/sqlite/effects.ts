/**
 * The effects a verify commits with its decision on SQLite ({@link DecisionEffects}):
 * spending a granted approval, debiting usage counters, or recording a new
 * pending approval with its `approval.requested` audit row and event. They run
 * inside the decision's own transaction (its group-commit savepoint), after
 * the challenge is consumed and the call debited; a failure returns what
 * failed and the caller rolls the whole decision back.
 */
import type { Db } from './db.js';
import { insertOutboxEvent } from './outbox.js';
import { insertApproval } from './approvals.js';
import type { AuditEventRecord, DecisionCommitResult, DecisionEffects } from '../types.js';

/**
 * Applies `effects` at `now`; returns `committed` or the result that failed (the caller rolls back).
 * A counter debit is one upsert that adds only while the sum stays within the limit, so
 * concurrent debits (one writer at a time on SQLite) never pass it together.
 */
export function applyEffects(db: Db, effects: DecisionEffects, now: number, insertAudit: (a: AuditEventRecord) => void): DecisionCommitResult {
  if (effects.useApproval !== undefined
    && db.run("UPDATE approvals SET state = 'used', settled_at = ? WHERE id = ? AND state = 'granted' AND expires_at > ?", now, effects.useApproval, now) !== 1) {
    return 'approval_used';
  }
  for (const d of effects.debits ?? []) {
    const exceeded = d.kind === 'budget' ? 'budget_exceeded' : 'rate_exceeded';
    if (!(d.amount > 0) || d.amount > d.limit) return exceeded;
    const added = db.run(
      `INSERT INTO usage_counters (cert_id, kind, window_start, used) VALUES (?, ?, ?, ?)
       ON CONFLICT (cert_id, kind, window_start) DO UPDATE SET used = used + excluded.used WHERE usage_counters.used + excluded.used <= ?`,
      d.certId, d.kind, d.windowStart, d.amount, d.limit);
    if (added !== 1) return exceeded;
  }
  const r = effects.requestApproval;
  if (r !== undefined) {
    if (!insertApproval(db, r.approval)) return 'approval_exists';
    insertAudit(r.audit);
    insertOutboxEvent(db, r.event);
  }
  return 'committed';
}
