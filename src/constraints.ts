/**
 * Delegation constraints: their schema (carried inside the signed
 * certificate) and their evaluation against the constraint context that
 * verify receives. Pure: no I/O.
 *
 * Rule: a constraint whose context is missing denies; it never allows.
 * docs/constraints.md documents the schema.
 */
import net from 'node:net';
import { describeValue } from './scopes.js';
import type { VerifyContext } from './protocol.js';
import { isNormalizedPath } from './path.js';
import { AMOUNT_RE, amountMicros } from './amount.js';
import { validateBudget, validateMaxCalls } from './limits.js';
import type { Budget, MaxCalls } from './limits.js';
import { validateApprovalRule } from './approval-rule.js';
import type { ApprovalRule } from './approval-rule.js';

export { AMOUNT_RE, amountMicros } from './amount.js';

/** Days for {@link TimeWindow}. */
export const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;

/** A daily window in UTC, optionally limited to some days of the week. */
export interface TimeWindow {
  /** Days the window applies (UTC); all days when absent. */
  days?: (typeof DAYS)[number][];
  /** `HH:MM` (UTC), inclusive. */
  start: string;
  /** `HH:MM` (UTC), exclusive; may be less than start (window spans midnight). */
  end: string;
}

/** The constraints a certificate may carry. Every member is optional. */
export interface Constraints {
  /** Spending limit per request, for `payments:*` scopes. */
  max_amount?: { amount: string; currency: string };
  /** Allowed HTTP methods (uppercase). */
  methods?: string[];
  /**
   * Allowed path prefixes (segment boundary: `/a` allows `/a` and `/a/b`, not `/ab`). Only a context
   * path in the gateway's normalized form (src/path.ts) matches: `/a/../b`, `/a/%2e%2e/b`, `/a%2fb`,
   * `/a/%252e%252e/b` or `/a/．．/b` match no prefix.
   */
  path_prefixes?: string[];
  /** Allowed client IPs, as CIDRs or single addresses (IPv4 or IPv6). */
  client_ips?: string[];
  /** Allowed tenants. */
  tenants?: string[];
  /** Allowed time of day. */
  time_window?: TimeWindow;
  /** Only operation-bound proofs are accepted (docs/proofs.md); else deny `operation_unbound`. */
  require_bound_operation?: boolean;
  /** Scopes (optionally above an amount) that need a person's approval per action (docs/constraints.md). */
  require_approval?: ApprovalRule;
  /** Money over the allowed `payments:*` calls per calendar window (src/limits.ts). */
  budget?: Budget;
  /** Allowed calls of any scope per calendar window (src/limits.ts). */
  max_calls?: MaxCalls;
}

/** The constraint context verify receives: the protocol's {@link VerifyContext}. */
export type ConstraintContext = VerifyContext;

/** Names of the constraint kinds, as reported by `constraint_denied`. */
export type ConstraintName = keyof Constraints;

const CURRENCY_RE = /^[A-Z]{3}$/;
const METHOD_RE = /^[A-Z]{1,16}$/;
const HHMM_RE = /^([01][0-9]|2[0-3]):[0-5][0-9]$/;
const TENANT_RE = /^[A-Za-z0-9._:-]{1,128}$/;
/** A request method in the context (compared case-insensitively, ASCII only). */
const REQUEST_METHOD_RE = /^[A-Za-z]{1,16}$/;

function parseCidr(s: string): { addr: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [addr, bits, ...rest] = s.split('/');
  if (rest.length || !addr) return null;
  const v = net.isIP(addr);
  if (!v) return null;
  const max = v === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : -1;
  if (prefix < 0 || prefix > max) return null;
  return { addr, prefix, family: v === 4 ? 'ipv4' : 'ipv6' };
}

/** Validates untrusted constraints input; returns an error message naming the member, or null when valid. */
export function validateConstraints(c: unknown): string | null {
  if (c === null || typeof c !== 'object' || Array.isArray(c)) return 'constraints must be an object';
  const allowed = new Set(['max_amount', 'methods', 'path_prefixes', 'client_ips', 'tenants', 'time_window',
    'require_bound_operation', 'require_approval', 'budget', 'max_calls']);
  for (const k of Object.keys(c)) if (!allowed.has(k)) return `constraints.${k} is not a known constraint`;
  const o = c as Record<string, unknown>;
  const list = (k: string, ok: (x: string) => boolean): string | null => {
    const v = o[k];
    if (v === undefined) return null;
    if (!Array.isArray(v) || v.length === 0 || v.length > 64) return `constraints.${k} must be a non-empty array of at most 64 entries`;
    for (const x of v) if (typeof x !== 'string' || !ok(
      x)) return `constraints.${k} has an invalid entry ${typeof x === 'string' ? JSON.stringify(x.slice(0, 140)) : describeValue(x)}`;
    return null;
  };
  if (o.max_amount !== undefined) {
    const m = o.max_amount as Record<string, unknown>;
    if (!m || typeof m !== 'object' || Array.isArray(m) || Object.keys(m).some(
      (k) => k !== 'amount' && k !== 'currency')) return 'constraints.max_amount must be {amount, currency}';
    if (typeof m.amount !== 'string' || !AMOUNT_RE.test(m.amount)) return 'constraints.max_amount.amount must be a decimal string like "50.00"';
    if (typeof m.currency !== 'string' || !CURRENCY_RE.test(m.currency)) return 'constraints.max_amount.currency must be a 3-letter uppercase code';
  }
  return list('methods', (x) => METHOD_RE.test(x))
    ?? list('path_prefixes', (x) => x.startsWith('/') && x.length <= 512 && !x.includes('..') && !/[\s?#%\\]/.test(x) && isNormalizedPath(x))
    ?? list('client_ips', (x) => parseCidr(x) !== null)
    ?? list('tenants', (x) => TENANT_RE.test(x))
    ?? validateWindow(o.time_window)
    ?? (o.require_bound_operation === undefined ||
      typeof o.require_bound_operation === 'boolean' ? null : 'constraints.require_bound_operation must be true or '
        + 'false')
    ?? validateApprovalRule(o.require_approval)
    ?? validateBudget(o.budget)
    ?? validateMaxCalls(o.max_calls);
}

function validateWindow(w: unknown): string | null {
  if (w === undefined) return null;
  if (!w || typeof w !== 'object' || Array.isArray(w)) return 'constraints.time_window must be an object';
  const o = w as Record<string, unknown>;
  if (Object.keys(o).some((k) => !['days', 'start', 'end'].includes(k))) return 'constraints.time_window allows only days, start, end';
  if (typeof o.start !== 'string' || !HHMM_RE.test(o.start)) return 'constraints.time_window.start must be HH:MM (UTC)';
  if (typeof o.end !== 'string' || !HHMM_RE.test(o.end)) return 'constraints.time_window.end must be HH:MM (UTC)';
  if (o.start === o.end) return 'constraints.time_window must not be empty';
  if (o.days !== undefined && (!Array.isArray(o.days) || o.days.length === 0 || o.days.some((d) => !(DAYS as readonly unknown[]).includes(d)))) {
    return `constraints.time_window.days must be a non-empty array of ${DAYS.join(', ')}`;
  }
  return null;
}

/** Result of {@link evaluateConstraints}. */
export type ConstraintResult = { ok: true } | { ok: false; constraint: ConstraintName; missing: boolean };

const minutes = (hhmm: string): number => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3));

function ipAllowed(ip: string, cidrs: string[]): boolean {
  let addr = ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) addr = mapped[1]!;
  const fam = net.isIP(addr);
  if (!fam) return false;
  const bl = new net.BlockList();
  for (const c of cidrs) {
    const p = parseCidr(c);
    if (p) bl.addSubnet(p.addr, p.prefix, p.family);
  }
  return bl.check(addr, fam === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Evaluates constraints for one verify. `max_amount` applies only when the
 * required scope is a `payments:*` scope. Returns the first failing
 * constraint (in a fixed order), with `missing` when its context was absent.
 */
export function evaluateConstraints(c: Constraints | null | undefined, ctx: ConstraintContext | undefined,
  requiredScope: string, now: number): ConstraintResult {
  if (!c) return { ok: true };
  const x = ctx ?? {};
  const deny = (constraint: ConstraintName, missing: boolean): ConstraintResult => ({ ok: false, constraint, missing });
  if (c.max_amount && requiredScope.startsWith('payments:')) {
    if (x.amount === undefined || x.currency === undefined) return deny('max_amount', true);
    if (!AMOUNT_RE.test(x.amount) || x.currency !== c.max_amount.currency) return deny('max_amount', false);
    if (amountMicros(x.amount) > amountMicros(c.max_amount.amount)) return deny('max_amount', false);
  }
  if (c.methods) {
    if (x.method === undefined) return deny('methods', true);
    // ASCII only: toUpperCase() maps some non-ASCII letters onto ASCII ('ſ' → 'S').
    if (!REQUEST_METHOD_RE.test(x.method) || !c.methods.includes(x.method.toUpperCase())) return deny('methods', false);
  }
  if (c.path_prefixes) {
    if (x.path === undefined) return deny('path_prefixes', true);
    const p = x.path;
    // Only a path in the gateway's normalized form (src/path.ts) can match: a path another server
    // may read differently (dot segments, encoded slashes, double encoding, raw non-ASCII such as
    // fullwidth dots) matches no prefix, exactly where the gateway refuses it as ambiguous_path.
    if (!isNormalizedPath(p)) return deny('path_prefixes', false);
    if (!c.path_prefixes.some((pre) => p === pre || p.startsWith(pre.endsWith('/') ? pre : pre + '/'))) return deny('path_prefixes', false);
  }
  if (c.client_ips) {
    if (x.client_ip === undefined) return deny('client_ips', true);
    if (!ipAllowed(x.client_ip, c.client_ips)) return deny('client_ips', false);
  }
  if (c.tenants) {
    if (x.tenant === undefined) return deny('tenants', true);
    if (!c.tenants.includes(x.tenant)) return deny('tenants', false);
  }
  if (c.time_window) {
    const d = new Date(now);
    const day = DAYS[d.getUTCDay()]!;
    const m = d.getUTCHours() * 60 + d.getUTCMinutes();
    const s = minutes(c.time_window.start);
    const e = minutes(c.time_window.end);
    const inWindow = s < e ? m >= s && m < e : m >= s || m < e;
    // For a window spanning midnight, the part after midnight belongs to the previous day's window.
    const windowDay = s > e && m < e ? DAYS[(d.getUTCDay() + 6) % 7]! : day;
    if (!inWindow || (c.time_window.days && !c.time_window.days.includes(windowDay))) return deny('time_window', false);
  }
  return { ok: true };
}
