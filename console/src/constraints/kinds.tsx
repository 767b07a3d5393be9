/**
 * The constraint kinds the approval form offers, one entry each: its form
 * state, its editor, how the state becomes the API's member (undefined = not
 * set) and how a set value reads in plain words. The approval form and the
 * certificate list only walk {@link CONSTRAINT_KINDS}, so a new kind is one
 * more entry here. The rules over the operation, a person's approval and time
 * (`require_bound_operation`, `require_approval`, `budget`, `max_calls`) are
 * in rule-kinds.tsx. Validation is not here: the form runs the API's own
 * validator (src/constraints.ts), so the messages are the API's.
 */
import type { JSX } from 'preact';
import { DAYS } from '../../../src/constraints.js';
import type { ConstraintKind, EditorProps } from './kind.js';
import { RULE_KINDS } from './rule-kinds.js';

export type { ConstraintKind, EditorProps } from './kind.js';

const lines = (s: string): string[] => s.split(/[\n,]/).map((x) => x.trim()).filter(Boolean);
const listOrUndef = (s: string): string[] | undefined => (lines(s).length ? lines(s) : undefined);
const asList = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);

function ListEditor(p: EditorProps<string> & { placeholder: string; hint: string }): JSX.Element {
  return (
    <>
      <textarea id={p.id} rows={2} value={p.state} placeholder={p.placeholder} spellcheck={false}
        aria-labelledby={`${p.id}-legend`} aria-describedby={`${p.id}-hint`}
        onInput={(e) => p.onChange((e.target as HTMLTextAreaElement).value)} />
      <span class="hint" id={`${p.id}-hint`}>{p.hint}</span>
    </>
  );
}

const listKind = (key: string, label: string, help: string, placeholder: string, hint: string, words: (l: string[]) => string): ConstraintKind<string> => ({
  key, label, help, empty: () => '', toValue: listOrUndef,
  Editor: (p) => <ListEditor {...p} placeholder={placeholder} hint={hint} />,
  describe: (v) => words(asList(v)),
});

const amount: ConstraintKind<{ amount: string; currency: string }> = {
  key: 'max_amount', label: 'Amount limit', help: 'Most money one request may move (payments scopes only).',
  empty: () => ({ amount: '', currency: 'USD' }),
  toValue: (s) => (s.amount.trim() ? { amount: s.amount.trim(), currency: s.currency.trim().toUpperCase() } : undefined),
  Editor: (p) => (
    <div class="row">
      <label for={`${p.id}-amount`}>Up to</label>
      <input id={`${p.id}-amount`} inputMode="decimal" size={12} placeholder="50.00" value={p.state.amount}
        onInput={(e) => p.onChange({ ...p.state, amount: (e.target as HTMLInputElement).value })} />
      <label for={`${p.id}-currency`}>Currency</label>
      <input id={`${p.id}-currency`} size={4} maxLength={3} value={p.state.currency}
        onInput={(e) => p.onChange({ ...p.state, currency: (e.target as HTMLInputElement).value })} />
    </div>
  ),
  describe: (v) => {
    const m = v as { amount?: string; currency?: string };
    return `payments of at most ${m.amount} ${m.currency} per request`;
  },
};

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const methods: ConstraintKind<string[]> = {
  key: 'methods', label: 'HTTP methods', help: 'Only these request methods.',
  empty: () => [], toValue: (s) => (s.length ? [...s] : undefined),
  Editor: (p) => (
    <div class="row wrap">
      {METHODS.map((m) => (
        <label key={m} class="inline"><input type="checkbox" id={`${p.id}-${m}`} checked={p.state.includes(m)}
          onChange={(e) => p.onChange((e.target as HTMLInputElement).checked ? [...p.state, m] : p.state.filter((x) => x !== m))} /> {m}</label>
      ))}
    </div>
  ),
  describe: (v) => `methods ${asList(v).join(', ')}`,
};

const paths = listKind('path_prefixes', 'Paths', 'Only requests under these path prefixes.', '/v1/orders',
  'One prefix per line; each starts with /. /a allows /a and /a/b, not /ab.', (l) => `paths under ${l.join(', ')}`);
const ips = listKind('client_ips', 'Client IP addresses', 'Only requests from these addresses or networks.', '203.0.113.0/24',
  'One address or CIDR per line (IPv4 or IPv6).', (l) => `from ${l.join(', ')}`);
const tenants = listKind('tenants', 'Tenants', 'Only for these tenants.', 'acme',
  'One tenant id per line.', (l) => `tenants ${l.join(', ')}`);

const DAY_NAMES: Record<string, string> = { sun: 'Sun', mon: 'Mon', tue: 'Tue', wed: 'Wed', thu: 'Thu', fri: 'Fri', sat: 'Sat' };
const timeWindow: ConstraintKind<{ start: string; end: string; days: string[] }> = {
  key: 'time_window', label: 'Time window (UTC)', help: 'Only between these times of day, in UTC; optionally on some days.',
  empty: () => ({ start: '', end: '', days: [] }),
  toValue: (s) => (s.start || s.end ? { start: s.start, end: s.end, ...(s.days.length ? { days: DAYS.filter((d) => s.days.includes(d)) } : {}) } : undefined),
  Editor: (p) => (
    <>
      <div class="row">
        <label for={`${p.id}-start`}>From (UTC)</label>
        <input id={`${p.id}-start`} type="time" value={p.state.start}
          onInput={(e) => p.onChange({ ...p.state, start: (e.target as HTMLInputElement).value })} />
        <label for={`${p.id}-end`}>until (UTC)</label>
        <input id={`${p.id}-end`} type="time" value={p.state.end} onInput={(e) => p.onChange({ ...p.state, end: (e.target as HTMLInputElement).value })} />
      </div>
      <div class="row wrap" role="group" aria-label="Days (none = every day)">
        {DAYS.map((d) => (
          <label key={d} class="inline"><input type="checkbox" id={`${p.id}-${d}`} checked={p.state.days.includes(d)}
            onChange={(e) => p.onChange({
              ...p.state,
              days: (e.target as HTMLInputElement).checked ? [...p.state.days, d] : p.state.days.filter((x) => x !== d),
            })} /> {DAY_NAMES[d]}</label>
        ))}
      </div>
    </>
  ),
  describe: (v) => {
    const w = v as { start?: string; end?: string; days?: string[] };
    return `${w.days?.length ? `${w.days.map((d) => DAY_NAMES[d] ?? d).join(', ')} ` : ''}${w.start}–${w.end} UTC`;
  },
};

/** The kinds, in the order the API checks them (docs/constraints.md). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const CONSTRAINT_KINDS: ConstraintKind<any>[] = [amount, methods, paths, ips, tenants, timeWindow, ...RULE_KINDS];

/**
 * Constraints in plain words (`methods GET; paths under /v1/orders`); 'none' when empty. The kinds
 * are said in the order of {@link CONSTRAINT_KINDS} (the order verify checks them), whatever the
 * order of the members in the API's answer (its serializer follows the response schema); members
 * the console does not know come last, as JSON.
 */
export function describeConstraints(c: Record<string, unknown> | null | undefined): string {
  if (!c || Object.keys(c).length === 0) return 'none';
  const known = CONSTRAINT_KINDS.filter((k) => Object.hasOwn(c, k.key)).map((k) => k.describe(c[k.key]));
  const other = Object.entries(c).filter(([k]) => !CONSTRAINT_KINDS.some((x) => x.key === k)).map(([k, v]) => `${k}: ${JSON.stringify(v)}`);
  return [...known, ...other].join('; ');
}
