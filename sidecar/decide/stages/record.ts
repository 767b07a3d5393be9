/**
 * Last stage of a grant check (in place of commit): appends the decision's
 * audit row (`access.evaluated`, its id the `decision_id`) and nothing else:
 * no challenge, credit, budget, call counter or approval is written, and the
 * decision's effects are dropped. No answer leaves before the row is durable;
 * a failure to write it is `audit_write_failed` (nothing recorded).
 * {@link preview} answers the same without the row (the action search).
 */
import type { VerifyResponse } from '../../../src/protocol.js';
import type { AuditEventRecord } from '../../store/types.js';
import { StoreFault, need } from '../stage.js';
import type { Stage, VerifyCall } from '../stage.js';
import { linkOf } from './commit.js';

/** The answer of a grant check's decision. */
function answerOf(call: VerifyCall): VerifyResponse {
  const request = need(call.request, 'request');
  const decision = need(call.decision, 'decision');
  const certId = call.cert?.payload.cert_id;
  return {
    decision: decision.decision, decision_reason: decision.reason, agent_id: need(call.subject, 'subject'),
    ...(certId !== undefined ? { cert_id: certId } : {}), scope: request.required_scope,
    ...(decision.constraint ? { constraint: decision.constraint } : {}), ...linkOf(decision),
    decision_id: call.decisionId, ...(decision.approvalId ? { approval_id: decision.approvalId } : {}),
  };
}

/** In place of record: the answer, with no audit row (the action search's grant checks). */
export const preview: Stage = {
  name: 'preview',
  run(_ctx, call) {
    call.response = answerOf(call);
  },
};

/** The record stage. */
export const record: Stage = {
  name: 'record',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    const request = need(call.request, 'request');
    const decision = need(call.decision, 'decision');
    const agentId = need(call.subject, 'subject');
    const certId = call.cert?.payload.cert_id;
    const audit: AuditEventRecord = {
      id: call.decisionId, accountId: auth.accountId, eventType: 'access.evaluated', connectionId: auth.connectionId,
      agentId, certId: certId ?? null, requiredScope: request.required_scope,
      details: { decision: decision.decision, decision_reason: decision.reason, decision_id: call.decisionId,
        mode: 'grant',
        ...(decision.constraint ? { constraint: decision.constraint } : {}),
        ...(request.context ? { context: request.context } : {}), ...decision.details },
      createdAt: call.now,
    };
    try {
      await ctx.store.proofs.recordPresentation(audit);
    } catch (err) {
      throw new StoreFault('write', err);
    }
    call.response = { ...answerOf(call), audit_event_id: audit.id };
  },
};
