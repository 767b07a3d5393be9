/**
 * The webhooks the sidecar sends, for the OpenAPI 3.1 top-level `webhooks`
 * section of `GET /openapi.json` (docs/webhooks.md): one `POST` per event
 * kind of `WEBHOOK_EVENT_TYPES` (src/webhook-events.ts), with the signature
 * headers of `WEBHOOK_HEADERS` (src/webhooks.ts), the event's body schema
 * (`components.schemas.<Kind>Event`) and what the sidecar does with the
 * receiver's answer.
 *
 * The body schemas restate the interfaces of src/webhook-events.ts; the
 * compiler checks that each schema's type is exactly its interface, and a
 * record keyed by the event kind makes a kind without a schema a compile
 * error. `test/sidecar/ops/openapi-webhooks.test.ts` checks the served
 * section against the list and real deliveries against the schemas.
 */
import { Type } from '@sinclair/typebox';
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { WEBHOOK_EVENT_TYPES } from '../../src/webhook-events.js';
import type * as E from '../../src/webhook-events.js';
import { WEBHOOK_HEADERS, WEBHOOK_TOLERANCE_SECONDS, WEBHOOK_USER_AGENT } from '../../src/webhooks.js';

const Str = Type.String();
const Time = Type.String({ format: 'date-time' });
const NullableStr = Type.Union([Type.String(), Type.Null()]);

/** A named event body: the envelope (`event`, `delivery_id`, `occurred_at`) and the event's members. */
function event<K extends E.WebhookEventType, P extends Record<string, TSchema>>(
  kind: K, description: string, members: P) {
  const id = `${kind.split(/[._]/).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}Event`;
  return Type.Object({
    event: Type.Literal(kind),
    delivery_id: Type.String({
      description: `Equal to the ${WEBHOOK_HEADERS.deliveryId} header; the same on every retry.` }),
    occurred_at: Type.String({ format: 'date-time', description: 'When the change happened (UTC).' }),
    ...members,
  }, { $id: id, description });
}

/** The action of an approval event, in human terms. */
const ApprovalAction = Type.Object({
  method: NullableStr, path: NullableStr, tool: NullableStr, amount: NullableStr, currency: NullableStr,
    tenant: NullableStr,
  bound: Type.Boolean({ description: 'The proof was bound to this operation.' }),
}, { description: 'The action, each member a string or null.' });
const approvalMembers = {
  approval_id: Str, connection_id: Type.String({ description: 'The verifying connection, where the agent acts.' }),
    org_id: Str,
  agent_id: Str, cert_id: Str, scope: Type.String({ description: 'The action\'s required scope.' }),
    action: ApprovalAction,
};

/** Every event body, by kind. */
export const WEBHOOK_EVENT_SCHEMAS = {
  'connection.created': event('connection.created',
    'A platform and its connection were registered. Contains secrets (api_key, webhook_signing_secret).', {
    connection_id: Str, platform_id: Str, org_id: Str, org_name: Str, allowed_scopes: Type.Array(Str),
    callback_url: Type.Union([Type.String(), Type.Null()], {
      description: 'The callback URL when the event was created (null when none was set yet).' }),
    api_key: Type.String({ description: 'Secret.' }), webhook_signing_secret: Type.String({ description: 'Secret.' }),
  }),
  'connection.key_rotated': event('connection.key_rotated', 'The connection\'s API key was rotated.', {
    connection_id: Str, api_key_prefix: Str, previous_prefix: Str,
  }),
  'connection.removed': event('connection.removed',
    'The connection was removed; its keys and certificates stop working (one delegation.revoked per certificate '
      + 'comes first).', {
    connection_id: Str, org_id: Str, removed_at: Time,
  }),
  'delegation.approved': event('delegation.approved', 'A delegation request was approved and a certificate issued.', {
    request_id: Str, connection_id: Str, org_id: Str, agent_id: Str, approved_scope: Type.Array(Str),
    cert_json: Type.Record(Type.String(), Type.Unknown(), {
      description: 'The signed certificate (docs/certificates.md), as the API serves it.' }),
    delegation_key_statement: Str,
  }),
  'delegation.denied': event('delegation.denied', 'A delegation request was denied.', {
    request_id: Str, connection_id: Str, org_id: Str, agent_id: Str, reason: NullableStr,
  }),
  'delegation.revoked': event('delegation.revoked', 'A delegation certificate was revoked.', {
    cert_id: Str, agent_id: Str, connection_id: Str, org_id: Str, reason: Str,
  }),
  'approval.requested': event('approval.requested',
    'An action needs a person\'s approval: verify answered deny `approval_required`.', {
    ...approvalMembers, expires_at: Type.String(
      { format: 'date-time', description: 'It expires unless decided by then.' }),
  }),
  'approval.granted': event('approval.granted',
    'The account holder approved the action; one verify of it may now allow.', {
    ...approvalMembers, expires_at: Type.String(
      { format: 'date-time', description: 'One verify of the action may allow until then.' }),
  }),
  'approval.denied': event('approval.denied', 'The account holder denied the action.', { ...approvalMembers,
    note: NullableStr }),
  'approval.expired': event('approval.expired', 'The approval expired undecided (`pending`) or unused (`granted`).', {
    ...approvalMembers, previous_state: Type.Union([Type.Literal('pending'), Type.Literal('granted')]),
      expired_at: Time,
  }),
} satisfies Record<E.WebhookEventType, TObject>;

/** The event body schemas, for `components.schemas`. */
export const WEBHOOK_SCHEMAS: readonly TSchema[] = WEBHOOK_EVENT_TYPES.map((k) => WEBHOOK_EVENT_SCHEMAS[k]);

const header = (name: string, description: string, pattern?: string) =>
  ({ in: 'header', name, required: true, description, schema: {
    type: 'string' as const, ...(pattern ? { pattern } : {}) } });

/** The signature headers every delivery carries (docs/webhooks.md, Signature). */
export const WEBHOOK_HEADER_PARAMETERS = [
  header(WEBHOOK_HEADERS.signature,
    'Lowercase hex HMAC-SHA256 keyed with the UTF-8 bytes of the webhook_signing_secret over '
      + `\`${WEBHOOK_HEADERS.timestamp} + "." + raw body\`. Compare in constant time.`, '^[0-9a-f]{64}$'),
  header(WEBHOOK_HEADERS.timestamp,
    `Unix seconds of this attempt. Refuse it when it is ${WEBHOOK_TOLERANCE_SECONDS} seconds or more from now.`,
      '^[0-9]{1,15}$'),
  header(WEBHOOK_HEADERS.deliveryId, 'The delivery id; the same on every retry of the delivery (deduplicate on it).'),
  header(WEBHOOK_HEADERS.userAgent, `Always \`${WEBHOOK_USER_AGENT}\`.`,
    `^${WEBHOOK_USER_AGENT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
];

/** The `webhooks` member of an OpenAPI 3.1 document, as @fastify/swagger types it. */
type Webhooks = NonNullable<Extract<NonNullable<FastifyDynamicSwaggerOptions['openapi']>, { webhooks?: unknown }>[
  'webhooks']>;

/** The OpenAPI operation id of an event kind's webhook (`approval.requested` → `onApprovalRequested`). */
export function webhookOperationId(kind: E.WebhookEventType): string {
  return `on${kind.split(/[._]/).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`;
}

/** The OpenAPI `webhooks` object: one `POST` to the platform's callback URL per event kind. */
export function webhooksSection(): Webhooks {
  return Object.fromEntries(WEBHOOK_EVENT_TYPES.map((kind) => [kind, {
    post: {
      operationId: webhookOperationId(kind), tags: ['webhooks'], security: [],
      summary: `Event ${kind}`,
      description: `${String(WEBHOOK_EVENT_SCHEMAS[kind].description)} Sent as a signed POST to the platform's callback URL (docs/webhooks.md); `
        + 'the body is sent again byte for byte on each retry, with a fresh timestamp and signature. Accept kinds '
          + 'you do not know with a 2xx.',
      parameters: WEBHOOK_HEADER_PARAMETERS,
      requestBody: { required: true, content: { 'application/json': { schema: {
        $ref: `#/components/schemas/${String(WEBHOOK_EVENT_SCHEMAS[kind].$id)}` } } } },
      responses: {
        '2XX': { description: 'Delivered: any 2xx within 15 seconds.' },
        '410': { description: 'Gone: the platform\'s callback is disabled until it is set again.' },
        '4XX': {
          description: 'Any other status, a redirect or no answer is a failure: the delivery is retried on the '
            + 'schedule of docs/webhooks.md.' },
      },
    },
  }]));
}

/** `T` when `A` and `B` are the same type, else `never`. */
type Same<A, B> = (<X>() => X extends A ? 1 : 2) extends (<X>() => X extends B ? 1 : 2) ? true : never;
type S<K extends E.WebhookEventType> = Static<(typeof WEBHOOK_EVENT_SCHEMAS)[K]>;
// Each schema's type is exactly its interface in src/webhook-events.ts (a compile error otherwise).
const sameTypes: [
  Same<S<'connection.created'>, E.ConnectionCreatedEvent>, Same<S<'connection.key_rotated'>,
    E.ConnectionKeyRotatedEvent>,
  Same<S<'connection.removed'>, E.ConnectionRemovedEvent>, Same<S<'delegation.approved'>, E.DelegationApprovedEvent>,
  Same<S<'delegation.denied'>, E.DelegationDeniedEvent>, Same<S<'delegation.revoked'>, E.DelegationRevokedEvent>,
  Same<S<'approval.requested'>, E.ApprovalRequestedEvent>, Same<S<'approval.granted'>, E.ApprovalGrantedEvent>,
  Same<S<'approval.denied'>, E.ApprovalDeniedEvent>, Same<S<'approval.expired'>, E.ApprovalExpiredEvent>,
] = [true, true, true, true, true, true, true, true, true, true];
void sameTypes;
