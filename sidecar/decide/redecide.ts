/**
 * What a verify answers when the effects of its decision could not be
 * committed (`store/approval-types.ts` DecisionEffects): the commit stage
 * commits this deny instead, with no effects. A granted approval spent by a
 * concurrent verify is deny `approval_used`; a counter that a concurrent call
 * filled is deny `budget_exceeded` / `rate_exceeded`; a pending approval of
 * the same operation created concurrently is deny `approval_required` naming
 * that approval (one request per operation, one `approval.requested`).
 */
import type { ServiceContext } from '../context.js';
import type { DecisionCommitResult } from '../store/types.js';
import { read } from './stage.js';
import type { Decision } from './stage.js';

/** The deny to commit instead of `d` after the commit result `r`, or null when `r` is not an effect's failure. */
export async function redecide(ctx: ServiceContext, r: DecisionCommitResult, d: Decision): Promise<Decision | null> {
  switch (r) {
    case 'budget_exceeded':
    case 'rate_exceeded':
      return { decision: 'deny', reason: r };
    case 'approval_used':
      return { decision: 'deny', reason: 'approval_used', ...(d.approvalId ? { approvalId: d.approvalId, details: { approval_id: d.approvalId } } : {}) };
    case 'approval_exists': {
      const a = d.effects?.requestApproval?.approval;
      const pending = a === undefined ? undefined
        : await read(() => ctx.store.approvals.findForOperation(a.certId, a.fingerprint, a.createdAt - ctx.config.approvalTtlSeconds * 1000));
      return pending === undefined
        ? { decision: 'deny', reason: 'approval_required' }
        : { decision: 'deny', reason: 'approval_required', approvalId: pending.id, details: { approval_id: pending.id } };
    }
    default:
      return null;
  }
}
