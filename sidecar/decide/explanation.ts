/**
 * Stores the explanation of a recorded decision (`src/explain.ts`) under its
 * `decision_id`, after its audit row: what `GET /v1/service/decisions/{id}`
 * answers. The answer does not depend on it: a failure to store it is logged
 * (and counted as a store error by the store metrics), never a refusal.
 */
import type { FastifyBaseLogger } from 'fastify';
import { explainDecision } from '../../src/explain.js';
import type { ServiceContext } from '../context.js';
import type { VerifyCall } from './stage.js';

/** Builds and stores the explanation of `call`'s decision (allow or deny, recorded). */
export async function storeExplanation(ctx: ServiceContext, call: Readonly<VerifyCall>,
  log: FastifyBaseLogger): Promise<void> {
  const d = call.decision;
  const auth = call.auth;
  const request = call.request;
  if (!d || !auth || !request) return;
  const chain = d.details?.chain as string[] | undefined;
  const link = d.details?.link as { depth: number; cert_id: string } | undefined;
  // A deny under a chain is explained by the link it failed at.
  const failed = link ? call.chain?.find((c) => c.payload.cert_id === link.cert_id) : undefined;
  const cert = (failed ?? call.cert)?.payload;
  const explanation = explainDecision({
    decisionId: call.decisionId, now: call.now, mode: call.mode, decision: d.decision, reason: d.reason,
    stage: call.decidedBy ?? 'delegation', agentId: call.subject ?? call.proof?.payload.agent_id ?? '',
    scope: request.required_scope, context: request.context, cert, constraint: d.constraint, approvalId: d.approvalId,
    approvalState: call.approvalState, approvalRetryAt: call.approvalRetryAt, counters: call.counters,
    currency: cert?.constraints?.budget?.currency, chain, link,
  });
  try {
    await ctx.store.decisions.recordExplanation({ id: call.decisionId, accountId: auth.accountId,
      connectionId: auth.connectionId, explanation, createdAt: call.now });
  } catch (err) {
    log.error({ err, decision_id: call.decisionId }, 'the explanation of a decision could not be stored');
  }
}
