/**
 * The complete list of verify decisions and their stable reasons (spec 2.7
 * leaves the list open). docs/errors.md publishes the same table; a test
 * checks the two against each other.
 */

/**
 * A verify decision. Callers must treat any other value as no decision.
 *
 * ```ts
 * const allowed = (d: DecisionValue) => d === 'allow';   // only an explicit allow runs protected code
 * ```
 */
export type DecisionValue = 'allow' | 'deny' | 'indeterminate';

/**
 * Every decision reason, with the decision it comes with and its meaning.
 *
 * ```ts
 * DECISION_REASONS.not_delegated.decision;   // 'deny'
 * DECISION_REASONS.store_unavailable.meaning;
 * ```
 */
export const DECISION_REASONS = {
  authorized: { decision: 'allow', meaning: 'The certificate is active, the scope was delegated and every constraint holds.' },
  not_delegated: { decision: 'deny', meaning: 'The required scope is not in the certificate\'s approved scopes.' },
  delegation_revoked: { decision: 'deny', meaning: 'The certificate was revoked (directly or by removing its connection).' },
  delegation_expired: { decision: 'deny', meaning: 'The certificate\'s expires_at has passed.' },
  constraint_denied: { decision: 'deny', meaning: 'A constraint of the certificate does not hold, or its context is missing; `constraint` names it.' },
  operation_mismatch: { decision: 'deny',
    meaning: 'The proof is bound to another operation: its scope, method, path, tool or body hash differs from the '
      + 'request verified.' },
  operation_unbound: { decision: 'deny',
    meaning: 'The certificate (`require_bound_operation`) or the service (`SIDECAR_REQUIRE_BOUND_OPERATION`) '
      + 'requires an operation-bound proof, and this one is not bound.' },
  approval_required: { decision: 'deny',
    meaning: 'A person must approve this action first; `approval_id` names the pending approval. Retry with a fresh '
      + 'proof once it is granted.' },
  approval_denied: { decision: 'deny', meaning: 'The account holder denied the approval of this action (`approval_id`).' },
  approval_expired: { decision: 'deny', meaning: 'The approval of this action (`approval_id`) expired before it was decided or used.' },
  approval_used: { decision: 'deny', meaning: 'The approval of this action (`approval_id`) was already used: one approval allows one verify.' },
  budget_exceeded: { decision: 'deny', meaning: 'The amount would take the certificate past its `budget` in the current window.' },
  rate_exceeded: { decision: 'deny', meaning: 'The call would take the certificate past its `max_calls` in the current window.' },
  store_unavailable: { decision: 'indeterminate', meaning: 'The state needed for the decision could not be read. Nothing was recorded or billed.' },
  audit_write_failed: { decision: 'indeterminate', meaning: 'The decision could not be committed with its audit row. Nothing was recorded or billed.' },
  internal_error: { decision: 'indeterminate', meaning: 'An unexpected failure; the service failed closed.' },
} as const satisfies Record<string, { decision: DecisionValue; meaning: string }>;

/**
 * A decision reason.
 *
 * ```ts
 * const reason: DecisionReason = response.decision_reason;   // e.g. 'delegation_revoked'
 * ```
 */
export type DecisionReason = keyof typeof DECISION_REASONS;
