/**
 * One AuthZEN evaluation through the one decision pipeline (docs/authzen.md):
 * a grant check (no proof: `decide()` in `grant` mode, nothing consumed) or a
 * proof verification (`context.proof`: exactly verify, with its consumption,
 * metering and audit). The outcome is a decision, a failed item (a refusal of
 * the item: decision `false` with the error in its context) or indeterminate
 * (never `true`; the route answers it as a 503 for a single evaluation). The
 * caller's own refusals (401 `invalid_api_key`, 402 `credits_exhausted`) are
 * not an item's: they are thrown, and fail the whole request.
 */
import type { FastifyBaseLogger } from 'fastify';
import { mapEvaluation } from '../../src/authzen.js';
import type { AuthzenDecision, AuthzenEvaluation } from '../../src/authzen.js';
import { ERRORS, ServiceError } from '../../src/errors.js';
import type { ErrorCode } from '../../src/errors.js';
import type { VerifyResponse } from '../../src/protocol.js';
import type { ServiceContext } from '../context.js';
import { decide } from '../decide/pipeline.js';
import type { VerifyCall } from '../decide/stage.js';

/** Refusals of the caller, not of an item: the whole request fails with them. */
const CALLER_REFUSALS: readonly ErrorCode[] = ['invalid_api_key', 'credits_exhausted'];

/** What one evaluation came to. */
export type EvaluationOutcome =
  | { kind: 'decision'; answer: VerifyResponse }
  | { kind: 'indeterminate'; answer: VerifyResponse }
  | { kind: 'failed'; error: ServiceError };

/** What the route needs to write the decision-log line of one evaluation. */
export interface EvaluateOptions {
  log: FastifyBaseLogger;
  requestId: string;
}

/** Decodes `context.proof`: a bundle object as it is, a string as the base64 of one (the `X-Service-Proof` header). */
export function decodeProof(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  if (v.length > 16_384 || !/^[A-Za-z0-9+/=_-]+$/.test(v)) return null;
  try {
    return JSON.parse(Buffer.from(v, 'base64').toString('utf8')) as unknown;
  } catch {
    return null;
  }
}

/** Evaluates one checked evaluation. Rejects only with a caller's refusal (see the file header). */
export async function evaluate(ctx: ServiceContext, apiKey: unknown, e: AuthzenEvaluation, o: EvaluateOptions):
  Promise<EvaluationOutcome> {
  const mapped = mapEvaluation(e, decodeProof);
  if (mapped instanceof ServiceError) return { kind: 'failed', error: mapped };
  const started = process.hrtime.bigint();
  const decisionLog = ctx.audit.decisionLog;
  const onSettled = (call: Readonly<VerifyCall>, outcome: VerifyResponse | ServiceError): void => {
    decisionLog?.write({ requestId: o.requestId, now: call.now, auth: call.auth, scope: call.request?.required_scope,
      context: call.request?.context, outcome, latencyMs: Number(process.hrtime.bigint() - started) / 1e6,
      decisionId: call.decisionId, mode: call.mode });
  };
  try {
    const answer = await decide(ctx, apiKey, mapped.request, { log: o.log, mode: mapped.mode, subject: mapped.agentId,
      ...(decisionLog ? { onSettled } : {}) });
    return answer.decision === 'indeterminate' ? { kind: 'indeterminate', answer } : { kind: 'decision', answer };
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    if (CALLER_REFUSALS.includes(err.code)) throw err;
    return { kind: 'failed', error: err };
  }
}

/** The error member of a failed item's context: the error shape of the API. */
function itemError(code: ErrorCode, status: number, message: string,
  extra?: Record<string, unknown>): Record<string, unknown> {
  return { error: { code, message, status, ...extra } };
}

/** The AuthZEN decision of an outcome: `true` only for an allow. */
export function toDecision(o: EvaluationOutcome): AuthzenDecision {
  if (o.kind === 'failed') return { decision: false, context: itemError(o.error.code, o.error.status, o.error.message,
    o.error.extra) };
  const a = o.answer;
  if (o.kind === 'indeterminate') return { decision: false, context: { decision_id: a.decision_id,
    ...itemError('evaluation_indeterminate', ERRORS.evaluation_indeterminate.status,
      ERRORS.evaluation_indeterminate.message, { reason: a.decision_reason }) } };
  return {
    decision: a.decision === 'allow',
    context: {
      decision_id: a.decision_id, reason: a.decision_reason,
      ...(a.constraint !== undefined ? { constraint: a.constraint } : {}),
      ...(a.approval_id !== undefined ? { approval_id: a.approval_id } : {}),
    },
  };
}
