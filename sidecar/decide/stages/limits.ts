/**
 * Stage 10, limits: for an allow under a certificate with `budget` or
 * `max_calls` (src/limits.ts, docs/constraints.md), the usage counters the
 * call debits at commit, in the current calendar window (UTC). A budget whose
 * context is missing or in another currency is deny `constraint_denied`,
 * `constraint: "budget"`. A window already too full for the call is deny
 * `budget_exceeded` / `rate_exceeded` here (no person is asked to approve an
 * action that cannot run); commit debits atomically and is the authority (a
 * concurrent call that took the rest makes it the same deny there).
 */
import { planLimits, formatMicros } from '../../../src/limits.js';
import { need, read } from '../stage.js';
import { isReplay } from './idempotency.js';
import type { Stage } from '../stage.js';

/** The limits stage. */
export const limits: Stage = {
  name: 'limits',
  async run(ctx, call) {
    const decision = need(call.decision, 'decision');
    // A replay was debited by the request it repeats.
    if (decision.decision !== 'allow' || isReplay(call)) return;
    const cert = need(call.cert, 'cert').payload;
    const c = cert.constraints;
    if (!c?.budget && !c?.max_calls) return;
    const request = need(call.request, 'request');
    const plan = planLimits(c, request.required_scope, request.context, call.now);
    if (!plan.ok) {
      call.decision = { decision: 'deny', reason: 'constraint_denied', constraint: plan.constraint };
      return;
    }
    if (plan.debits.length === 0) return;
    const used = await read(() => ctx.store.usage.usage(cert.cert_id, plan.debits));
    call.counters = plan.debits.map((d, i) => ({ kind: d.kind, windowStart: d.windowStart, used: used[i]!,
      amount: d.amount, limit: d.limit }));
    const full = plan.debits.find((d, i) => used[i]! + d.amount > d.limit);
    if (full) {
      call.decision = { decision: 'deny', reason: full.kind === 'budget' ? 'budget_exceeded' : 'rate_exceeded' };
      return;
    }
    const details: Record<string, unknown> = {};
    for (const d of plan.debits) {
      if (d.kind === 'budget') details.budget_debit = { amount: formatMicros(d.amount), currency: c.budget!.currency,
        window_start: new Date(d.windowStart).toISOString() };
      else details.calls_debit = { count: d.amount, window_start: new Date(d.windowStart).toISOString() };
    }
    call.decision = {
      ...decision,
      effects: { ...decision.effects, debits: plan.debits.map((d) => ({ certId: cert.cert_id, ...d })) },
      details: { ...decision.details, ...details },
    };
  },
};
