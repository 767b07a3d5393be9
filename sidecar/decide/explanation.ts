/**
 * The explanation of a recorded decision (`src/explain.ts`), stored under its
 * `decision_id`: what `GET /v1/service/decisions/{id}` answers. A verify's is
 * built by the commit stage for the decision it commits and written in that
 * transaction ({@link explanationRecord}), so one sync covers both. A grant
 * check's is stored after its audit row ({@link storeExplanation}); the answer
 * does not depend on it, so a failure to store it is logged (and counted as a
 * store error by the store metrics), never a refusal.
 */
import type { FastifyBaseLogger } from 'fastify';
import { explainDecision } from '../../src/explain.js';
import type { ServiceContext } from '../context.js';
import type { DecisionRecord } from '../store/types.js';
import type { Decision, VerifyCall } from './stage.js';

/**
 * The stored form of `call`'s explanation for `d` (by default its current decision), made by the stage
 * named `stage` (by default the one the pipeline recorded); undefined before authentication and parsing.
 */
export function explanationRecord(call: Readonly<VerifyCall>, d: Decision | undefined = call.decision,
  stage: string = call.decidedBy ?? 'delegation'): DecisionRecord | undefined {
  const auth = call.auth;
  const request = call.request;
  if (!d || !auth || !request) return undefined;
  const chain = d.details?.chain as string[] | undefined;
  const link = d.details?.link as { depth: number; cert_id: string } | undefined;
  // A deny under a chain is explained by the link it failed at.
  const failed = link ? call.chain?.find((c) => c.payload.cert_id === link.cert_id) : undefined;
  const cert = (failed ?? call.cert)?.payload;
  const explanation = explainDecision({
    decisionId: call.decisionId, now: call.now, mode: call.mode, decision: d.decision, reason: d.reason,
    stage, agentId: call.subject ?? call.proof?.payload.agent_id ?? '',
    scope: request.required_scope, context: request.context, cert, constraint: d.constraint, approvalId: d.approvalId,
    approvalState: call.approvalState, approvalRetryAt: call.approvalRetryAt, counters: call.counters,
    currency: cert?.constraints?.budget?.currency, chain, link,
  });
  return { id: call.decisionId, accountId: auth.accountId, connectionId: auth.connectionId, explanation,
    createdAt: call.now };
}

/** Builds and stores the explanation of `call`'s recorded decision (a grant check's; see the file header). */
export async function storeExplanation(ctx: ServiceContext, call: Readonly<VerifyCall>,
  log: FastifyBaseLogger): Promise<void> {
  const record = explanationRecord(call);
  if (!record) return;
  try {
    await ctx.store.decisions.recordExplanation(record);
  } catch (err) {
    log.error({ err, decision_id: call.decisionId }, 'the explanation of a decision could not be stored');
  }
}
