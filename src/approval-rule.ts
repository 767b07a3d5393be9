/**
 * The step-up approval rule of a certificate (`constraints.require_approval`,
 * docs/constraints.md): the scopes whose actions a person must approve one by
 * one, optionally only above an amount. Pure: no I/O.
 *
 * ```json
 * { "require_approval": { "scopes": ["payments:send"], "above": { "amount": "100.00", "currency": "USD" } } }
 * ```
 */
import { AMOUNT_RE, amountMicros } from './amount.js';
import { isValidScope } from './scopes.js';

/** The approval rule. */
export interface ApprovalRule {
  /** Scopes that need an approval (1–64 of the vocabulary). */
  scopes: string[];
  /**
   * Only above this amount: an action of one of the scopes needs an approval when its context
   * amount is greater than `amount`, or when the amount is missing, malformed or in another
   * currency (it cannot be shown to be at most the threshold). Without it, every action does.
   */
  above?: { amount: string; currency: string };
}

/** Validates `constraints.require_approval`; an error message naming the member, or null. */
export function validateApprovalRule(r: unknown): string | null {
  if (r === undefined) return null;
  if (r === null || typeof r !== 'object' || Array.isArray(r) || Object.keys(r).some((k) => k !== 'scopes' && k !== 'above')) {
    return 'constraints.require_approval must be {scopes, above?}';
  }
  const o = r as Record<string, unknown>;
  if (!Array.isArray(o.scopes) || o.scopes.length === 0 || o.scopes.length > 64 || !o.scopes.every((s) => isValidScope(s))) {
    return 'constraints.require_approval.scopes must be 1-64 scopes of the vocabulary';
  }
  if (o.above !== undefined) {
    const a = o.above as Record<string, unknown>;
    if (!a || typeof a !== 'object' || Array.isArray(a) || Object.keys(a).some(
      (k) => k !== 'amount' &&
        k !== 'currency')) return 'constraints.require_approval.above must be {amount, currency}';
    if (typeof a.amount !== 'string' || !AMOUNT_RE.test(a.amount)) return 'constraints.require_approval.above.amount must be a decimal string like "100.00"';
    if (typeof a.currency !== 'string' || !/^[A-Z]{3}$/.test(
      a.currency)) return 'constraints.require_approval.above.currency must be a 3-letter uppercase code';
  }
  return null;
}

/** True when an action of `requiredScope` with this context needs an approval under `rule`. */
export function approvalApplies(rule: ApprovalRule | undefined, requiredScope: string, ctx: { amount?: string; currency?: string } | undefined): boolean {
  if (!rule || !rule.scopes.includes(requiredScope)) return false;
  if (!rule.above) return true;
  const amount = ctx?.amount;
  if (amount === undefined || !AMOUNT_RE.test(amount) || ctx?.currency !== rule.above.currency) return true;
  return amountMicros(amount) > amountMicros(rule.above.amount);
}
