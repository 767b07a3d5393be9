/**
 * Stage 14, commit: one store transaction consumes the challenge, debits the
 * call (`billing.ts`'s price), counts it and appends the audit row; no
 * decision leaves before it. The transaction re-reads the certificate's
 * status for an allow: revoked since the delegation stage, it becomes deny
 * `delegation_revoked` and is committed as such. A challenge spent by a
 * concurrent verify since the challenge stage is the same 400
 * `invalid_challenge` that stage gives (unbilled); a balance spent meanwhile
 * is 402 `credits_exhausted`. A store failure is `audit_write_failed`
 * (nothing recorded or billed). The decision's effects (an approval spent or
 * requested, usage counters debited) commit in the same transaction; one that
 * cannot be written makes the call a deny (`redecide.ts`), committed as such.
 * The audit row's id is the call's `decision_id` (a retried transaction did not commit its row); the
 * decision's explanation is stored in the same transaction (decide/explanation.ts).
 */
import { ServiceError } from '../../../src/errors.js';
import type { AuditEventRecord, DecisionCommitResult } from '../../store/types.js';
import { VERIFY_PRICE_MICROS } from '../billing.js';
import { redecide } from '../redecide.js';
import { explanationRecord } from '../explanation.js';
import { StoreFault, need } from '../stage.js';
import type { Decision, Stage, VerifyCall } from '../stage.js';
import type { VerifyIdempotencyResult } from '../../../src/protocol.js';

/** The idempotency member of an allow: the claim to record under, or the answer to replay. */
function ledgerAnswer(ledger: NonNullable<VerifyCall['ledger']>): VerifyIdempotencyResult {
  if ('claimId' in ledger) return { status: 'claimed', claim_id: ledger.claimId };
  const r = ledger.replay;
  return { status: 'replay', response: { status: r.status, headers: r.headers, body: r.body, body_omitted: r.bodyOmitted } };
}

/** The failing link a deny under a chain names (stages/chain.ts, limits.ts), as an answer member. */
export function linkOf(d: Decision): { link?: { depth: number; cert_id: string } } {
  const link = d.decision === 'deny' ? d.details?.link as { depth: number; cert_id: string } | undefined : undefined;
  return link === undefined ? {} : { link };
}

/** The commit stage. */
export const commit: Stage = {
  name: 'commit',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    const request = need(call.request, 'request');
    const p = need(call.proof, 'proof').payload;
    let decision: Decision = need(call.decision, 'decision');
    const challengeId = need(call.spendableChallenge ?? undefined, 'challenge');
    // A replay (stages/idempotency.ts) spends its challenge and is audited, but debits nothing.
    const replay = call.ledger !== undefined && 'replay' in call.ledger ? call.ledger.replay : undefined;
    // This transaction spends the challenge: a refusal from here on is not billed again.
    call.spendableChallenge = null;
    for (let attempt = 0; attempt < 2; attempt++) {
      const audit: AuditEventRecord = {
        id: call.decisionId, accountId: auth.accountId, eventType: decision.decision === 'allow' ? 'proof.verified' : 'proof.rejected',
        connectionId: auth.connectionId, agentId: p.agent_id, certId: p.cert_id, requiredScope: request.required_scope,
        details: { decision: decision.decision, decision_reason: decision.reason, decision_id: call.decisionId,
          ...(decision.constraint ? { constraint: decision.constraint } : {}), ...decision.details,
          ...(replay && decision.decision === 'allow' ? { idempotent_replay: true } : {}) },
        createdAt: call.now,
      };
      // Made by the stage that decided it, or by this one when an earlier attempt's commit changed it
      // (the pipeline then names this stage too).
      const stage = attempt === 0 ? call.decidedBy : 'commit';
      const explanation = need(explanationRecord(call, decision, stage), 'explanation');
      let r: DecisionCommitResult;
      try {
        r = await ctx.store.proofs.commitDecision({
          challengeId, audienceConnectionId: auth.connectionId, now: call.now, accountId: auth.accountId,
          priceMicros: replay ? 0 : VERIFY_PRICE_MICROS, decision: decision.decision, certId: p.cert_id, audit,
          ...(decision.effects && !replay ? { effects: decision.effects } : {}),
          explanation,
        });
      } catch (err) {
        throw new StoreFault('write', err);
      }
      if (r === 'certificate_revoked') {
        ctx.caches.markRevoked(p.cert_id);
        decision = { decision: 'deny', reason: 'delegation_revoked' };
        continue;
      }
      // An effect that could not be written (a spent approval, a limit reached): a deny instead.
      const instead = await redecide(ctx, r, decision);
      if (instead !== null) {
        decision = instead;
        continue;
      }
      if (r === 'invalid_challenge') throw new ServiceError('invalid_challenge');
      if (r === 'credits_exhausted') throw new ServiceError('credits_exhausted');
      ctx.metrics.challenges.inc({ event: 'consumed' });
      ctx.metrics.verifyDecisions.inc({ decision: decision.decision, reason: decision.reason });
      call.decision = decision;
      call.explained = true;
      call.response = {
        decision: decision.decision, decision_reason: decision.reason, agent_id: p.agent_id, cert_id: p.cert_id,
        scope: request.required_scope, ...(decision.constraint ? { constraint: decision.constraint } : {}),
        ...linkOf(decision), audit_event_id: audit.id,
        decision_id: call.decisionId, ...(decision.approvalId ? { approval_id: decision.approvalId } : {}),
        ...(decision.decision === 'allow' && call.ledger ? { idempotency: ledgerAnswer(call.ledger) } : {}),
      };
      return;
    }
    throw new StoreFault('write', new Error('decision commit did not settle'));
  },
};
