/**
 * The explanation of one decision (docs/authzen.md, "Explained decisions"):
 * the stage that decided, the certificate (its public claims, no key), the
 * scope asked and granted, each constraint with the context value and its
 * limit, the approval state, the budget and call counters at that moment, and
 * for a deny the smallest change that would have allowed it. Never a secret
 * or a proof. Pure: the pipeline gathers the inputs.
 */
import { AMOUNT_RE, amountMicros, evaluateConstraints } from './constraints.js';
import type { ConstraintName, Constraints } from './constraints.js';
import type { CertificatePayload } from './certificate.js';
import { formatMicros } from './limits.js';
import type { VerifyContext } from './protocol.js';

/** A counter of a budget or `max_calls` as the limits stage read it. */
export interface CounterReading {
  kind: 'budget' | 'calls';
  windowStart: number;
  /** Used before this call. */
  used: number;
  /** What this call would add. */
  amount: number;
  limit: number;
}

/** What the pipeline knew when it decided. */
export interface ExplainInput {
  decisionId: string;
  now: number;
  mode: 'verify' | 'grant';
  decision: 'allow' | 'deny';
  reason: string;
  /** The stage whose result the answer is. */
  stage: string;
  agentId: string;
  scope: string;
  context: VerifyContext | undefined;
  cert: CertificatePayload | undefined;
  constraint?: string | undefined;
  approvalId?: string | undefined;
  approvalState?: string | undefined;
  /** For a settled approval: when the same operation may request a new one (it settled one lifetime before). */
  approvalRetryAt?: number | undefined;
  counters?: readonly CounterReading[] | undefined;
  /** Currency of the budget (for the counters). */
  currency?: string | undefined;
  /** Under a sub-delegated certificate: the chain's certificate ids, leaf to root. */
  chain?: readonly string[] | undefined;
  /**
   * Under a chain, the link a deny failed at (depth 0: the certificate the account holder
   * signed); `cert` is then that link's payload, so the scope and constraint rows are its own.
   */
  link?: { depth: number; cert_id: string } | undefined;
}

/** What a counter's call adds: for a budget the context's amount itself (the plan caps one over the limit). */
function thisCall(x: ExplainInput, r: CounterReading): number {
  const a = x.context?.amount;
  return r.kind === 'budget' && a !== undefined && AMOUNT_RE.test(a) ? Number(amountMicros(a)) : r.amount;
}

/** Context members each constraint reads. */
const FACTS: Partial<Record<ConstraintName, (keyof VerifyContext)[]>> = {
  max_amount: ['amount', 'currency'], methods: ['method'], path_prefixes: ['path'], client_ips: ['client_ip'],
  tenants: ['tenant'], time_window: [],
};

/** Each checkable constraint of `c`, evaluated alone with its context value and limit. */
function constraintRows(c: Constraints | null, ctx: VerifyContext | undefined, scope: string, now: number) {
  if (!c) return [];
  return (Object.keys(FACTS) as ConstraintName[]).filter((name) => c[name] !== undefined).map((name) => {
    const r = evaluateConstraints({ [name]: c[name] } as Constraints, ctx, scope, now);
    const value = name === 'time_window' ? new Date(now).toISOString()
      : Object.fromEntries((FACTS[name] ?? []).map((k) => [k, ctx?.[k] ?? null]));
    return { name, limit: c[name], value, holds: r.ok, ...(r.ok ? {} : { missing: r.missing }) };
  });
}

/** The smallest change that would have allowed a deny, as one or more alternatives. */
function wouldAllow(x: ExplainInput, rows: ReturnType<typeof constraintRows>): Record<string, unknown>[] {
  const ctx = x.context ?? {};
  switch (x.reason) {
    case 'not_delegated': return [{ change: 'delegate_scope', scope: x.scope }];
    case 'delegation_revoked': case 'delegation_expired':
      return [{ change: 'new_delegation', scope: x.scope }];
    case 'constraint_denied': {
      const row = rows.find((r) => r.name === x.constraint);
      if (x.constraint === 'budget') return [{ change: 'send_context', members: ['amount', 'currency'] }];
      if (row?.missing) return [{ change: 'send_context', members: FACTS[x.constraint as ConstraintName] ?? [] }];
      const add: Record<string, unknown> = { methods: ctx.method, path_prefixes: ctx.path, client_ips: ctx.client_ip,
        tenants: ctx.tenant };
      if (x.constraint === 'max_amount') return [{ change: 'raise_limit', constraint: 'max_amount', to: ctx.amount }];
      if (x.constraint === 'time_window') {
        return [{ change: 'widen_window', constraint: 'time_window', at: new Date(x.now).toISOString() }];
      }
      return [{ change: 'add_to_constraint', constraint: x.constraint, value: add[x.constraint ?? ''] ?? null }];
    }
    case 'budget_exceeded': case 'rate_exceeded': {
      const k = x.reason === 'budget_exceeded' ? 'budget' : 'calls';
      const c = x.counters?.find((r) => r.kind === k);
      if (!c) return [{ change: 'raise_limit', constraint: k === 'budget' ? 'budget' : 'max_calls' }];
      const to = c.used + thisCall(x, c);
      return [{ change: 'raise_limit', constraint: k === 'budget' ? 'budget' : 'max_calls',
        to: k === 'budget' ? formatMicros(to) : to }, { change: 'wait_for_next_window' }];
    }
    case 'approval_required':
      return [{ change: 'grant_approval', ...(x.approvalId ? { approval_id: x.approvalId } : {}) }];
    case 'approval_denied': case 'approval_expired': case 'approval_used': {
      // The settled approval answers for this operation for one lifetime; only then does a new proof request another.
      const after = x.approvalRetryAt !== undefined ? new Date(x.approvalRetryAt).toISOString() : undefined;
      return [{ change: 'new_approval', ...(after ? { after } : {}),
        detail: `${after ? `from ${after} on, ` : ''}present a new proof for this action; `
          + 'a person grants the approval it requests' }];
    }
    case 'operation_mismatch': case 'operation_unbound': return [{ change: 'bound_proof',
      detail: 'present a proof bound to exactly this operation' }];
    default: return [];
  }
}

/** The explanation of a decision (JSON). */
export function explainDecision(x: ExplainInput): Record<string, unknown> {
  const c = x.cert;
  const rows = constraintRows(c?.constraints ?? null, x.context, x.scope, x.now);
  const rule = c?.constraints?.require_approval;
  return {
    decision_id: x.decisionId, time: new Date(x.now).toISOString(), mode: x.mode, decision: x.decision,
    reason: x.reason, stage: x.stage, agent_id: x.agentId,
    certificate: c ? { cert_id: c.cert_id, account_id: c.issuer.account_id, agent_id: c.subject.agent_id,
      connection_id: c.connection_id, scopes: c.scopes, constraints: c.constraints, issued_at: c.issued_at,
      expires_at: c.expires_at } : null,
    scope: { asked: x.scope, granted: c?.scopes ?? [], delegated: c?.scopes.includes(x.scope) ?? false },
    context: x.context ?? null,
    constraints: rows,
    ...(x.constraint ? { constraint: x.constraint } : {}),
    ...(x.chain ? { chain: x.chain } : {}), ...(x.link ? { link: x.link } : {}),
    approval: { rule: rule ?? null, approval_id: x.approvalId ?? null, state: x.approvalState ?? null },
    counters: (x.counters ?? []).map((r) => ({
      kind: r.kind, window_start: new Date(r.windowStart).toISOString(),
      ...(r.kind === 'budget' ? { currency: x.currency, used: formatMicros(r.used),
        this_call: formatMicros(thisCall(x, r)),
        limit: formatMicros(r.limit) } : { used: r.used, this_call: r.amount, limit: r.limit }),
    })),
    would_allow: x.decision === 'deny' ? wouldAllow(x, rows) : [],
  };
}
