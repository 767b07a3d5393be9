/**
 * Limits over time, carried in a certificate's constraints (docs/constraints.md):
 * `budget` (money over the allowed `payments:*` calls) and `max_calls` (allowed
 * calls of any scope), each counted in a calendar window in UTC.
 *
 * Windows are calendar windows, not rolling ones: a minute, hour or day starts
 * on the UTC boundary, a week on Monday 00:00 UTC, a month on the 1st 00:00
 * UTC; `total` is one window for the certificate's life. A window is named by
 * its start (Unix ms), so a counter is one row per certificate, kind and
 * window, debited exactly and atomically by the store. Pure: no I/O.
 */
import { AMOUNT_RE, amountMicros } from './amount.js';

/** Periods of `budget`. */
export const BUDGET_PERIODS = ['day', 'week', 'month', 'total'] as const;
/** Periods of `max_calls`. */
export const CALL_PERIODS = ['minute', 'hour', 'day', 'total'] as const;
/** Any window period. */
export type Period = (typeof BUDGET_PERIODS)[number] | (typeof CALL_PERIODS)[number];

/** `budget`: at most `amount` of `currency` over the allowed `payments:*` calls per window. */
export interface Budget { amount: string; currency: string; period: (typeof BUDGET_PERIODS)[number] }
/** `max_calls`: at most `count` allowed calls (any scope) per window. */
export interface MaxCalls { count: number; period: (typeof CALL_PERIODS)[number] }

/** Largest `budget.amount`: 9 integer digits, so every micro-unit sum is an exact integer. */
export const MAX_BUDGET_MICROS = 999_999_999_999_999;
/** Largest `max_calls.count`. */
export const MAX_CALLS_COUNT = 1_000_000_000;

const CURRENCY_RE = /^[A-Z]{3}$/;

function isPlain(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Validates `constraints.budget`; an error message naming the member, or null. */
export function validateBudget(b: unknown): string | null {
  if (b === undefined) return null;
  if (!isPlain(b) || Object.keys(b).some((k) => !['amount', 'currency', 'period'].includes(k))) return 'constraints.budget must be {amount, currency, period}';
  if (typeof b.amount !== 'string' || !AMOUNT_RE.test(b.amount) || amountMicros(b.amount) > BigInt(MAX_BUDGET_MICROS) || amountMicros(b.amount) === 0n) {
    return 'constraints.budget.amount must be a positive decimal string like "200.00" (at most 9 integer digits)';
  }
  if (typeof b.currency !== 'string' || !CURRENCY_RE.test(b.currency)) return 'constraints.budget.currency must be a 3-letter uppercase code';
  if (!(BUDGET_PERIODS as readonly unknown[]).includes(b.period)) return `constraints.budget.period must be one of ${BUDGET_PERIODS.join(', ')}`;
  return null;
}

/** Validates `constraints.max_calls`; an error message naming the member, or null. */
export function validateMaxCalls(m: unknown): string | null {
  if (m === undefined) return null;
  if (!isPlain(m) || Object.keys(m).some((k) => k !== 'count' && k !== 'period')) return 'constraints.max_calls must be {count, period}';
  if (typeof m.count !== 'number' || !Number.isSafeInteger(m.count) || m.count < 1 || m.count > MAX_CALLS_COUNT) {
    return `constraints.max_calls.count must be an integer from 1 to ${MAX_CALLS_COUNT}`;
  }
  if (!(CALL_PERIODS as readonly unknown[]).includes(m.period)) return `constraints.max_calls.period must be one of ${CALL_PERIODS.join(', ')}`;
  return null;
}

/** The UTC calendar window of `period` that contains `now`: `[start, end)` in Unix ms (`total`: `[0, +∞)`). */
export function windowOf(period: Period, now: number): { start: number; end: number } {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const mo = d.getUTCMonth();
  const day = d.getUTCDate();
  switch (period) {
    case 'minute': { const s = now - (((now % 60_000) + 60_000) % 60_000); return { start: s, end: s + 60_000 }; }
    case 'hour': { const s = Date.UTC(y, mo, day, d.getUTCHours()); return { start: s, end: s + 3_600_000 }; }
    case 'day': return { start: Date.UTC(y, mo, day), end: Date.UTC(y, mo, day + 1) };
    case 'week': {
      // ISO weeks start on Monday: getUTCDay() is 0 on Sunday.
      const back = (d.getUTCDay() + 6) % 7;
      return { start: Date.UTC(y, mo, day - back), end: Date.UTC(y, mo, day - back + 7) };
    }
    case 'month': return { start: Date.UTC(y, mo, 1), end: Date.UTC(y, mo + 1, 1) };
    case 'total': return { start: 0, end: Number.POSITIVE_INFINITY };
  }
}

/** One counter debit of an allowed call. */
export interface LimitDebit {
  /** `budget` (micro-units of the budget's currency) or `calls` (a count). */
  kind: 'budget' | 'calls';
  /** Start of the window (Unix ms; 0 for `total`). */
  windowStart: number;
  /** What the call adds. */
  amount: number;
  /** The window's limit: the counter may not go above it. */
  limit: number;
}

/** What the limits say about an allow: the debits to make at commit, or the constraint whose context is missing or unusable. */
export type LimitPlan = { ok: true; debits: LimitDebit[] } | { ok: false; constraint: 'budget' };

/**
 * The debits an allow of `requiredScope` makes under `budget` and `max_calls` at `now`. A
 * budget applies to `payments:*` scopes only and needs the context's amount in its currency
 * (else `{ok: false}`: deny `constraint_denied`, `constraint: "budget"`). An amount that alone
 * exceeds the budget is still a debit: it fails at commit as `budget_exceeded`.
 */
export function planLimits(c: { budget?: Budget; max_calls?: MaxCalls } | null | undefined, requiredScope: string,
  ctx: { amount?: string; currency?: string } | undefined, now: number): LimitPlan {
  const debits: LimitDebit[] = [];
  if (c?.budget && requiredScope.startsWith('payments:')) {
    const amount = ctx?.amount;
    if (amount === undefined || !AMOUNT_RE.test(amount) || ctx?.currency !== c.budget.currency) return { ok: false, constraint: 'budget' };
    const limit = Number(amountMicros(c.budget.amount));
    const micros = amountMicros(amount);
    debits.push({ kind: 'budget', windowStart: windowOf(c.budget.period, now).start, amount: micros > BigInt(limit) ? limit + 1 : Number(micros), limit });
  }
  if (c?.max_calls) debits.push({ kind: 'calls', windowStart: windowOf(c.max_calls.period, now).start, amount: 1, limit: c.max_calls.count });
  return { ok: true, debits };
}

/** Micro-units as a decimal string with 2–6 decimals (`1500000` → `"1.50"`). */
export function formatMicros(micros: number): string {
  const whole = Math.floor(micros / 1_000_000);
  let frac = String(micros % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  if (frac.length < 2) frac = frac.padEnd(2, '0');
  return `${whole}.${frac}`;
}
