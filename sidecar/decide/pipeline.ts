/**
 * `decide()`: the one decision pipeline behind `POST /v1/service/verify`,
 * an ordered list of stages (modelled on ory/oathkeeper's handler pipeline;
 * the contract is `stage.ts`). Each stage passes, or ends the call:
 *
 * | # | Stage | Ends the call with |
 * |---|---|---|
 * | 1 | authenticate (`stages/authenticate.ts`) | 401 invalid_api_key |
 * | 2 | meter (`billing.ts`) | 402 credits_exhausted |
 * | 3 | parse | 400 invalid_request / invalid_scopes / invalid_proof |
 * | 4 | challenge (known, live, audience) | 400 invalid_challenge |
 * | 5 | freshness | 400 proof_stale |
 * | 6 | certificate | 400 invalid_proof / invalid_signature |
 * | 7 | signature (crypto workers) | 400 invalid_signature |
 * | 8 | delegation: status, expiry, scope, constraints | (decides allow or deny) |
 * | 9 | chain: the same for every parent of a sub-delegated certificate | (allow → deny) |
 * | 10 | binding: an operation-bound proof allows only its operation | (allow → deny) |
 * | 11 | idempotency: claim the key, or replay its recorded answer | 409 / 422 |
 * | 12 | limits: budget and max_calls of every link, the debits to commit | (allow → deny) |
 * | 13 | approval: step-up approval of the operation | (allow → deny) |
 * | 14 | commit: challenge + debit + effects + audit row in one transaction | 200 allow / deny |
 *
 * The orchestrator fails closed: a stage refuses only by throwing a
 * `ServiceError` (billed or not by `billing.ts`); a store failure answers 200
 * `indeterminate` `store_unavailable` (reads) or `audit_write_failed` (the
 * commit), anything else `internal_error`, with nothing recorded or billed.
 * No allow leaves before the commit. A new stage is a module exporting a
 * {@link Stage} and one entry in {@link VERIFY_STAGES}.
 */
import crypto from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { ServiceError } from '../../src/errors.js';
import type { VerifyRequest, VerifyResponse } from '../../src/protocol.js';
import type { ServiceContext } from '../context.js';
import { meter, settleRefusal } from './billing.js';
import { storeExplanation } from './explanation.js';
import { StoreFault, need } from './stage.js';
import type { ReasonFor, Stage, VerifyCall } from './stage.js';
import { authenticate } from './stages/authenticate.js';
import { certificate } from './stages/certificate.js';
import { chain } from './stages/chain.js';
import { challenge } from './stages/challenge.js';
import { commit } from './stages/commit.js';
import { delegation } from './stages/delegation.js';
import { binding } from './stages/binding.js';
import { limits } from './stages/limits.js';
import { idempotency } from './stages/idempotency.js';
import { approval } from './stages/approval.js';
import { freshness } from './stages/freshness.js';
import { parse } from './stages/parse.js';
import { signature } from './stages/signature.js';
import { record } from './stages/record.js';
import { subject } from './stages/subject.js';

/** The stages of a verify call, in the order they run. */
export const VERIFY_STAGES: readonly Stage[] = Object.freeze([
  authenticate, meter, parse, challenge, freshness, certificate, signature, delegation, chain, binding, idempotency, limits,
  approval, commit,
]);

/**
 * The stages of an AuthZEN grant check (docs/authzen.md): the same stages in the same order, with
 * the proof's stages (challenge, freshness, certificate, signature) replaced by `subject` (the
 * named agent's certificate) and commit by `record` (the audit row only: nothing consumed,
 * debited, counted or requested). Idempotent: the same request at the same state decides the same.
 */
export const GRANT_STAGES: readonly Stage[] = Object.freeze([
  authenticate, meter, parse, subject, delegation, chain, binding, limits, approval, record,
]);

/** Options of {@link decide}. */
export interface DecideOptions {
  /** The request's logger (failures are logged there); default the service's. */
  log?: FastifyBaseLogger;
  /** The stages to run; default {@link VERIFY_STAGES} (tests run other lists). */
  stages?: readonly Stage[];
  /** `verify` (default) or `grant`: an AuthZEN grant check ({@link GRANT_STAGES}; the stage default follows). */
  mode?: 'verify' | 'grant';
  /** The agent the caller names (an AuthZEN subject): see {@link VerifyCall.subject}. */
  subject?: string;
  /** Called once the call is settled, with what the stages found and the answer or refusal (the decision log). */
  onSettled?: (call: Readonly<VerifyCall>, outcome: VerifyResponse | ServiceError) => void;
}

/**
 * Runs the decision pipeline for one verify call.
 *
 * @param apiKey - The presented API key (the header, unchecked).
 * @param body - The validated verify request, or the 400 that says why the body is not one
 *   (answered only after the key is authenticated and the balance checked).
 * @returns The 200 decision. A refusal rejects with its `ServiceError`.
 */
export async function decide(ctx: ServiceContext, apiKey: unknown, body: VerifyRequest | ServiceError, opts: DecideOptions = {}): Promise<VerifyResponse> {
  const mode = opts.mode ?? 'verify';
  const call: VerifyCall = { now: ctx.clock(), apiKey, body, spendableChallenge: null, mode,
    decisionId: crypto.randomUUID(), ...(opts.subject !== undefined ? { subject: opts.subject } : {}) };
  if (opts.onSettled === undefined) return runLedgered(ctx, call, opts);
  let out: VerifyResponse;
  try {
    out = await runLedgered(ctx, call, opts);
  } catch (err) {
    if (err instanceof ServiceError) opts.onSettled(call, err);
    throw err;
  }
  opts.onSettled(call, out);
  return out;
}

/**
 * Runs the stages; a key the call claimed (stages/idempotency.ts) is released again unless the
 * answer is an allow that names the claim (a later deny, a refusal, a failure closed).
 */
async function runLedgered(ctx: ServiceContext, call: VerifyCall, opts: DecideOptions): Promise<VerifyResponse> {
  let out: VerifyResponse | undefined;
  try {
    out = await runStages(ctx, call, opts);
    return out;
  } finally {
    const claimed = call.ledger !== undefined && 'claimId' in call.ledger ? call.ledger.claimId : undefined;
    if (claimed !== undefined && call.auth !== undefined && out?.idempotency?.status !== 'claimed') {
      // Best effort: a claim left behind frees its key when its lease ends.
      await ctx.store.idempotency.release(call.auth.connectionId, claimed).catch((err: unknown) => {
        (opts.log ?? ctx.log).warn({ err }, 'verify: an idempotency claim was not released (its lease frees it)');
      });
    }
  }
}

/** Runs the stages over `call`: the answer, or the refusal it throws. */
async function runStages(ctx: ServiceContext, call: VerifyCall, opts: DecideOptions): Promise<VerifyResponse> {
  let stage: Stage | undefined;
  let refusal: ServiceError;
  try {
    for (stage of opts.stages ?? (call.mode === 'grant' ? GRANT_STAGES : VERIFY_STAGES)) {
      const before = call.decision;
      const pending = stage.run(ctx, call);
      if (pending) await pending;
      if (call.decision !== before) call.decidedBy = stage.name;
    }
    stage = undefined;
    const response = need(call.response, 'response');
    // A verify's commit stored its explanation with the decision (stages/commit.ts); a grant check's is stored here.
    if (response.audit_event_id !== undefined && !call.explained) {
      await storeExplanation(ctx, call, opts.log ?? ctx.log);
    }
    return response;
  } catch (err) {
    if (!(err instanceof ServiceError)) return failClosed(ctx, opts.log ?? ctx.log, stage, err, call.decisionId);
    refusal = err;
  }
  throw await settleRefusal(ctx, call, refusal);
}

/** The `indeterminate` answer for a failure that is not a refusal, logged and counted. */
function failClosed(ctx: ServiceContext, log: FastifyBaseLogger, stage: Stage | undefined, err: unknown,
  decisionId: string): VerifyResponse {
  const reason: ReasonFor<'indeterminate'> = err instanceof StoreFault ? (err.stage === 'read' ? 'store_unavailable' : 'audit_write_failed') : 'internal_error';
  log.error({ err: err instanceof StoreFault ? err.cause : err, reason, stage: stage?.name ?? 'end' }, 'verify failed closed: indeterminate');
  ctx.metrics.verifyDecisions.inc({ decision: 'indeterminate', reason });
  return { decision: 'indeterminate', decision_reason: reason, decision_id: decisionId };
}
