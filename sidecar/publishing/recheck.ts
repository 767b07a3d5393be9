/**
 * The publisher-domain re-check (issue 32; docs/organisations.md, "Publishing"): every hour, the
 * verified domains not checked for `SIDECAR_DOMAIN_RECHECK_HOURS` are looked up again. A record
 * found gone or changed lapses the verification and unpublishes the organisation's platforms in
 * the same transaction, with the audit events `domain.lapsed` and `platform.unpublished` (actor
 * `system`, cause `domain_lapsed`); a server that does not answer changes nothing (the next run
 * tries again).
 * Replicas may run it at once: each check is recorded under its claim's token, idempotently.
 */
import type { ServiceContext } from '../context.js';
import { checkDomain } from './dns.js';
import { domainCheckRows } from '../audit/admin-events.js';
import type { DomainCheckResult } from '../store/types.js';

/** Domains looked up per run. */
export const RECHECK_BATCH = 100;

/** One run: checks the domains due at `now`; returns what each check did, by organisation. */
export async function recheckDomains(ctx: ServiceContext, now = ctx.clock()): Promise<Map<string, DomainCheckResult>> {
  const due = await ctx.store.publishing.domainsDue(now - ctx.config.domainRecheckHours * 3600_000, RECHECK_BATCH);
  const out = new Map<string, DomainCheckResult>();
  for (const d of due) {
    const found = await checkDomain(ctx.dns, d.domain, d.token);
    const result = await ctx.store.publishing.recordCheck(d.orgId, d.token, found.outcome, ctx.clock(),
      (r, unpublished) => domainCheckRows(ctx, d.orgId, d.domain, found.outcome, { system: true }, r, unpublished));
    if (result === 'lapsed') {
      ctx.log.warn({ orgId: d.orgId, domain: d.domain, outcome: found.outcome }, 'publisher domain lapsed');
    }
    out.set(d.orgId, result);
  }
  return out;
}

/** Starts the hourly re-check; returns its stop. */
export function startDomainRecheck(ctx: ServiceContext): () => void {
  const timer = setInterval(() => {
    void recheckDomains(ctx).catch((err: unknown) => ctx.log.error({ err }, 'publisher-domain re-check failed'));
  }, 3600_000);
  timer.unref();
  return () => clearInterval(timer);
}
