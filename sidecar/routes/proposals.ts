/**
 * Constraints a platform proposes with a delegation request, and what an approval may do with
 * them (issue 32; docs/organisations.md, "Requests from the platform"): keep them (the approval
 * names no `constraints`) or make them stricter, never looser. "Stricter" is the narrowing of a
 * sub-delegation (src/narrowing.ts): every request the approved constraints allow, the proposed
 * ones allow too, for the approved scopes.
 */
import { ServiceError } from '../../src/errors.js';
import { validateConstraints } from '../../src/constraints.js';
import type { Constraints } from '../../src/constraints.js';
import { checkNarrowing } from '../../src/narrowing.js';

/**
 * Untrusted constraints from a body member `field`: null when absent, null or `{}`; the
 * constraints when valid; otherwise 400 `invalid_constraints` naming the member.
 */
export function constraintsFrom(value: unknown, field: string): Constraints | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) return null;
  const err = validateConstraints(value);
  if (err) throw new ServiceError('invalid_constraints', `${err}.`, { field });
  return value as Constraints;
}

/**
 * The constraints an approval issues. `given` is the approval's `constraints` member (absent:
 * keep the proposed ones; null or `{}`: none). With a proposal, constraints looser than it in
 * any member are refused with 400 `constraints_loosened` naming the member and why.
 */
export function approvedConstraints(given: unknown, proposed: Constraints | null,
  scopes: readonly string[]): Constraints | null {
  if (given === undefined) return proposed;
  const chosen = constraintsFrom(given, 'body.constraints');
  if (proposed === null) return chosen;
  const narrow = checkNarrowing({ scopes, constraints: chosen, expiresAt: null },
    { scopes, constraints: proposed, expiresAt: null });
  if (!narrow.ok) {
    // checkNarrowing speaks of a parent certificate; here the bound is the platform's proposal.
    const detail = narrow.detail.replace(/\bthe parent\b/g, 'the proposal');
    throw new ServiceError('constraints_loosened', `${narrow.member}: ${detail}.`,
      { field: 'body.constraints', member: narrow.member, detail });
  }
  return chosen;
}
