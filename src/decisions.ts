/**
 * The complete list of verify decisions and their stable reasons (spec 2.7
 * leaves the list open). docs/errors.md publishes the same table; a test
 * checks the two against each other.
 */

/** A verify decision. Callers must treat any other value as no decision. */
export type DecisionValue = 'allow' | 'deny' | 'indeterminate';

/** Every decision reason, with the decision it comes with and its meaning. */
export const DECISION_REASONS = {
  authorized: { decision: 'allow', meaning: 'The certificate is active, the scope was delegated and every constraint holds.' },
  not_delegated: { decision: 'deny', meaning: 'The required scope is not in the certificate\'s approved scopes.' },
  delegation_revoked: { decision: 'deny', meaning: 'The certificate was revoked (directly or by removing its connection).' },
  delegation_expired: { decision: 'deny', meaning: 'The certificate\'s expires_at has passed.' },
  constraint_denied: { decision: 'deny', meaning: 'A constraint of the certificate does not hold, or its context is missing; `constraint` names it.' },
  store_unavailable: { decision: 'indeterminate', meaning: 'The state needed for the decision could not be read. Nothing was recorded or billed.' },
  audit_write_failed: { decision: 'indeterminate', meaning: 'The decision could not be committed with its audit row. Nothing was recorded or billed.' },
  internal_error: { decision: 'indeterminate', meaning: 'An unexpected failure; the service failed closed.' },
} as const satisfies Record<string, { decision: DecisionValue; meaning: string }>;

/** A decision reason. */
export type DecisionReason = keyof typeof DECISION_REASONS;
