/**
 * The webhook event bodies (spec 6.2, and the approval events of step-up
 * approval): one interface per `event`, and the {@link WebhookEvent} union to
 * narrow on, with the list of event names. Pure; `webhooks.ts` re-exports them with the
 * signature rule.
 */
/**
 * Every event kind (spec 6.2).
 *
 * ```ts
 * for (const kind of WEBHOOK_EVENT_TYPES) handlers.set(kind, []);
 * ```
 */
export const WEBHOOK_EVENT_TYPES = [
  'connection.created',
  'connection.key_rotated',
  'connection.removed',
  'delegation.approved',
  'delegation.denied',
  'delegation.revoked',
  'approval.requested',
  'approval.granted',
  'approval.denied',
  'approval.expired',
] as const;

/**
 * One event kind.
 *
 * ```ts
 * const kind: WebhookEventType = 'delegation.revoked';
 * ```
 */
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * True when `s` is a known event kind (the receiver passes unknown kinds to `onUnknownEvent`).
 *
 * ```ts
 * isWebhookEventType('delegation.revoked');   // true
 * isWebhookEventType('connection.paused');    // false
 * ```
 */
export function isWebhookEventType(s: unknown): s is WebhookEventType {
  return typeof s === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(s);
}

/**
 * Members every body has.
 *
 * ```ts
 * const { event, delivery_id, occurred_at }: WebhookEnvelope = body;
 * ```
 */
export interface WebhookEnvelope {
  /** The event kind. */
  event: WebhookEventType;
  /** Equal to the `X-Service-Delivery-ID` header; the same on every retry of the delivery. */
  delivery_id: string;
  /** When the change happened (ISO 8601, UTC). */
  occurred_at: string;
}

/**
 * `connection.created`: a connection (and its platform) was created. Contains secrets: store it like one.
 *
 * ```ts
 * if (event.event === 'connection.created') await vault.put(event.connection_id, event.webhook_signing_secret);
 * ```
 */
export interface ConnectionCreatedEvent extends WebhookEnvelope {
  event: 'connection.created';
  connection_id: string;
  platform_id: string;
  org_id: string;
  org_name: string;
  allowed_scopes: string[];
  /** The callback URL configured when the event was created (null when none was set yet). */
  callback_url: string | null;
  api_key: string;
  webhook_signing_secret: string;
}

/**
 * `connection.key_rotated`: the connection's API key was rotated.
 *
 * ```ts
 * if (event.event === 'connection.key_rotated') await reloadApiKey(event.connection_id);
 * ```
 */
export interface ConnectionKeyRotatedEvent extends WebhookEnvelope {
  event: 'connection.key_rotated';
  connection_id: string;
  api_key_prefix: string;
  previous_prefix: string;
}

/**
 * `connection.removed`: the connection was removed (its keys and certificates stop working).
 *
 * ```ts
 * if (event.event === 'connection.removed') await connections.markRemoved(event.connection_id);
 * ```
 */
export interface ConnectionRemovedEvent extends WebhookEnvelope {
  event: 'connection.removed';
  connection_id: string;
  org_id: string;
  /** ISO 8601 timestamp. */
  removed_at: string;
}

/**
 * `delegation.approved`: a delegation request was approved and a certificate issued.
 *
 * ```ts
 * if (event.event === 'delegation.approved') await delegations.add(event.agent_id, event.approved_scope);
 * ```
 */
export interface DelegationApprovedEvent extends WebhookEnvelope {
  event: 'delegation.approved';
  request_id: string;
  connection_id: string;
  org_id: string;
  agent_id: string;
  approved_scope: string[];
  /** The signed certificate object (canonical JSON object, the same as the API serves). */
  cert_json: Record<string, unknown>;
  /** The delegation key statement (a string). */
  delegation_key_statement: string;
}

/**
 * `delegation.denied`: a delegation request was denied.
 *
 * ```ts
 * if (event.event === 'delegation.denied') await requests.close(event.request_id);
 * ```
 */
export interface DelegationDeniedEvent extends WebhookEnvelope {
  event: 'delegation.denied';
  request_id: string;
  connection_id: string;
  org_id: string;
  agent_id: string;
  /** The reason given by the account holder, or null (an addition to spec 6.2, which leaves it open). */
  reason: string | null;
}

/**
 * `delegation.revoked`: a delegation certificate was revoked.
 *
 * ```ts
 * if (event.event === 'delegation.revoked') await delegations.remove(event.cert_id);
 * ```
 */
export interface DelegationRevokedEvent extends WebhookEnvelope {
  event: 'delegation.revoked';
  cert_id: string;
  agent_id: string;
  connection_id: string;
  org_id: string;
  reason: string;
}

/**
 * An action awaiting or given a person's approval, in human terms (docs/webhooks.md).
 *
 * ```ts
 * const { method, path, amount, currency }: ApprovalAction = event.action;   // e.g. POST /v1/payments 120.00 EUR
 * ```
 */
export interface ApprovalAction {
  /** HTTP method of the request, or null. */
  method: string | null;
  /** Request path (or the MCP tool's resource), or null. */
  path: string | null;
  /** MCP tool, or null. */
  tool: string | null;
  /** Decimal amount, or null. */
  amount: string | null;
  /** Currency of the amount, or null. */
  currency: string | null;
  /** Tenant, or null. */
  tenant: string | null;
  /** True when the proof was bound to this operation (docs/proofs.md). */
  bound: boolean;
}

/**
 * Members of every `approval.*` event.
 *
 * ```ts
 * const label = (e: ApprovalEventBase) => `${e.scope} for agent ${e.agent_id} (approval ${e.approval_id})`;
 * ```
 */
export interface ApprovalEventBase extends WebhookEnvelope {
  approval_id: string;
  connection_id: string;
  org_id: string;
  agent_id: string;
  cert_id: string;
  /** The scope of the action. */
  scope: string;
  action: ApprovalAction;
}

/**
 * `approval.requested`: an action needs a person's approval (verify answered deny `approval_required`).
 *
 * ```ts
 * if (event.event === 'approval.requested') await notify(event.approval_id, event.action, event.expires_at);
 * ```
 */
export interface ApprovalRequestedEvent extends ApprovalEventBase {
  event: 'approval.requested';
  /** When the request expires unless decided (ISO 8601). */
  expires_at: string;
}

/**
 * `approval.granted`: the account holder approved the action; one verify of it may now allow.
 *
 * ```ts
 * if (event.event === 'approval.granted') await retryQueue.release(event.approval_id);
 * ```
 */
export interface ApprovalGrantedEvent extends ApprovalEventBase {
  event: 'approval.granted';
  /** Until when the approval can be used (ISO 8601). */
  expires_at: string;
}

/**
 * `approval.denied`: the account holder denied the action.
 *
 * ```ts
 * if (event.event === 'approval.denied') await tasks.fail(event.approval_id, event.note ?? 'denied');
 * ```
 */
export interface ApprovalDeniedEvent extends ApprovalEventBase {
  event: 'approval.denied';
  /** The note given with the denial, or null. */
  note: string | null;
}

/**
 * `approval.expired`: the approval expired, undecided (`pending`) or unused (`granted`).
 *
 * ```ts
 * if (event.event === 'approval.expired' && event.previous_state === 'pending') await tasks.fail(event.approval_id, 'expired');
 * ```
 */
export interface ApprovalExpiredEvent extends ApprovalEventBase {
  event: 'approval.expired';
  /** `pending`: never decided; `granted`: never used. */
  previous_state: 'pending' | 'granted';
  /** When it expired (ISO 8601). */
  expired_at: string;
}

/**
 * Any event body: narrow it on `event`.
 *
 * ```ts
 * function onEvent(e: WebhookEvent) {
 *   switch (e.event) { case 'delegation.revoked': return revoke(e.cert_id); default: return undefined; }
 * }
 * ```
 */
export type WebhookEvent =
  | ConnectionCreatedEvent
  | ConnectionKeyRotatedEvent
  | ConnectionRemovedEvent
  | DelegationApprovedEvent
  | DelegationDeniedEvent
  | DelegationRevokedEvent
  | ApprovalRequestedEvent
  | ApprovalGrantedEvent
  | ApprovalDeniedEvent
  | ApprovalExpiredEvent;
