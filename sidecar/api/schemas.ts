/**
 * The success bodies of every sidecar operation, as TypeBox schemas. They are
 * used three ways, so the description cannot drift from the code:
 *
 * - Fastify serializes each 2xx response with its schema (a member the handler
 *   returns but the schema lacks is dropped, a required member it lacks is an
 *   error: tests see both);
 * - the views (`http/resources.ts` and the route files) are typed with
 *   `Static<typeof X>`, so the compiler checks what the handlers build;
 * - `GET /openapi.json` publishes them (`components.schemas`).
 *
 * Times are ISO 8601 UTC strings; nullable members are `T | null`.
 */
import { AUTHZEN_SCHEMAS } from './authzen-schemas.js';
import { Type } from '@sinclair/typebox';
import type { TSchema } from '@sinclair/typebox';
import { DECISION_REASONS } from '../../src/decisions.js';
import type { DecisionReason } from '../../src/decisions.js';
import { ConstraintsSchema } from './constraints.js';
import { WEBHOOK_SCHEMAS } from './webhooks.js';
import { IDEMPOTENCY_LIMITS } from '../../src/protocol.js';
import { ORGANISATION_SCHEMAS } from './organisation-schemas.js';

const Str = Type.String();
const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);
const NullableStr = Type.Union([Type.String(), Type.Null()]);
const Scopes = Type.Array(Type.String());
/** A JSON object whose members are documented elsewhere (certificate JSON, audit details, public keys). */
const FreeObject = (description: string) => Type.Object({}, { additionalProperties: true, description });

/** Names a schema for `components.schemas` (the `$id` becomes its component name). */
function named<T extends TSchema>(id: string, schema: T): T {
  return { ...schema, $id: id } as T;
}

/** `{status}` answers of the auth plane. */
export const SendCodeResult = named('SendCodeResult', Type.Object({
  resent: Type.Boolean({ description: 'True when an unused, unexpired code existed; it stops working.' }),
  status: Type.Literal('code_sent'),
}));
export const LoginResult = named('LoginResult', Type.Object({
  status: Type.Literal('authenticated'),
  onboarding_step: Type.String({ description: '`profile`, `account_type` or `complete`.' }),
  session_expires_at: Time,
}));
export const RefreshResult = named(
  'RefreshResult', Type.Object({ status: Type.Literal('refreshed'), session_expires_at: Time }));
export const LogoutResult = named('LogoutResult', Type.Object({ status: Type.Literal('logged_out') }));
export const Session = named('Session', Type.Object({
  account_id: Str, email: Str, first_name: NullableStr, last_name: NullableStr, account_type: NullableStr,
  onboarding_step: Str, session_expires_at: Time, workspace: Type.Ref('Workspace'),
}));
export const ProfileResult = named(
  'ProfileResult', Type.Object({ onboarding_step: Str, first_name: Str, last_name: Str }));
export const AccountTypeResult = named(
  'AccountTypeResult', Type.Object({ onboarding_step: Type.Literal('complete'), account_type: Str,
    organization_id: Type.Optional(Type.String({ description: 'The organisation created with `organization_name`.' })),
  }));

/** Spec 2.1: the registration answer, with the three secrets shown once. */
export const PlatformRegistration = named('PlatformRegistration', Type.Object({
  api_key: Type.String({ description: 'Secret, shown once.' }), api_key_prefix: Str, connection_id: Str,
    description: Str,
  expires_at: Type.String({ format: 'date-time', description: 'When this API key expires.' }), name: Str,
    platform_id: Str,
  publish_state: Type.Literal('draft'), signing_secret: Type.String({ description: 'Secret, shown once.' }),
    surface_type: Str,
  webhook_signing_secret: Type.String({ description: 'Secret, shown once; signs webhook deliveries.' }),
}));
export const Platform = named('Platform', Type.Object({
  platform_id: Str, connection_id: NullableStr, name: Str, description: Str, surface_type: Str, publish_state: Str,
  default_allowed_scopes: Scopes, callback_url: NullableStr, callback_disabled_at: NullableTime,
    expires_at: NullableTime, created_at: NullableTime,
}));
export const PlatformList = named('PlatformList', Type.Object({ platforms: Type.Array(Type.Ref('Platform')) }));
export const Connection = named('Connection', Type.Object({
  connection_id: Str, platform_id: Str, allowed_scopes: Scopes, status: Type.Union(
    [Type.Literal('active'), Type.Literal('removed')]),
  removed_at: NullableTime, created_at: NullableTime,
}));
export const ConnectionList = named('ConnectionList', Type.Object({ connections: Type.Array(Type.Ref('Connection')) }));
export const KeyRotation = named('KeyRotation', Type.Object({
  connection_id: Str, api_key: Type.String({ description: 'Secret, shown once.' }), api_key_prefix: Str,
    expires_at: NullableTime,
  previous_prefix: Str, previous_key_valid_until: NullableTime,
}));
export const ConnectionRemoval = named('ConnectionRemoval', Type.Object({
  connection_id: Str, status: Type.Literal('removed'), removed_at: NullableTime, revoked_cert_ids: Scopes,
}));
const PublicKey = FreeObject('Hybrid public key: `{alg:"hybrid-ed25519-mldsa65", ed25519, ml_dsa_65}` (base64url).');
/** Spec 2.2: the flat creation answer. */
export const AgentCreated = named('AgentCreated', Type.Object({
  agent_id: Str, name: Str, agent_type: Str, custody_mode: Str, public_key_json: PublicKey,
}));
export const Agent = named('Agent', Type.Object({
  agent_id: Str, name: Str, agent_type: Str, custody_mode: Str, public_key_json: PublicKey, connection_id: Str,
    created_at: NullableTime,
}));
export const AgentList = named('AgentList', Type.Object({ agents: Type.Array(Type.Ref('Agent')) }));

/** The certificate's constraints (`components.schemas.Constraints`, api/constraints.ts), or null. */
const Constraints = Type.Union([Type.Ref('Constraints'), Type.Null()]);
export const DelegationRequest = named('DelegationRequest', Type.Object({
  request_id: Str, connection_id: Str, agent_id: Str, requested_scope: Scopes,
  proposed_constraints: Type.Union([Type.Ref('Constraints'), Type.Null()], { description: 'The constraints the '
    + 'platform proposed (docs/organisations.md); an approval keeps them or makes them stricter. null: none.' }),
  state: Type.Union([Type.Literal('pending'), Type.Literal('approved'), Type.Literal('denied')]),
  cert_id: NullableStr, decided_at: NullableTime, created_at: NullableTime,
}));
export const DelegationRequestList = named(
  'DelegationRequestList', Type.Object({ requests: Type.Array(Type.Ref('DelegationRequest')) }));
/** Spec 4.9, plus the request, agent, connection, constraints and certificate hash. */
export const Approval = named('Approval', Type.Object({
  approved_scope: Scopes, cert_id: Str, expires_at: NullableTime, issued_at: Time, status: Type.Literal('approved'),
  request_id: Str, agent_id: Str, connection_id: Str, constraints: Constraints, cert_sha256: Str,
  max_delegation_depth: Type.Integer({ description: 'The right to delegate further (docs/certificates.md); 0: none.' }),
}));
/** A sub-delegated certificate, as issued (docs/certificates.md, "Sub-delegation"). */
export const SubDelegation = named('SubDelegation', Type.Object({
  cert_id: Str, request_id: Str, parent_cert_id: Str, depth: Type.Integer(), agent_id: Str, delegated_by: Str,
  connection_id: Str, approved_scope: Scopes, constraints: Constraints, issued_at: Time, expires_at: NullableTime,
  max_delegation_depth: Type.Integer(), status: Type.Literal('approved'), cert_sha256: Str,
  cert_json: FreeObject('The signed certificate (docs/certificates.md).'),
}));
/** The optional body of a delegation denial (checked by the handler: `optionalReason` in routes/delegations.ts). */
export const DenyDelegationBody = Type.Union([
  Type.Object({ reason: Type.Optional(Type.String({ maxLength: 500,
    description: 'Why; the text rule of docs/api.md, at most 500 characters. Sent in the delegation.denied webhook.' })) }, { additionalProperties: false }),
  Type.Null(),
]);
export const Denial = named('Denial', Type.Object({ request_id: Str, state: Type.Literal('denied'),
  decided_at: NullableTime }));
export const Revocation = named('Revocation', Type.Object({
  cert_id: Str, status: Type.Literal('revoked'), already_revoked: Type.Boolean(), revoked_at: NullableTime,
  descendants_revoked: Type.Array(Str, { description: 'The sub-delegated certificates this call revoked with it.' }),
}));
export const Certificate = named('Certificate', Type.Object({
  cert_id: Str, request_id: Str, connection_id: Str, agent_id: Str, approved_scope: Scopes, constraints: Constraints,
  status: Type.Union([Type.Literal('approved'), Type.Literal('revoked')]), issued_at: NullableTime,
    expires_at: NullableTime,
  revoked_at: NullableTime, revoke_reason: NullableStr, cert_sha256: Str, cert_json: FreeObject(
    'The signed certificate (docs/certificates.md).'),
  parent_cert_id: Type.Union([Str, Type.Null()], { description: 'A sub-delegated certificate\'s parent.' }),
  depth: Type.Integer({ description: 'Depth in its chain: 0 when the account holder signed it.' }),
  max_delegation_depth: Type.Integer({ description: 'The right to delegate further; 0: none.' }),
}));
export const CertificateList = named(
  'CertificateList', Type.Object({ certificates: Type.Array(Type.Ref('Certificate')) }));
export const Identity = named('Identity', Type.Object({ account_id: Str, root_public_key: PublicKey }));

export const Challenge = named('Challenge', Type.Object({ challenge: Str, expires_at: NullableTime }));
/** Spec 2.6: the bundle is opaque to clients; `proof_header` is its `X-Service-Proof` form. */
export const Presentation = named('Presentation', Type.Object({
  proof_bundle: FreeObject('The proof bundle (opaque; docs/proofs.md).'),
  proof_header: Type.String({ description: 'base64 of the bundle JSON, for X-Service-Proof.' }),
  cert_id: Str, challenge_expires_at: NullableTime,
}));
/** The shape of an upstream answer in the idempotency ledger (docs/gateway.md#idempotency); also a request body's. */
export const recordedResponseShape = () => Type.Object({
  status: Type.Integer({ minimum: 100, maximum: 599 }),
  headers: Type.Array(
    Type.Array(Type.String({ maxLength: IDEMPOTENCY_LIMITS.headerValueLength }), { minItems: 2, maxItems: 2 }),
    { maxItems: IDEMPOTENCY_LIMITS.headers, description: '[name, value] pairs, lowercase names.' }),
  body: Type.String({ maxLength: Math.ceil(IDEMPOTENCY_LIMITS.bodyBytes / 3) * 4, pattern: '^[A-Za-z0-9+/]*={0,2}$',
    description: 'base64; empty when body_omitted.' }),
  body_omitted: Type.Boolean({
    description: 'The body was larger than the ledger keeps (docs/gateway.md#idempotency).' }),
}, { additionalProperties: false });
/** An upstream answer in the idempotency ledger. */
export const RecordedResponse = named('RecordedResponse', recordedResponseShape());
/** The answer of recording an upstream answer. */
export const IdempotencyRecorded = named('IdempotencyRecorded', Type.Object({
  claim_id: Str,
  expires_at: Type.String({ description: 'When the record expires (ISO 8601): repeats replay it until then.' }),
}));
/** The answer of releasing a claim. */
export const IdempotencyReleased = named('IdempotencyReleased',
  Type.Object({ claim_id: Str, released: Type.Literal(true) }));
/** Spec 2.7: the verification result. */
export const VerifyResult = named('VerifyResult', Type.Object({
  decision: Type.Union([Type.Literal('allow'), Type.Literal('deny'), Type.Literal('indeterminate')]),
  // An enum of the reason table itself (src/decisions.ts): a new reason is documented when it is added.
  decision_reason: Type.Unsafe<DecisionReason>({
    type: 'string', enum: Object.keys(DECISION_REASONS),
      description: 'Stable reason (docs/errors.md, decision reasons).',
  }),
  agent_id: Type.Optional(Str), cert_id: Type.Optional(Str), scope: Type.Optional(Str),
  constraint: Type.Optional(Type.String({ description: 'With constraint_denied: the constraint that did not hold.' })),
  audit_event_id: Type.Optional(Str),
  link: Type.Optional(Type.Object({ depth: Type.Integer(), cert_id: Str }, { description: 'A deny under a '
    + 'sub-delegated certificate: the link of the chain it failed at (docs/certificates.md, "Verifying a chain").' })),
  decision_id: Type.Optional(Type.String({ description: 'The id of this decision: the audit event\'s id when one '
    + 'was recorded (docs/authzen.md).' })),
  approval_id: Type.Optional(Type.String({
    description: 'With approval_required, approval_denied, approval_expired, approval_used, and an allow that used '
      + 'an approval: the approval.' })),
  idempotency: Type.Optional(Type.Union([
    Type.Object({ status: Type.Literal('claimed'), claim_id: Str }),
    Type.Object({ status: Type.Literal('replay'), response: Type.Ref('RecordedResponse') }),
  ], { description: 'With an allow of a request with an idempotency block: the claim to record the answer under, '
    + 'or the recorded answer to replay (docs/gateway.md#idempotency).' })),
}));

const ApprovalStates = Type.String({ description: '`pending`, `granted`, `denied`, `used` or `expired`.' });
const StringMap = (description: string) => Type.Record(Type.String(), Type.String(), { description });
/** A step-up approval as the account holder sees it (docs/api.md, Approvals). */
export const ActionApproval = named('ActionApproval', Type.Object({
  approval_id: Str, state: ApprovalStates,
  summary: Type.String({ description: 'One line: scope, amount and currency, then the method and path or the tool.' }),
  scope: Str,
  action: Type.Object({
    method: NullableStr, path: NullableStr, tool: NullableStr, amount: NullableStr, currency: NullableStr,
      tenant: NullableStr,
    bound: Type.Boolean({ description: 'The proof was bound to this operation.' }),
  }),
  agent_id: Str, connection_id: Str, cert_id: Str,
  context: StringMap('The verify context of the action.'),
  operation: Type.Union([StringMap('The bound operation.'), Type.Null()]),
  note: NullableStr, created_at: NullableTime,
  expires_at: Type.Union([Time, Type.Null()], {
    description: 'Pending: when the request expires. Granted: until when it can be used.' }),
  decided_at: NullableTime, settled_at: NullableTime,
}));
export const ActionApprovalList = named('ActionApprovalList', Type.Object({
  approvals: Type.Array(Type.Ref('ActionApproval')), next_cursor: Type.Union(
    [Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page.' }),
}));
/** What the agent's platform reads while it waits (API key). */
export const ActionApprovalStatus = named('ActionApprovalStatus', Type.Object({
  approval_id: Str, state: ApprovalStates, expires_at: NullableTime, decided_at: NullableTime,
  note: Type.Union([Type.String(), Type.Null()], { description: 'The account holder\'s note with a denial.' }),
}));
/** Spent and left of a certificate's limits in the current window (docs/constraints.md). */
export const CertificateUsage = named('CertificateUsage', Type.Object({
  cert_id: Str,
  budget: Type.Union([Type.Object({
    amount: Str, currency: Str, period: Str, window_start: Time, window_end: NullableTime,
    spent: Type.String({ description: 'Decimal, in the budget\'s currency.' }), left: Str,
    spent_micros: Type.Integer(), left_micros: Type.Integer(),
  }), Type.Null()]),
  max_calls: Type.Union([Type.Object({
    count: Type.Integer(), period: Str, window_start: Time, window_end: NullableTime, used: Type.Integer(),
      left: Type.Integer(),
  }), Type.Null()]),
}));

export const AuditEvent = named('AuditEvent', Type.Object({
  event_id: Str, event_type: Str, occurred_at: NullableTime, connection_id: NullableStr, agent_id: NullableStr,
  cert_id: NullableStr, required_scope: NullableStr,
  details: FreeObject(
    'For proof.verified and proof.rejected: decision, decision_reason (and constraint, approval_id, budget_debit, '
      + 'calls_debit, operation_member); for approval.*: approval_id, action and the event\'s members.'),
}));
export const AuditPage = named('AuditPage', Type.Object({
  events: Type.Array(Type.Ref('AuditEvent')), next_cursor: Type.Union(
    [Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page.' }),
}));
export const AuditExport = named('AuditExport', Type.String({
  contentMediaType: 'application/x-ndjson',
  description: 'NDJSON lines: `audit.export` (header), `audit.checkpoint`, `audit.event`, `audit.export.end` '
    + '(trailer). Fields: docs/audit.md.',
}));
export const Usage = named('Usage', Type.Object({
  account_id: Str, balance_micros: Type.Integer(), balance_dollars: Str, price_per_verify_micros: Type.Integer(),
  verify_calls: Type.Integer(), allows: Type.Integer(), denies: Type.Integer(), remaining_verify_calls: Type.Integer(),
}));

const deliveryMembers = {
  delivery_id: Str, platform_id: Str, connection_id: NullableStr, event: Str,
  state: Type.String({ description: '`pending`, `delivered`, `dead` or `disabled`.' }), attempts: Type.Integer(),
  next_attempt_at: NullableTime, last_status: Type.Union([Type.Integer(), Type.Null()]), last_error: NullableStr,
  delivered_at: NullableTime, created_at: NullableTime,
};
export const Delivery = named('Delivery', Type.Object(deliveryMembers));
export const DeliveryPage = named(
  'DeliveryPage', Type.Object({ deliveries: Type.Array(Type.Ref('Delivery')), next_cursor: Type.Union([Type.String(),
    Type.Null()]) }));
export const DeliveryDetail = named('DeliveryDetail', Type.Object({
  ...deliveryMembers,
  attempt_history: Type.Array(Type.Object({
    attempt: Type.Integer(), attempted_at: NullableTime, status: Type.Union([Type.Integer(), Type.Null()]),
      error: NullableStr, duration_ms: Type.Union([Type.Integer(), Type.Null()]),
  })),
}));
export const Redelivery = named(
  'Redelivery', Type.Object({ delivery_id: Str, state: Type.Literal('pending'),
    redelivery_requested_at: NullableTime }));

export const Liveness = named('Liveness', Type.Object({ status: Type.Literal('ok') }));
export const Readiness = named(
  'Readiness', Type.Object({ status: Type.Literal('ready'), schema_version: Type.Integer() }));
export const NotReady = named('NotReady', Type.Object({
  status: Type.Literal('not_ready'),
  reason: Type.String({ description: '`store_unavailable`, `migrations_pending` or `shutting_down`.' }),
  schema_version: Type.Optional(Type.Integer()), expected_version: Type.Optional(Type.Integer()),
}, { description: 'Not ready: do not send traffic.' }));

/**
 * Every named schema, in the order `components.schemas` lists them: the success bodies, the
 * constraints they and the approve body refer to, and the webhook bodies (api/webhooks.ts).
 * server.ts registers each with Fastify.
 */
export const RESPONSE_SCHEMAS: readonly TSchema[] = [
  ConstraintsSchema,
  SendCodeResult, LoginResult, RefreshResult, LogoutResult, Session, ProfileResult, AccountTypeResult,
  PlatformRegistration, Platform, PlatformList, Connection, ConnectionList, KeyRotation, ConnectionRemoval,
  AgentCreated, Agent, AgentList, DelegationRequest, DelegationRequestList, Approval, SubDelegation, Denial,
  Revocation,
  Certificate, CertificateList, Identity, Challenge, Presentation, VerifyResult, ActionApproval, ActionApprovalList,
  ActionApprovalStatus, CertificateUsage, AuditEvent, AuditPage, AuditExport, Usage,
  Delivery, DeliveryPage, DeliveryDetail, Redelivery, Liveness, Readiness, NotReady,
  RecordedResponse, IdempotencyRecorded, IdempotencyReleased,
  ...AUTHZEN_SCHEMAS, ...WEBHOOK_SCHEMAS, ...ORGANISATION_SCHEMAS,
];
