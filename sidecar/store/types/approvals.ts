/**
 * The store interface (types.ts), by subject: step-up approvals and the usage
 * counters of budgets and rate limits.
 */
import type { OutboxEventInput } from './outbox.js';
import type { AuditEventRecord } from './audit.js';

/**
 * States of an approval: `pending` → `granted` → `used`; `pending` → `denied`;
 * `pending` or `granted` → `expired` (its `expiresAt` passed).
 */
export type ApprovalState = 'pending' | 'granted' | 'denied' | 'used' | 'expired';

/** One approval of one operation. */
export interface ApprovalRecord {
  id: string;
  /** Listing order (assigned by the store). */
  seq?: number;
  accountId: string;
  connectionId: string;
  platformId: string;
  agentId: string;
  certId: string;
  /** The required scope of the operation. */
  scope: string;
  /** SHA-256 (hex) of the canonical operation: certificate, scope, context and bound operation. */
  fingerprint: string;
  /** The verify context of the operation (string members only). */
  context: Record<string, string>;
  /** The operation the proof was bound to, or null. */
  operation: Record<string, string> | null;
  state: ApprovalState;
  /** The account holder's note (deny), or null. */
  note: string | null;
  createdAt: number;
  /** End of the pending request; once granted, end of the grant. */
  expiresAt: number;
  /** When it was granted or denied. */
  decidedAt: number | null;
  /** When it became `denied`, `used` or `expired`. */
  settledAt: number | null;
}

/** The audit row and webhook event written with an approval's state change. */
export interface ApprovalChange {
  audit: AuditEventRecord;
  event: OutboxEventInput;
}

/** Step-up approvals. */
export interface ApprovalStore {
  getApproval(id: string): Promise<ApprovalRecord | undefined>;
  /** The account's approvals, newest first; `before` is a seq cursor. */
  listApprovals(
    q: { accountId: string; state?: ApprovalState; limit: number; before?: number },
  ): Promise<ApprovalRecord[]>;
  /**
   * The approval that answers a verify of this operation: the newest of the certificate with
   * this fingerprint that is `pending` or `granted`, or that settled after `settledAfter`.
   */
  findForOperation(certId: string, fingerprint: string, settledAfter: number): Promise<ApprovalRecord | undefined>;
  /**
   * Grants or denies a pending approval that has not expired at `now`, with its audit row and
   * event, in one transaction; false (nothing written) when it is not pending or expired.
   * A grant sets `expiresAt` to `grantExpiresAt`; a deny sets the note and `settledAt`.
   */
  decideApproval(
    id: string,
    d: { state: 'granted' | 'denied'; now: number; grantExpiresAt: number; note: string | null },
    change: ApprovalChange,
  ): Promise<boolean>;
  /**
   * Marks up to `limit` approvals that are `pending` or `granted` with `expiresAt <= now`
   * expired (`settledAt = expiresAt`), each with the audit row and event `change` builds from
   * the record as it was, in one transaction. Returns those records (as they were).
   */
  expireDue(now: number, limit: number, change: (a: ApprovalRecord) => ApprovalChange): Promise<ApprovalRecord[]>;
}

/** The usage counters of budgets and rate limits. */
export interface UsageStore {
  /** The counters' values (0 for a window without a debit), in the order asked. */
  usage(certId: string, counters: { kind: 'budget' | 'calls'; windowStart: number }[]): Promise<number[]>;
}
