/**
 * The store interface, third part: step-up approvals and the usage counters
 * of budgets and rate limits (issue 23). Their records, and the effects a
 * verify commits with its decision, are in `ledger-types.ts` (the decision
 * path writes them). `types.ts` re-exports this file. Like the rest, it names
 * no engine type; the contract suite (test/sidecar/store/contract-approvals.ts)
 * holds every engine to it.
 *
 * Times are Unix milliseconds; money is integer micro-units.
 */
import type { ApprovalChange, ApprovalRecord, ApprovalState } from './ledger-types.js';

/** Step-up approvals. */
export interface ApprovalStore {
  getApproval(id: string): Promise<ApprovalRecord | undefined>;
  /** The account's approvals, newest first; `before` is a seq cursor. */
  listApprovals(q: { accountId: string; state?: ApprovalState; limit: number; before?: number }): Promise<ApprovalRecord[]>;
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
  decideApproval(id: string, d: { state: 'granted' | 'denied'; now: number; grantExpiresAt: number; note: string | null }, change: ApprovalChange): Promise<boolean>;
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
