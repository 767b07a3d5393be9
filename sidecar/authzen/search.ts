/**
 * AuthZEN action search (docs/authzen.md): "what may this agent do now, on
 * this resource, with this context". The candidates are the scopes of the
 * agent's certificate (its newest approved one; none: no results); each is
 * kept when a grant check through the one pipeline allows it, so a result
 * evaluates `true` with the same subject, resource and context at the same
 * state. The grant checks record no audit row (`preview`). A grant check
 * that cannot decide fails the whole search (503): a partial list could omit
 * nothing safely, but it could not be told apart from a complete one.
 */
import { mapEvaluation } from '../../src/authzen.js';
import type { AuthzenEvaluation } from '../../src/authzen.js';
import { ServiceError } from '../../src/errors.js';
import type { ApiKeyAuth } from '../auth/api-key.js';
import type { ServiceContext } from '../context.js';
import { GRANT_STAGES, decide } from '../decide/pipeline.js';
import { preview } from '../decide/stages/record.js';
import { grantCertificate } from '../decide/stages/subject.js';
import { decodeProof } from './evaluate.js';
import type { EvaluateOptions } from './evaluate.js';

/** The grant-check stages without the audit row. */
const SEARCH_STAGES = Object.freeze([...GRANT_STAGES.slice(0, -1), preview]);

/**
 * The scopes a grant check allows for the request's subject, resource and context, in the
 * certificate's order. Rejects with 404 `agent_not_found` for an agent not of the caller's
 * connection, 400 for an unmappable request, 503 `evaluation_indeterminate` when a check cannot decide.
 */
export async function searchActions(ctx: ServiceContext, apiKey: unknown, auth: ApiKeyAuth,
  body: Record<string, unknown>, o: EvaluateOptions): Promise<string[]> {
  const subject = body.subject as AuthzenEvaluation['subject'];
  const evaluation = (name: string): AuthzenEvaluation => ({ subject, action: { name },
    resource: body.resource as AuthzenEvaluation['resource'],
    ...(body.context !== undefined ? { context: body.context as Record<string, unknown> } : {}) });
  const probe = mapEvaluation(evaluation('-'), decodeProof);
  if (probe instanceof ServiceError) throw probe;
  if (probe.mode !== 'grant') {
    throw new ServiceError('invalid_request', 'An action search takes no proof.', { field: 'context.proof' });
  }
  let scopes: string[];
  try {
    const agent = await ctx.store.platforms.getAgent(subject.id);
    if (!agent || agent.connectionId !== auth.connectionId) {
      throw new ServiceError('agent_not_found', 'No such agent on this connection.', { field: 'subject.id' });
    }
    const rec = await grantCertificate(ctx, auth.accountId, subject.id);
    scopes = (rec ? await ctx.store.delegations.getCertificate(rec.id) : undefined)?.approvedScope ?? [];
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    o.log.error({ err }, 'action search failed closed: the store could not be read');
    throw new ServiceError('evaluation_indeterminate', undefined, { reason: 'store_unavailable' });
  }
  const allowed: string[] = [];
  for (const scope of scopes) {
    const mapped = mapEvaluation(evaluation(scope), decodeProof);
    if (mapped instanceof ServiceError) throw mapped;
    const answer = await decide(ctx, apiKey, mapped.request, { log: o.log, mode: 'grant', subject: mapped.agentId,
      stages: SEARCH_STAGES });
    if (answer.decision === 'indeterminate') {
      throw new ServiceError('evaluation_indeterminate', undefined, { reason: answer.decision_reason });
    }
    if (answer.decision === 'allow') allowed.push(scope);
  }
  return allowed;
}
