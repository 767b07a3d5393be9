/**
 * Step-up approvals (issue 23), the parts shared by the decision pipeline,
 * the routes and the expiry job: the fingerprint of an operation, a new
 * pending approval, the action in human terms, and the audit row and webhook
 * event of each state change (docs/api.md "Approvals", docs/webhooks.md).
 */
import crypto from 'node:crypto';
import { canonicalize } from '../../src/canonical.js';
import type { BoundOperation } from '../../src/operation.js';
import type { VerifyContext } from '../../src/protocol.js';
import type { ApprovalAction } from '../../src/webhooks.js';
import type { ServiceContext } from '../context.js';
import { buildEvent } from '../events.js';
import type { ApprovalChange, ApprovalRecord } from '../store/types.js';

/** The approval events: webhook event type = audit event type. */
export type ApprovalEventType = 'approval.requested' | 'approval.granted' | 'approval.denied' | 'approval.expired';

/** The string members of a verify context (what an approval records and compares). */
export function contextRecord(ctx: VerifyContext | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(ctx ?? {})) if (typeof v === 'string') out[k] = v;
  return out;
}

/**
 * The fingerprint of an operation: SHA-256 (hex) of the canonical JSON of the certificate, the
 * scope, the whole context and the bound operation (or null). An approval is usable only by a
 * verify with the same fingerprint: the same scope, amount, currency, method, path, tool,
 * tenant, client address and body hash, under the same certificate.
 */
export function operationFingerprint(certId: string, scope: string, context: Record<string, string>, operation: BoundOperation | null): string {
  return crypto.createHash('sha256').update(canonicalize({ cert_id: certId, scope, context, operation: operation ?? null })).digest('hex');
}

/** A new pending approval, expiring after `SIDECAR_APPROVAL_TTL_SECONDS`. */
export function newApproval(ctx: ServiceContext, o: {
  accountId: string; connectionId: string; platformId: string; agentId: string; certId: string; scope: string;
  context: Record<string, string>; operation: BoundOperation | null; fingerprint: string; now: number;
}): ApprovalRecord {
  return {
    id: crypto.randomUUID(), accountId: o.accountId, connectionId: o.connectionId, platformId: o.platformId, agentId: o.agentId,
    certId: o.certId, scope: o.scope, fingerprint: o.fingerprint, context: o.context,
    operation: o.operation === null ? null : { ...o.operation }, state: 'pending', note: null,
    createdAt: o.now, expiresAt: o.now + ctx.config.approvalTtlSeconds * 1000, decidedAt: null, settledAt: null,
  };
}

/** The action of an approval in human terms: method, path, tool, amount, currency, tenant. */
export function approvalAction(a: ApprovalRecord): ApprovalAction {
  const c = a.context;
  const op = a.operation;
  return {
    method: c.method ?? op?.method ?? null, path: c.path ?? op?.path ?? null, tool: c.tool ?? op?.tool ?? null,
    amount: c.amount ?? null, currency: c.currency ?? null, tenant: c.tenant ?? null, bound: op !== null,
  };
}

/**
 * The audit row and the sealed webhook event of one state change of `a` (`extra`: the members
 * of that event type: `expires_at`, `note`, `previous_state`).
 */
export function approvalChange(ctx: ServiceContext, a: ApprovalRecord, type: ApprovalEventType, now: number, extra: Record<string, unknown>): ApprovalChange {
  const fields = {
    approval_id: a.id, connection_id: a.connectionId, org_id: a.accountId, agent_id: a.agentId, cert_id: a.certId, scope: a.scope,
    action: approvalAction(a), ...extra,
  };
  return {
    audit: {
      id: crypto.randomUUID(), accountId: a.accountId, eventType: type, connectionId: a.connectionId, agentId: a.agentId, certId: a.certId,
      requiredScope: a.scope, details: { approval_id: a.id, action: fields.action, ...extra }, createdAt: now,
    },
    event: buildEvent(ctx, { type, accountId: a.accountId, platformId: a.platformId, connectionId: a.connectionId, fields, now }),
  };
}
