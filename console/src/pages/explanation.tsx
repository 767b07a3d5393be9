/**
 * The explanation of one decision, opened from the audit view's "Why?"
 * (GET /v1/service/decisions/personal/{decision_id}, docs/authzen.md
 * "Explained decisions"), in plain words: the decision and its reason, the
 * stage that decided, the scope asked and granted, each constraint with the
 * request's value and its limit, the approval, the budget and call counters
 * as read before the call and, for a deny, what would have allowed it. The
 * explanation holds no secret and nothing of the proof; the page shows only
 * what it holds. A refusal (`404 decision_not_found`) or an unreachable
 * sidecar is said in the console's error style, with "Try again".
 */
import type { JSX } from 'preact';
import { ApiError, api } from '../api.js';
import { DECISION_REASONS } from '../../../src/decisions.js';
import { CONSTRAINT_KINDS } from '../constraints/kinds.js';
import { ErrorText, useLoad } from '../ui/common.js';
import { shortId, when } from '../ui/format.js';
import type { DecisionExplanation, ExplainedConstraint, ExplainedCounter } from '../types.js';

/** The pipeline stages (src/explain.ts `stage`) in plain words. */
const STAGES: Record<string, string> = {
  delegation: 'the delegation check (certificate status, expiry, scope and constraints)',
  binding: 'the operation binding check (is the proof bound to this operation?)',
  limits: 'the budget and rate limits',
  approval: 'the step-up approval (your approval of single actions)',
  commit: 'the commit (the state changed between the check and the write, e.g. a revocation or a concurrent call)',
};

const kindOf = (key: string | undefined) => CONSTRAINT_KINDS.find((k) => k.key === key);
const label = (key: string | undefined): string => kindOf(key)?.label ?? String(key);
const limitWords = (key: string, v: unknown): string => kindOf(key)?.describe(v) ?? JSON.stringify(v);
const text = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : JSON.stringify(v));

/** The meaning of a decision reason (src/decisions.ts) in plain words; null for a reason the console does not know. */
function meaning(reason: string): string | null {
  if (!Object.hasOwn(DECISION_REASONS, reason)) return null;
  // Said for API users ("`constraint` names it"); the page shows those members in their own rows.
  return DECISION_REASONS[reason as keyof typeof DECISION_REASONS].meaning
    .replace(/;? ?`\w+` names [^.]*\./g, '.').replace(/ \(`\w+`\)/g, '').replace(/`/g, '');
}

/** The request's value a constraint read (`method POST`, `amount 25.00, currency USD`), or the time for a window. */
function valueWords(c: ExplainedConstraint): string {
  if (typeof c.value === 'string') return `at ${c.value}`;
  if (!c.value || typeof c.value !== 'object') return '—';
  const parts = Object.entries(c.value as Record<string, unknown>)
    .map(([k, v]) => `${k} ${v === null ? '(not sent)' : text(v)}`);
  return parts.length ? parts.join(', ') : '—';
}

/** One "would allow" alternative in plain words. */
function changeWords(w: { change: string } & Record<string, unknown>, x: DecisionExplanation): string {
  const c = typeof w.constraint === 'string' ? w.constraint : undefined;
  switch (w.change) {
    case 'delegate_scope': return `Delegate ${text(w.scope)} to this agent: approve a request that includes it.`;
    case 'new_delegation': return `Approve a new delegation of ${text(w.scope)} for this agent.`;
    case 'add_to_constraint': return `Add ${text(w.value)} to the certificate's ${label(c).toLowerCase()}.`;
    case 'raise_limit': {
      if (w.to === undefined) return `Raise the certificate's ${label(c).toLowerCase()}.`;
      const budget = x.counters.find((k) => k.kind === 'budget')?.currency ?? '';
      const unit = c === 'max_calls' ? ' calls' : c === 'max_amount' && typeof x.context?.currency === 'string'
        ? ` ${x.context.currency}` : c === 'budget' ? ` ${budget}` : '';
      return `Raise the certificate's ${label(c).toLowerCase()} to ${text(w.to)}${unit.trimEnd()}.`;
    }
    case 'widen_window': return `Widen the time window to include ${text(w.at)}.`;
    case 'send_context': {
      const members = Array.isArray(w.members) ? w.members.join(' and ') : 'the missing facts';
      return `Have the platform send ${members} with the request (the constraint cannot be checked without it).`;
    }
    case 'wait_for_next_window': return 'Or wait for the next window of the limit.';
    case 'grant_approval': return `Grant the approval${typeof w.approval_id === 'string' ? ` ${w.approval_id}` : ''}`
      + ' on the Approvals page; the agent then retries with a fresh proof.';
    case 'new_approval': case 'bound_proof': return `${text(w.detail)}.`.replace(/^./, (s) => s.toUpperCase());
    default: return JSON.stringify(w);
  }
}

function ConstraintTable(p: { rows: ExplainedConstraint[]; decisive: string | undefined }): JSX.Element {
  if (p.rows.length === 0) return <p>The certificate has no constraint on the request itself.</p>;
  return (
    <table>
      <caption>Each constraint, checked on its own</caption>
      <thead><tr><th scope="col">Constraint</th><th scope="col">Limit</th><th scope="col">This request</th>
        <th scope="col">Result</th></tr></thead>
      <tbody>
        {p.rows.map((c) => (
          <tr key={c.name}>
            <th scope="row">{label(c.name)}{c.name === p.decisive && <> <span class="badge deny">decided</span></>}</th>
            <td>{limitWords(c.name, c.limit)}</td>
            <td>{valueWords(c)}</td>
            <td>{c.holds ? 'holds' : c.missing ? 'not checkable: the request did not say' : 'does not hold'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function CounterTable(p: { rows: ExplainedCounter[]; limited: boolean }): JSX.Element {
  if (p.rows.length === 0 && p.limited) {
    return <p>Not read: the decision was made before the budget and rate limits are checked.</p>;
  }
  if (p.rows.length === 0) return <p>The certificate has no budget and no rate limit.</p>;
  return (
    <table>
      <caption>Budget and calls, as read before this call</caption>
      <thead><tr><th scope="col">Limit</th><th scope="col">Used before</th><th scope="col">This call</th>
        <th scope="col">Limit</th><th scope="col">Window from</th></tr></thead>
      <tbody>
        {p.rows.map((c) => {
          const unit = c.kind === 'budget' ? ` ${c.currency ?? ''}`.trimEnd() : '';
          return (
            <tr key={c.kind}>
              <th scope="row">{c.kind === 'budget' ? 'Budget' : 'Calls'}</th>
              <td>{text(c.used)}{unit}</td><td>{text(c.this_call)}{unit}</td><td>{text(c.limit)}{unit}</td>
              <td title={c.window_start}>{when(c.window_start)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function approvalWords(a: DecisionExplanation['approval']): string {
  const rule = a.rule ? `The certificate asks for ${limitWords('require_approval', a.rule)}.`
    : 'The certificate asks for no approval.';
  if (a.state === null) return rule;
  const state = a.state === 'none' ? 'no approval of this operation existed' : `the approval was ${a.state}`;
  return `${rule} When this was decided ${state}${a.approval_id ? ` (${a.approval_id})` : ''}.`;
}

/** The body of an explanation. */
function ExplanationBody(p: { x: DecisionExplanation; agentName: (id: string) => string }): JSX.Element {
  const { x } = p;
  const c = x.certificate?.constraints;
  return (
    <>
      <dl class="facts">
        <dt>Decision</dt>
        <dd><span class={`badge ${x.decision}`}>{x.decision}</span> <code>{x.reason}</code>
          {x.constraint && <> ({label(x.constraint)})</>}{meaning(x.reason) && <> — {meaning(x.reason)}</>}</dd>
        <dt>Decided by</dt><dd>{STAGES[x.stage] ?? x.stage}</dd>
        <dt>Kind of check</dt><dd>{x.mode === 'grant' ? 'a grant check (AuthZEN; nothing was debited)' : 'verify'}</dd>
        <dt>Time</dt><dd title={x.time}>{when(x.time)}</dd>
        <dt>Agent</dt><dd>{p.agentName(x.agent_id)}</dd>
        <dt>Certificate</dt>
        <dd class="mono" title={x.certificate?.cert_id}>{x.certificate ? shortId(x.certificate.cert_id) : 'none'}</dd>
        <dt>Scope asked</dt><dd><code>{x.scope.asked}</code> — {x.scope.delegated ? 'delegated' : 'not delegated'}</dd>
        <dt>Scopes granted</dt><dd>{x.scope.granted.length ? x.scope.granted.join(', ') : 'none'}</dd>
        <dt>Request</dt><dd>{x.context && Object.keys(x.context).length
          ? Object.entries(x.context).map(([k, v]) => `${k} ${text(v)}`).join(', ') : 'no context sent'}</dd>
      </dl>
      <h3>Constraints</h3>
      <ConstraintTable rows={x.constraints} decisive={x.reason === 'constraint_denied' ? x.constraint : undefined} />
      <h3>Approval</h3>
      <p>{approvalWords(x.approval)}</p>
      <h3>Budget and calls</h3>
      <CounterTable rows={x.counters} limited={Boolean(c && ('budget' in c || 'max_calls' in c))} />
      {x.decision === 'deny' && (
        <>
          <h3>What would have allowed it</h3>
          {x.would_allow.length
            ? <ul class="would-allow">{x.would_allow.map((w, i) => <li key={i}>{changeWords(w, x)}</li>)}</ul>
            : <p>No single change is known that would have allowed it.</p>}
        </>
      )}
    </>
  );
}

/** A decision's explanation, read when it is shown. */
export function Explanation(p: { decisionId: string; agentName: (id: string) => string }): JSX.Element {
  const path = `/v1/service/decisions/personal/${encodeURIComponent(p.decisionId)}`;
  const d = useLoad(() => api<DecisionExplanation>('GET', path), [p.decisionId]);
  const headingId = `why-${p.decisionId}`;
  return (
    <section class="explanation" aria-labelledby={headingId} aria-busy={d.loading}>
      <h2 id={headingId}>Why this decision</h2>
      {d.loading && !d.data && <p>Reading the explanation…</p>}
      {d.error !== null && (
        <>
          <ErrorText error={d.error} />
          {d.error instanceof ApiError && d.error.code === 'decision_not_found'
            && <p class="hint">The sidecar has no explanation of this decision stored (none is kept for a refusal or an
              indeterminate answer, and a failed write of one is only logged).</p>}
          <button type="button" onClick={d.reload}>Try again</button>
        </>
      )}
      {d.data && <ExplanationBody x={d.data} agentName={p.agentName} />}
    </section>
  );
}
