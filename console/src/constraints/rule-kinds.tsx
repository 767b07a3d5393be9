/**
 * The constraint kinds that are rules over the operation, a person's approval
 * and time (issue 23, docs/constraints.md): `require_bound_operation`,
 * `budget`, `max_calls` and `require_approval`, in the order verify checks
 * them. Like the per-request kinds of kinds.tsx, each is its form state, its
 * editor, its API value and its plain words; the API's own validator checks
 * the values (src/constraints.ts, src/limits.ts, src/approval-rule.ts).
 */
import type { JSX } from 'preact';
import { BUDGET_PERIODS, CALL_PERIODS } from '../../../src/limits.js';
import type { ConstraintKind, EditorProps } from './kind.js';

const PERIOD_WORDS: Record<string, string> = {
  minute: 'per minute', hour: 'per hour', day: 'per day', week: 'per week (from Monday)', month: 'per calendar month', total: 'in total',
};
/** A period in words (`per day (UTC)`, `in total`). */
export function periodWords(p: string): string {
  return p === 'total' ? 'in total' : `${PERIOD_WORDS[p] ?? p} (UTC)`;
}
/** The current window of a period in words (`today (UTC)`, `in total`), for usage reads. */
export function windowWords(p: string): string {
  const w: Record<string, string> = { minute: 'this minute', hour: 'this hour', day: 'today', week: 'this week', month: 'this month' };
  return p === 'total' ? 'in total' : `${w[p] ?? p} (UTC)`;
}

const value = (e: Event): string => (e.target as HTMLInputElement).value;

function PeriodSelect(p: { id: string; periods: readonly string[]; value: string; onChange: (v: string) => void }): JSX.Element {
  return (
    <>
      <label for={p.id}>Window</label>
      <select id={p.id} value={p.value} onChange={(e) => p.onChange((e.target as HTMLSelectElement).value)}>
        {p.periods.map((x) => <option key={x} value={x}>{x === 'total' ? 'in total' : PERIOD_WORDS[x]}</option>)}
      </select>
    </>
  );
}

function MoneyFields<S extends { amount: string; currency: string }>(p: EditorProps<S> & { lead: string; placeholder: string; field: string }): JSX.Element {
  return (
    <>
      <label for={`${p.id}-${p.field}`}>{p.lead}</label>
      <input id={`${p.id}-${p.field}`} inputMode="decimal" size={12} placeholder={p.placeholder} value={p.state.amount}
        onInput={(e) => p.onChange({ ...p.state, amount: value(e) })} />
      <label for={`${p.id}-currency`}>Currency</label>
      <input id={`${p.id}-currency`} size={4} maxLength={3} value={p.state.currency}
        onInput={(e) => p.onChange({ ...p.state, currency: value(e) })} />
    </>
  );
}

const bound: ConstraintKind<boolean> = {
  key: 'require_bound_operation', label: 'Operation-bound proofs',
  help: 'Only proofs bound to the exact request (scope, method, path, tool, body) are accepted.',
  empty: () => false, toValue: (s) => (s ? true : undefined),
  Editor: (p) => (
    <div class="row">
      <label class="inline"><input type="checkbox" id={p.id} checked={p.state} onChange={(e) => p.onChange((e.target as HTMLInputElement).checked)} />
        {' '}Require operation-bound proofs</label>
    </div>
  ),
  describe: (v) => (v === true ? 'operation-bound proofs only' : 'unbound proofs accepted'),
};

type BudgetState = { amount: string; currency: string; period: string };
const budget: ConstraintKind<BudgetState> = {
  key: 'budget', label: 'Budget', help: 'Most money all allowed payments may move together in a window (calendar windows in UTC).',
  empty: () => ({ amount: '', currency: 'USD', period: 'day' }),
  toValue: (s) => (s.amount.trim() ? { amount: s.amount.trim(), currency: s.currency.trim().toUpperCase(), period: s.period } : undefined),
  Editor: (p) => (
    <div class="row wrap">
      <MoneyFields {...p} lead="Up to" placeholder="200.00" field="amount" />
      <PeriodSelect id={`${p.id}-period`} periods={BUDGET_PERIODS} value={p.state.period} onChange={(period) => p.onChange({ ...p.state, period })} />
    </div>
  ),
  describe: (v) => {
    const b = v as BudgetState;
    return `at most ${b.amount} ${b.currency} of payments ${periodWords(b.period)}`;
  },
};

type CallsState = { count: string; period: string };
const maxCalls: ConstraintKind<CallsState> = {
  key: 'max_calls', label: 'Rate limit', help: 'Most allowed calls, of any scope, in a window (calendar windows in UTC).',
  empty: () => ({ count: '', period: 'hour' }),
  // Not a whole number: NaN, which the API's validator refuses with its own message.
  toValue: (s) => (s.count.trim() ? { count: /^\d{1,10}$/.test(s.count.trim()) ? Number(s.count.trim()) : Number.NaN, period: s.period } : undefined),
  Editor: (p) => (
    <div class="row wrap">
      <label for={`${p.id}-count`}>At most</label>
      <input id={`${p.id}-count`} inputMode="numeric" size={10} placeholder="1000" value={p.state.count}
        onInput={(e) => p.onChange({ ...p.state, count: value(e) })} />
      <span aria-hidden="true">calls</span>
      <PeriodSelect id={`${p.id}-period`} periods={CALL_PERIODS} value={p.state.period} onChange={(period) => p.onChange({ ...p.state, period })} />
    </div>
  ),
  describe: (v) => {
    const m = v as { count: number; period: string };
    return `at most ${m.count} calls ${periodWords(m.period)}`;
  },
};

type ApprovalState = { scopes: string[]; amount: string; currency: string };
const approval: ConstraintKind<ApprovalState> = {
  key: 'require_approval', label: 'Your approval of single actions',
  help: 'Actions of these scopes wait for you to approve each one (on the Approvals page); optionally only above an amount.',
  empty: () => ({ scopes: [], amount: '', currency: 'USD' }),
  toValue: (s) => (s.scopes.length || s.amount.trim() ? {
    scopes: [...s.scopes], ...(s.amount.trim() ? { above: { amount: s.amount.trim(), currency: s.currency.trim().toUpperCase() } } : {}),
  } : undefined),
  Editor: (p) => (
    <>
      <div class="row wrap" role="group" aria-label="Scopes that need your approval">
        {p.scopes.map((s, i) => (
          <label key={s} class="inline"><input type="checkbox" id={`${p.id}-scope-${i}`} value={s} checked={p.state.scopes.includes(s)}
            onChange={(e) => p.onChange({
              ...p.state,
              scopes: (e.target as HTMLInputElement).checked ? [...p.state.scopes, s] : p.state.scopes.filter((x) => x !== s),
            })} />
            {' '}<code>{s}</code></label>
        ))}
      </div>
      <div class="row wrap">
        <MoneyFields {...p} lead="Only above (optional)" placeholder="100.00" field="above" />
      </div>
      <span class="hint">Without an amount, every action of these scopes waits for you. With one, an action without an
        amount, or in another currency, waits too.</span>
    </>
  ),
  describe: (v) => {
    const r = v as { scopes: string[]; above?: { amount: string; currency: string } };
    return `your approval of each ${r.scopes.join(', ')} action${r.above ? ` above ${r.above.amount} ${r.above.currency}` : ''}`;
  },
};

/** The rule kinds, in the order verify checks them: the binding, the limits, then the approval. */
export const RULE_KINDS: ConstraintKind<any>[] = [bound, budget, maxCalls, approval]; // eslint-disable-line @typescript-eslint/no-explicit-any
