/**
 * Administrative audit events (docs/audit.md, "Administrative events"): the rows a workspace's
 * administrative changes write into its own chain, in the transaction of the change. `details`
 * name who acted: `actor_account_id` (a person, signed in), `actor: "platform"` (a platform with
 * its connection's API key) or `actor: "system"` (the domain re-check); a connection's publisher
 * sees the other workspace as `actor_workspace_id`, never its people. No secret is ever a detail.
 */
import crypto from 'node:crypto';
import type { ServiceContext } from '../context.js';
import type { AuditEventRecord, ConnectionRecord, DomainCheckResult } from '../store/types.js';

/** Who acted: a person (their account id), a platform through its API key, or the service itself. */
export type AdminActor = { person: string } | { platform: true } | { system: true };

/** The `details` members naming `actor`. */
export function actorDetails(actor: AdminActor): Record<string, unknown> {
  if ('person' in actor) return { actor_account_id: actor.person };
  return { actor: 'platform' in actor ? 'platform' : 'system' };
}

/** An administrative audit row of `workspaceId` (its `details` as given; `connectionId` for a connection's). */
export function adminRow(
  ctx: ServiceContext, workspaceId: string, type: AuditEventRecord['eventType'], details: Record<string, unknown>,
  connectionId: string | null = null,
): AuditEventRecord {
  return {
    id: crypto.randomUUID(), accountId: workspaceId, eventType: type, connectionId, agentId: null, certId: null,
    requiredScope: null, details, createdAt: ctx.clock(),
  };
}

/**
 * The rows of a connection's `type` event: one in the chain of the connection's workspace, and,
 * when the platform is another workspace's (`publisherId`), one in the publisher's, which names
 * the connection's workspace rather than the person who acted. `own` are the details only the
 * connection's workspace sees.
 */
export function connectionRows(
  ctx: ServiceContext, conn: ConnectionRecord, publisherId: string, type: AuditEventRecord['eventType'],
  actor: AdminActor, own: Record<string, unknown> = {},
): AuditEventRecord[] {
  const ids = { connection_id: conn.id, platform_id: conn.platformId };
  const rows = [adminRow(ctx, conn.accountId, type, { ...actorDetails(actor), ...ids, ...own }, conn.id)];
  if (publisherId !== conn.accountId) {
    const by = 'person' in actor ? { actor_workspace_id: conn.accountId } : actorDetails(actor);
    rows.push(adminRow(ctx, publisherId, type, { ...by, ...ids, workspace_id: conn.accountId }, conn.id));
  }
  return rows;
}

/**
 * The rows of a domain check that changed the claim: `domain.verified`, or `domain.lapsed` with a
 * `platform.unpublished` (cause `domain_lapsed`) per platform it unpublished.
 */
export function domainCheckRows(
  ctx: ServiceContext, orgId: string, domain: string, outcome: string, actor: AdminActor,
  result: DomainCheckResult, unpublished: readonly string[],
): AuditEventRecord[] {
  const by = actorDetails(actor);
  if (result === 'verified') return [adminRow(ctx, orgId, 'domain.verified', { ...by, domain })];
  if (result !== 'lapsed') return [];
  return [adminRow(ctx, orgId, 'domain.lapsed', { ...by, domain, outcome }),
    ...unpublished.map((id) => adminRow(ctx, orgId, 'platform.unpublished',
      { ...by, platform_id: id, cause: 'domain_lapsed', domain }))];
}
