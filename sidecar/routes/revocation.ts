/**
 * What the delegation routes share about chains (docs/certificates.md,
 * "Sub-delegation"): reading a requested right to delegate, and revoking a
 * certificate with every descendant, one `delegation.revoked` each.
 */
import { ServiceError } from '../../src/errors.js';
import { buildEvent } from '../events.js';
import type { ServiceContext } from '../context.js';
import type { CertificateRecord } from '../store/types.js';
import { iso } from '../http/resources.js';

/**
 * A requested `max_delegation_depth`: absent means 0 (no right to delegate); otherwise an
 * integer from 0 to `max`, else 400 `invalid_delegation_depth` naming `field`.
 */
export function delegationRight(value: unknown, max: number, field: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new ServiceError('invalid_delegation_depth', `${field} must be an integer from 0 to ${max}.`, { field });
  }
  return value;
}

/** The answer of a revocation. */
export interface RevocationAnswer {
  cert_id: string;
  status: 'revoked';
  already_revoked: boolean;
  revoked_at: string | null;
  descendants_revoked: string[];
}

/**
 * Revokes `cert` and every approved descendant in one transaction (the store's `revokeTree`),
 * with one `delegation.revoked` per certificate revoked (a descendant's reason is
 * `ancestor_revoked`), and marks each revoked in this process's cache before answering (other
 * replicas learn it from the change feed). Repeating it answers `already_revoked` and sends no
 * event; it still revokes any approved descendant left (none, when every revocation came here).
 */
export async function revokeWithDescendants(ctx: ServiceContext, cert: CertificateRecord,
  reason: string): Promise<RevocationAnswer> {
  const conn = await ctx.store.platforms.getConnection(cert.connectionId);
  const now = ctx.clock();
  const revoked = await ctx.store.delegations.revokeTree(cert.id, reason, now, (c, why) => buildEvent(ctx, {
    type: 'delegation.revoked', accountId: cert.accountId, platformId: conn!.platformId, connectionId: c.connectionId,
    now, fields: { cert_id: c.id, agent_id: c.agentId, connection_id: c.connectionId, org_id: cert.accountId,
      reason: why },
  }));
  // Same process, before the call returns: later verifies see the revocations even on a cache hit.
  for (const c of revoked) ctx.caches.markRevoked(c.id);
  ctx.nudgeWebhooks();
  const changed = revoked[0]?.id === cert.id;
  return { cert_id: cert.id, status: 'revoked', already_revoked: !changed,
    revoked_at: iso(changed ? now : cert.revokedAt),
    descendants_revoked: revoked.filter((c) => c.id !== cert.id).map((c) => c.id) };
}
