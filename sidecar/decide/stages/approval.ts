/**
 * Stage 13, approval: step-up approval of single actions (issue 23,
 * docs/api.md "Approvals"). For an allow whose scope (and amount) the
 * certificate's `require_approval` rule names, the approval of this exact
 * operation (its fingerprint: certificate, scope, context, bound operation)
 * decides:
 *
 * | approval of the operation | decision |
 * |---|---|
 * | none (or settled longer than one lifetime ago) | deny `approval_required`; commit records a new pending approval and sends `approval.requested` |
 * | `pending` | deny `approval_required` (the same `approval_id`) |
 * | `granted` | allow; commit spends the approval in the same transaction (a concurrent use loses: deny `approval_used`) |
 * | `used` / `denied` / `expired` (settled within one lifetime) | deny `approval_used` / `approval_denied` / `approval_expired` |
 *
 * An approval past its `expires_at` that the expiry job has not settled yet is
 * expired first (with its webhook), then read again. A grant check (no proof:
 * the operation is unbound) reads the same table but requests nothing: with no
 * approval it is deny `approval_required` without an `approval_id`, and a
 * granted approval is not spent.
 */
import { approvalApplies } from '../../../src/approval-rule.js';
import { expireApprovals } from '../../approvals/expiry.js';
import { approvalChange, contextRecord, newApproval, operationFingerprint } from '../../approvals/records.js';
import type { ApprovalRecord } from '../../store/types.js';
import { need, read } from '../stage.js';
import type { Decision, Stage } from '../stage.js';
import { isReplay } from './idempotency.js';

const SETTLED_DENY = { used: 'approval_used', denied: 'approval_denied', expired: 'approval_expired' } as const;

/** The approval stage. */
export const approval: Stage = {
  name: 'approval',
  async run(ctx, call) {
    const decision = need(call.decision, 'decision');
    // A replay's operation was approved (and the approval spent) by the request it repeats.
    if (decision.decision !== 'allow' || isReplay(call)) return;
    const cert = need(call.cert, 'cert').payload;
    const request = need(call.request, 'request');
    if (!approvalApplies(cert.constraints?.require_approval, request.required_scope, request.context)) return;
    const auth = need(call.auth, 'auth');
    const operation = call.mode === 'grant' ? null : need(call.proof, 'proof').payload.operation ?? null;
    const context = contextRecord(request.context);
    const fingerprint = operationFingerprint(cert.cert_id, request.required_scope, context, operation);
    const settledAfter = call.now - ctx.config.approvalTtlSeconds * 1000;
    const find = (): Promise<ApprovalRecord | undefined> => read(() => ctx.store.approvals.findForOperation(cert.cert_id, fingerprint, settledAfter));
    let a = await find();
    if (a !== undefined && (a.state === 'pending' || a.state === 'granted') && a.expiresAt <= call.now) {
      await read(() => expireApprovals(ctx));
      a = await find();
    }
    call.approvalState = a?.state ?? 'none';
    let next: Decision;
    if (a === undefined && call.mode === 'grant') {
      next = { decision: 'deny', reason: 'approval_required' };
    } else if (a === undefined) {
      const created = newApproval(ctx, {
        accountId: auth.accountId, connectionId: auth.connectionId, platformId: auth.platformId, agentId: cert.subject.agent_id,
        certId: cert.cert_id, scope: request.required_scope, context, operation, fingerprint, now: call.now,
      });
      const change = approvalChange(ctx, created, 'approval.requested', call.now, { expires_at: new Date(created.expiresAt).toISOString() });
      next = { decision: 'deny', reason: 'approval_required', approvalId: created.id, effects: { requestApproval: { approval: created, ...change } } };
    } else if (a.state === 'pending') {
      next = { decision: 'deny', reason: 'approval_required', approvalId: a.id };
    } else if (a.state === 'granted') {
      next = { ...decision, approvalId: a.id, effects: { ...decision.effects, useApproval: a.id } };
    } else {
      next = { decision: 'deny', reason: SETTLED_DENY[a.state], approvalId: a.id };
      // A settled approval answers while settled_at > now - TTL (findForOperation); from then on, a new one.
      if (a.settledAt !== null) call.approvalRetryAt = a.settledAt + ctx.config.approvalTtlSeconds * 1000;
    }
    call.decision = { ...next, details: { ...(next.decision === 'allow' ? next.details : {}),
      ...(next.approvalId !== undefined ? { approval_id: next.approvalId } : {}) } };
  },
};
