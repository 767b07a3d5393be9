/**
 * The contract of a decision-pipeline stage (`pipeline.ts` runs them in
 * order), modelled on ory/oathkeeper's handlers: every stage has the same
 * interface, reads and adds to one {@link VerifyCall}, and has one way to
 * refuse.
 *
 * - **Refuse**: throw a `ServiceError` (a code of `src/errors.ts`). The call
 *   ends with that error; `billing.ts` decides whether it is billed.
 * - **Store failure**: wrap store access in {@link read}; a failure ends the
 *   call `indeterminate` (`store_unavailable`; a commit's {@link StoreFault}
 *   `'write'`: `audit_write_failed`).
 * - **Anything else thrown** ends the call `indeterminate` (`internal_error`).
 *
 * A deny is not a refusal: it is a decision, recorded and billed like an
 * allow (the delegation stage sets {@link VerifyCall.decision}; commit
 * records it).
 */
import type { DelegationCertificate } from '../../src/certificate.js';
import type { DECISION_REASONS, DecisionReason, DecisionValue } from '../../src/decisions.js';
import type { ServiceError } from '../../src/errors.js';
import type { CounterReading } from '../../src/explain.js';
import type { ParsedProof } from '../../src/proof.js';
import type { VerifyRequest, VerifyResponse } from '../../src/protocol.js';
import type { ApiKeyAuth } from '../auth/api-key.js';
import type { ServiceContext } from '../context.js';
import type { ChallengeRecord, DecisionEffects, IdempotentResponse } from '../store/types.js';

/** The reasons of the table (`src/decisions.ts`) that come with decision `D`. */
export type ReasonFor<D extends DecisionValue> = {
  [R in DecisionReason]: (typeof DECISION_REASONS)[R]['decision'] extends D ? R : never
}[DecisionReason];

/**
 * What later stages add to a decision: the approval it names, what commit writes with it
 * (approvals, usage counters) and extra members of its audit row. A stage that changes the
 * decision builds a new one, so these never outlive the decision they belong to.
 */
export interface DecisionExtras {
  /** The approval the answer names (`approval_id`). */
  approvalId?: string;
  /** Written by commit in the decision's transaction. */
  effects?: DecisionEffects;
  /** Added to the audit row's details. */
  details?: Record<string, unknown>;
}

/** A decision of the delegation stage and later ones: only reasons of the table, each with its own decision. */
export type Decision = DecisionExtras & (
  | { decision: 'allow'; reason: ReasonFor<'allow'>; constraint?: undefined }
  | { decision: 'deny'; reason: ReasonFor<'deny'>; constraint?: string });

/** One verify call as it moves through the stages. Each stage reads what earlier ones set. */
export interface VerifyCall {
  /** The decision time (service clock, Unix ms), read once when the call starts. */
  readonly now: number;
  /** The API key as presented (the header; not yet checked). */
  readonly apiKey: unknown;
  /** The body as the route validated it, or the error that says why it is not a verify request. */
  readonly body: VerifyRequest | ServiceError;
  /**
   * `verify` (a proof, consumed at commit) or `grant` (an AuthZEN grant check: no proof; the
   * stages read state and commit nothing but the audit row, `stages/record.ts`).
   */
  readonly mode: 'verify' | 'grant';
  /**
   * The agent the caller names (an AuthZEN subject), when it names one: a proof must speak for
   * it (parse), and a grant check reads its delegation (`stages/subject.ts`).
   */
  readonly subject?: string;
  /** The id of this decision (`decision_id`): its audit row's id when it has one. */
  readonly decisionId: string;
  /** authenticate: the caller's connection. */
  auth?: ApiKeyAuth;
  /** parse: the verify request. */
  request?: VerifyRequest;
  /** parse: the proof bundle, parsed. */
  proof?: ParsedProof;
  /** challenge: the proof's challenge (known, unconsumed, unexpired, issued to the caller). */
  challenge?: ChallengeRecord;
  /**
   * The id of the caller's own live challenge while this call may still spend it: set by the
   * challenge stage, taken by commit (which spends it in its transaction). A refusal while it is
   * set spends it and is billed (`billing.ts`).
   */
  spendableChallenge: string | null;
  /** certificate: the verified certificate the proof refers to, issued for the caller's connection. */
  cert?: DelegationCertificate;
  /**
   * certificate (or subject): the certificate's chain, leaf first and root last, every link
   * verified (one link for a certificate the account holder signed; decide/chain.ts).
   */
  chain?: DelegationCertificate[];
  /** delegation: allow or deny, with its reason. */
  decision?: Decision;
  /** The pipeline: the stage whose result the current decision is (the explanation's `stage`). */
  decidedBy?: string;
  /** limits: the budget and call counters as read, with what this call adds. */
  counters?: CounterReading[];
  /** approval: the state of this operation's approval (`none` when there is none). */
  approvalState?: string;
  /** approval: for a settled approval (used, denied, expired), when the same operation may ask for a new one. */
  approvalRetryAt?: number;
  /**
   * idempotency: the key this call claimed (its claim id), or the recorded answer it replays
   * (stages/idempotency.ts).
   */
  ledger?: { claimId: string } | { replay: IdempotentResponse };
  /** commit: the 200 answer, once the decision is recorded. */
  response?: VerifyResponse;
  /** commit: the explanation was stored with the decision (else the pipeline stores it after the answer is made). */
  explained?: boolean;
}

/** A stage of the decision pipeline. */
export interface Stage {
  /** Its name (logs: the stage a call failed closed in). */
  readonly name: string;
  /**
   * Checks the call and adds what it found to it, or refuses by throwing a `ServiceError`
   * (see the file header). Returns nothing: a stage that passes lets the next one run.
   */
  run(ctx: ServiceContext, call: VerifyCall): Promise<void> | void;
}

/** A store failure: the pipeline fails closed with `store_unavailable` ('read') or `audit_write_failed` ('write'). */
export class StoreFault extends Error {
  readonly stage: 'read' | 'write';
  override readonly cause: unknown;
  constructor(stage: 'read' | 'write', cause: unknown) {
    super(`store ${stage} failed`);
    this.stage = stage;
    this.cause = cause;
  }
}

/** Runs a store read; any failure (a throw or a rejection) becomes a {@link StoreFault} `'read'`. */
export async function read<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new StoreFault('read', err);
  }
}

/**
 * What an earlier stage must have set; its absence is a pipeline bug (stages out of order),
 * thrown as a plain Error: the call fails closed with `internal_error`.
 */
export function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`decision pipeline: ${what} is not set (stages out of order)`);
  return value;
}
