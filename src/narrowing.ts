/**
 * Narrowing: whether one delegation grants nothing another does not (issue
 * 33, sub-delegation). An agent may hand a sub-agent a part of its own
 * authority, never more: scopes a subset of its own, an expiry no later, and
 * every constraint of its own at least as strict. "At least as strict" means
 * that every request the child's constraints allow, the parent's allow too
 * (for the same scope, context and time). Pure: no I/O.
 *
 * {@link checkNarrowing} answers with the first member that widens (in a
 * fixed order) and why, so an API can refuse with a documented code naming
 * it. A member the parent does not constrain may be anything in the child;
 * a member the parent constrains must be present in the child.
 */
import net from 'node:net';
import { amountMicros } from './amount.js';
import type { ApprovalRule } from './approval-rule.js';
import { DAYS } from './constraints.js';
import type { ConstraintName, Constraints, TimeWindow } from './constraints.js';

/** What a delegation grants, as far as narrowing is concerned. */
export interface Grant {
  /** Granted scopes. */
  scopes: readonly string[];
  /** The certificate's constraints (`null` or absent: none). */
  constraints?: Constraints | null;
  /** Expiry, epoch ms; `null`: does not expire. */
  expiresAt: number | null;
}

/** A member of a grant that a child widened. */
export type NarrowingMember = 'scopes' | 'expires_at' | ConstraintName;

/** Result of {@link checkNarrowing}. */
export type NarrowingResult = { ok: true } | { ok: false; member: NarrowingMember; detail: string };

const MINUTES_PER_WEEK = 7 * 1440;

/** The minutes of the week (Sunday 00:00 UTC = 0) a window allows, as `evaluateConstraints` reads it. */
function windowMinutes(w: TimeWindow): Uint8Array {
  const out = new Uint8Array(MINUTES_PER_WEEK);
  const start = Number(w.start.slice(0, 2)) * 60 + Number(w.start.slice(3));
  const end = Number(w.end.slice(0, 2)) * 60 + Number(w.end.slice(3));
  const length = start < end ? end - start : 1440 - start + end;
  for (const day of w.days ?? DAYS) {
    const base = DAYS.indexOf(day) * 1440 + start;
    for (let m = 0; m < length; m += 1) out[(base + m) % MINUTES_PER_WEEK] = 1;
  }
  return out;
}

function parseCidr(s: string): { addr: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [addr, bits] = s.split('/');
  const version = addr === undefined ? 0 : net.isIP(addr);
  if (version === 0 || addr === undefined) return null;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  return { addr, prefix: bits === undefined ? (version === 4 ? 32 : 128) : Number(bits), family };
}

/** True when the subnet `inner` lies inside `outer`: same family, a prefix at least as long, its address inside. */
function cidrWithin(inner: string, outer: string): boolean {
  const a = parseCidr(inner);
  const b = parseCidr(outer);
  if (a === null || b === null || a.family !== b.family || a.prefix < b.prefix) return false;
  const list = new net.BlockList();
  list.addSubnet(b.addr, b.prefix, b.family);
  return list.check(a.addr, a.family);
}

/** True when the path prefix `inner` allows only paths `outer` allows (segment boundary, as constraints match). */
function prefixWithin(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer.endsWith('/') ? outer : `${outer}/`);
}

/** The first member of `inner` not in `outer`. */
const subset = (inner: readonly string[], outer: readonly string[]): string | undefined =>
  inner.find((x) => !outer.includes(x));

/** The child's approval rule asks for an approval whenever the parent's does (for the scopes the child holds). */
function approvalNarrower(parent: ApprovalRule, child: ApprovalRule | undefined,
  scopes: readonly string[]): string | null {
  for (const scope of parent.scopes) {
    if (!scopes.includes(scope)) continue;
    if (child === undefined || !child.scopes.includes(scope)) return `${scope} needs an approval in the parent`;
    if (child.above === undefined) continue;
    if (parent.above === undefined) return `${scope} needs an approval at any amount in the parent`;
    const higher = amountMicros(child.above.amount) > amountMicros(parent.above.amount);
    if (child.above.currency !== parent.above.currency || higher) {
      return `${scope} needs an approval above ${parent.above.amount} ${parent.above.currency} in the parent`;
    }
  }
  return null;
}

/** A constraint the child widened, and why. */
interface Widened { member: ConstraintName; detail: string }

/** The first constraint of the parent that the child's constraints widen, with why; null when none. */
function constraintWidened(p: Constraints, c: Constraints, scopes: readonly string[]): Widened | null {
  const w = (member: ConstraintName, detail: string): Widened => ({ member, detail });
  const pays = scopes.some((scope) => scope.startsWith('payments:'));
  if (p.max_amount && pays) {
    if (!c.max_amount) return w('max_amount', 'the parent limits the amount per request');
    const { amount, currency } = p.max_amount;
    if (c.max_amount.currency !== currency) return w('max_amount', `the parent's currency is ${currency}`);
    if (amountMicros(c.max_amount.amount) > amountMicros(amount)) return w('max_amount', `over the parent's ${amount}`);
  }
  if (p.methods) {
    const extra = c.methods ? subset(c.methods, p.methods) : 'any method';
    if (extra !== undefined) return w('methods', `${extra} is not allowed by the parent`);
  }
  if (p.path_prefixes) {
    const outer = p.path_prefixes;
    const extra = c.path_prefixes ? c.path_prefixes.find((x) => !outer.some((q) => prefixWithin(x, q))) : 'any path';
    if (extra !== undefined) return w('path_prefixes', `${extra} is outside the parent's prefixes`);
  }
  if (p.client_ips) {
    const outer = p.client_ips;
    const extra = c.client_ips ? c.client_ips.find((x) => !outer.some((q) => cidrWithin(x, q))) : 'any address';
    if (extra !== undefined) return w('client_ips', `${extra} is outside the parent's addresses`);
  }
  if (p.tenants) {
    const extra = c.tenants ? subset(c.tenants, p.tenants) : 'any tenant';
    if (extra !== undefined) return w('tenants', `${extra} is not a tenant of the parent`);
  }
  if (p.time_window) {
    if (!c.time_window) return w('time_window', 'the parent allows only its time window');
    const outer = windowMinutes(p.time_window);
    const inner = windowMinutes(c.time_window);
    if (inner.some((on, m) => on === 1 && outer[m] === 0)) return w('time_window', 'times outside the parent window');
  }
  if (p.require_bound_operation === true && c.require_bound_operation !== true) {
    return w('require_bound_operation', 'the parent accepts only operation-bound proofs');
  }
  if (p.require_approval) {
    const why = approvalNarrower(p.require_approval, c.require_approval, scopes);
    if (why !== null) return w('require_approval', why);
  }
  if (p.budget && pays) {
    const b = c.budget;
    const same = b !== undefined && b.currency === p.budget.currency && b.period === p.budget.period;
    if (!same || amountMicros(b.amount) > amountMicros(p.budget.amount)) {
      return w('budget', `the parent's budget is ${p.budget.amount} ${p.budget.currency} per ${p.budget.period}`);
    }
  }
  if (p.max_calls) {
    const m = c.max_calls;
    if (!m || m.period !== p.max_calls.period || m.count > p.max_calls.count) {
      return w('max_calls', `the parent allows ${p.max_calls.count} calls per ${p.max_calls.period}`);
    }
  }
  return null;
}

/**
 * Whether `child` grants nothing `parent` does not: scopes a subset, an
 * expiry no later, every constraint of the parent present in the child and
 * at least as strict. `max_amount` and `budget` apply to `payments:*` scopes
 * only, so they are compared only when the child holds one. Budgets and call
 * limits compare within the same currency and period only (a day's budget is
 * not comparable to a month's).
 *
 * @example
 * ```ts
 * checkNarrowing({ scopes: ['data:read'], expiresAt: null }, { scopes: ['data:read', 'data:write'], expiresAt: null });
 * // → { ok: false, member: 'scopes', detail: 'data:write is not granted to the parent' }
 * ```
 */
export function checkNarrowing(child: Grant, parent: Grant): NarrowingResult {
  const extra = subset(child.scopes, parent.scopes);
  if (extra !== undefined) return { ok: false, member: 'scopes', detail: `${extra} is not granted to the parent` };
  if (parent.expiresAt !== null && (child.expiresAt === null || child.expiresAt > parent.expiresAt)) {
    const at = new Date(parent.expiresAt).toISOString();
    return { ok: false, member: 'expires_at', detail: `the parent expires at ${at}` };
  }
  const widened = constraintWidened(parent.constraints ?? {}, child.constraints ?? {}, child.scopes);
  return widened === null ? { ok: true } : { ok: false, ...widened };
}
