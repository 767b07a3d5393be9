/**
 * The store interface (types.ts), by subject: challenges, the verify commit and
 * its effects, and the reads of audit rows (the row type is in audit.ts).
 */
import type { ApprovalChange, ApprovalRecord } from './approvals.js';
import type { AuditEventRecord } from './audit.js';
import type { DecisionRecord } from './decisions.js';

/** A challenge row; the `id` is the SHA-256 of the challenge value. */
export interface ChallengeRecord {
  id: string;
  audienceConnectionId: string;
  accountId: string;
  expiresAt: number;
  presentedAt: number | null;
  consumedAt: number | null;
  createdAt: number;
}

/** Filters of the audit read (`ProofStore.listAudit`). */
export interface AuditQuery {
  accountId: string;
  limit: number;
  /** seq cursor: rows with a smaller seq. */
  before?: number;
  eventType?: string;
  agentId?: string;
  /** created_at ≥ from (Unix ms). */
  from?: number;
  /** created_at < to (Unix ms). */
  to?: number;
  /** `allow` or `deny` (`details.decision`). */
  decision?: string;
  /** `details.decision_reason`. */
  reason?: string;
  /** `required_scope`. */
  scope?: string;
  certId?: string;
}

/** What a verify commits in one transaction. */
export interface DecisionCommit {
  challengeId: string;
  audienceConnectionId: string;
  now: number;
  accountId: string;
  priceMicros: number;
  decision: 'allow' | 'deny';
  /** For an allow, the certificate whose status is re-read inside the transaction. */
  certId: string | null;
  audit: AuditEventRecord;
  /** Approvals and usage counters written in the same transaction ({@link DecisionEffects}). */
  effects?: DecisionEffects;
  /**
   * The decision's explanation, stored in the same transaction as by `DecisionStore.recordExplanation`
   * (an id already stored is left as it is), so the one sync that makes the decision durable covers it.
   * A commit that does not commit stores none.
   */
  explanation?: DecisionRecord;
}

/**
 * Result of {@link ProofStore.commitDecision}. Every result but `committed` wrote nothing:
 * `approval_used`, `approval_exists`, `budget_exceeded` and `rate_exceeded` come from the
 * {@link DecisionEffects}.
 */
export type DecisionCommitResult = 'committed' | 'invalid_challenge' | 'credits_exhausted' | 'certificate_revoked'
  | 'approval_used' | 'approval_exists' | 'budget_exceeded' | 'rate_exceeded';

/** A debit of one usage counter, made by an allow. */
export interface UsageDebit {
  certId: string;
  /** `budget` (micro-units) or `calls`. */
  kind: 'budget' | 'calls';
  /** Start of the calendar window (Unix ms; 0 for `total`). */
  windowStart: number;
  /** What this call adds (> 0). */
  amount: number;
  /** The counter may not go above this. */
  limit: number;
}

/**
 * What a verify commits besides its challenge, debit and audit row, in the same transaction
 * ({@link ProofStore.commitDecision}). The decision pipeline gives `useApproval` and `debits`
 * with an allow, `requestApproval` with a deny `approval_required`.
 */
export interface DecisionEffects {
  /** A granted approval to spend: it must still be `granted` and unexpired, else `approval_used`. */
  useApproval?: string;
  /** Counters to debit; one that would go above its limit fails the commit (`budget_exceeded` / `rate_exceeded`). */
  debits?: UsageDebit[];
  /**
   * A new pending approval with its `approval.requested` audit row and event. When the
   * certificate already has a pending approval with the same fingerprint, nothing is written
   * and the result is `approval_exists`.
   */
  requestApproval?: ApprovalChange & { approval: ApprovalRecord };
}

/** Challenges, presentations, verify decisions, audit and metering. */
export interface ProofStore {
  insertChallenge(c: ChallengeRecord): Promise<void>;
  getChallenge(id: string): Promise<ChallengeRecord | undefined>;
  /**
   * Claims a challenge for present, before any signature work: marks it presented at `now` in
   * one conditional write and returns it, or undefined when it is unknown, already presented
   * (claimed), consumed, expired, or issued to another audience than `audienceConnectionId`
   * (then nothing changes). Of concurrent claims, on any replica, exactly one gets it. A claim
   * is final: a present that fails after it leaves the challenge presented.
   */
  claimChallenge(id: string, audienceConnectionId: string, now: number): Promise<ChallengeRecord | undefined>;
  /**
   * Appends a `proof.presented` row (linked into its account's chain) in its own transaction,
   * for a bundle about to be returned; durable when this resolves.
   */
  recordPresentation(audit: AuditEventRecord): Promise<void>;
  /** Balance check without debit (fast pre-check). */
  creditsOf(accountId: string): Promise<number>;
  /**
   * One transaction: consume the challenge (must be unconsumed, unexpired and
   * issued to the audience), debit the price, count the call and append the
   * audit row, linked into the account's hash chain. Nothing is written unless everything is. An allow whose
   * certificate is no longer `approved` commits nothing and returns
   * `certificate_revoked`.
   */
  commitDecision(c: DecisionCommit): Promise<DecisionCommitResult>;
  /**
   * For verify outcomes that are not decisions (400s): debit the call and,
   * when `challengeId` is given, consume that challenge too; no audit row.
   */
  consumeAndDebit(
    challengeId: string | null, audienceConnectionId: string, now: number, accountId: string, priceMicros: number,
  ): Promise<DecisionCommitResult>;
  /** Audit read, newest first; `before` is a seq cursor; every filter given must hold. */
  listAudit(q: AuditQuery): Promise<AuditEventRecord[]>;
  /** Deletes challenges that are consumed or expired before `olderThan`; returns the count. */
  purgeChallenges(olderThan: number): Promise<number>;
}
