/**
 * Stage 12, limits: for an allow under a certificate with `budget` or
 * `max_calls` (src/limits.ts, docs/constraints.md), the usage counters the
 * call debits at commit, in the current calendar window (UTC). Under a
 * sub-delegated certificate every link of its chain counts: the call debits
 * the leaf's counters and every ancestor's, each within its own limit, in the
 * same commit (hierarchical and exact: docs/certificates.md). A budget whose
 * context is missing or in another currency is deny `constraint_denied`,
 * `constraint: "budget"`. A window already too full for the call is deny
 * `budget_exceeded` / `rate_exceeded` here (no person is asked to approve an
 * action that cannot run), naming the link under a chain; commit debits
 * atomically and is the authority (a concurrent call that took the rest makes
 * it the same deny there).
 */
import { depthOf } from '../../../src/chain.js';
import type { DelegationCertificate } from '../../../src/certificate.js';
import { planLimits, formatMicros } from '../../../src/limits.js';
import type { LimitDebit } from '../../../src/limits.js';
import type { UsageDebit } from '../../store/types.js';
import { need, read } from '../stage.js';
import { isReplay } from './idempotency.js';
import type { Decision, Stage } from '../stage.js';

/** The link a deny names, for a certificate in a chain. */
function linkOf(chain: readonly DelegationCertificate[], at: number): Record<string, unknown> {
  if (chain.length < 2) return {};
  const p = chain[at]!.payload;
  return { link: { depth: depthOf(p), cert_id: p.cert_id } };
}

/** The limits stage. */
export const limits: Stage = {
  name: 'limits',
  async run(ctx, call) {
    const decision = need(call.decision, 'decision');
    // A replay was debited by the request it repeats.
    if (decision.decision !== 'allow' || isReplay(call)) return;
    const chain = call.chain ?? [need(call.cert, 'cert')];
    if (!chain.some((c) => c.payload.constraints?.budget || c.payload.constraints?.max_calls)) return;
    const request = need(call.request, 'request');
    const deny = (d: Decision, at: number): void => {
      call.decision = { ...d, details: { ...decision.details, ...linkOf(chain, at) } };
    };
    const debits: (LimitDebit & { certId: string; at: number })[] = [];
    for (const [at, link] of chain.entries()) {
      const c = link.payload.constraints;
      if (!c?.budget && !c?.max_calls) continue;
      const plan = planLimits(c, request.required_scope, request.context, call.now);
      if (!plan.ok) {
        deny({ decision: 'deny', reason: 'constraint_denied', constraint: plan.constraint }, at);
        return;
      }
      for (const d of plan.debits) debits.push({ ...d, certId: link.payload.cert_id, at });
    }
    if (debits.length === 0) return;
    const used: number[] = [];
    for (const [at] of chain.entries()) {
      const mine = debits.filter((d) => d.at === at);
      if (mine.length === 0) continue;
      used.push(...await read(() => ctx.store.usage.usage(mine[0]!.certId, mine)));
    }
    // The counters the explanation shows: the leaf's, or those of the link whose limit is reached.
    const countersOf = (at: number) => debits.map((d, i) => ({ d, used: used[i]! })).filter((x) => x.d.at === at)
      .map(({ d, used: u }) => ({ kind: d.kind, windowStart: d.windowStart, used: u, amount: d.amount,
        limit: d.limit }));
    call.counters = countersOf(0);
    const fullAt = debits.findIndex((d, i) => used[i]! + d.amount > d.limit);
    if (fullAt >= 0) {
      const full = debits[fullAt]!;
      call.counters = countersOf(full.at);
      deny({ decision: 'deny', reason: full.kind === 'budget' ? 'budget_exceeded' : 'rate_exceeded' }, full.at);
      return;
    }
    const details: Record<string, unknown> = {};
    const leaf = chain[0]!.payload.constraints;
    for (const d of debits.filter((x) => x.at === 0)) {
      if (d.kind === 'budget') details.budget_debit = { amount: formatMicros(d.amount),
        currency: leaf!.budget!.currency,
        window_start: new Date(d.windowStart).toISOString() };
      else details.calls_debit = { count: d.amount, window_start: new Date(d.windowStart).toISOString() };
    }
    const usage: UsageDebit[] = debits.map((d) => ({ certId: d.certId, kind: d.kind, windowStart: d.windowStart,
      amount: d.amount, limit: d.limit }));
    call.decision = {
      ...decision,
      effects: { ...decision.effects, debits: usage },
      details: { ...decision.details, ...details },
    };
  },
};
