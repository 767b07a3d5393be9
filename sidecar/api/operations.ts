/**
 * The operation table: for every route the sidecar registers, its stable
 * `operationId` (part of the API: generated clients name their methods after
 * it), summary, description, success schema and the error codes it can answer
 * beyond the ones every operation of its kind can answer
 * ({@link commonErrors}).
 *
 * `server.ts` attaches each entry to its route when the route is registered
 * (so Fastify serializes the success body with the documented schema), and
 * `openapi.ts` publishes it. A route without an entry fails startup in tests
 * (`test/sidecar/ops/openapi.test.ts` checks both directions).
 */
import { Type } from '@sinclair/typebox';
import type { TSchema } from '@sinclair/typebox';
import type { ErrorCode } from '../../src/errors.js';
import { AUDIT_LIMITS } from '../routes/audit.js';
import { APPROVAL_LIMITS } from '../routes/approvals.js';
import { DELIVERY_LIMITS } from '../routes/webhooks.js';
import * as S from './schemas.js';

/** One documented operation. */
export interface OperationDoc {
  /** Stable camelCase identifier. */
  readonly operationId: string;
  /** One line. */
  readonly summary: string;
  /** What it does, and where the spec leaves a gap, what the sidecar fills in. */
  readonly description: string;
  /** The 200 body. */
  readonly response: TSchema;
  /** Codes this operation answers besides {@link commonErrors}. */
  readonly errors: readonly ErrorCode[];
  /** Other answers by status that are not the error shape (readiness's 503). */
  readonly responses?: Readonly<Record<string, TSchema>>;
  /**
   * The request body, for the document only, of a route that checks its body in the handler
   * (it has no body schema for Fastify to validate with). A route with a body schema never has one.
   */
  readonly body?: TSchema;
  /**
   * Members of the route's body schema documented more precisely than the route validates them,
   * because the handler checks them (the approve body's `constraints`, by `validateConstraints`).
   */
  readonly bodyMembers?: Readonly<Record<string, TSchema>>;
  /** Query parameters documented with the type the handler parses them as (`limit`: an integer). */
  readonly query?: Readonly<Record<string, TSchema>>;
}

const op = (operationId: string, summary: string, description: string, response: TSchema, errors: readonly ErrorCode[] = []): OperationDoc =>
  ({ operationId, summary, description, response, errors });

const ONBOARDED: readonly ErrorCode[] = ['onboarding_incomplete'];

/** `limit` of a listing as the handler parses it (`parsePage` in http/resources.ts). */
const pageLimit = (limits: { default: number; max: number }): Readonly<Record<string, TSchema>> => ({
  limit: Type.Integer({ minimum: 1, maximum: limits.max, default: limits.default, description: `Page size, 1–${limits.max}.` }),
});

/** Every operation, by `METHOD /path` as Fastify registers it. */
export const OPERATIONS: Readonly<Record<string, OperationDoc>> = {
  'GET /healthz': op('getLiveness', 'Liveness', 'Answers 200 while the process serves requests.', S.Liveness),
  'GET /readyz': { ...op('getReadiness', 'Readiness', 'Answers 200 when the store answers and every migration is applied; 503 `{status:"not_ready",reason}` otherwise (store_unavailable, migrations_pending, shutting_down).', S.Readiness), responses: { 503: S.NotReady } },

  'POST /v1/auth/email/send-code': op('sendLoginCode', 'Send a sign-in code by e-mail (spec 4.1)',
    'Sends a 6-digit code, valid 10 minutes. An earlier unused code for the address stops working. Rate limited per client IP and per address.',
    S.SendCodeResult, ['rate_limited', 'service_unavailable']),
  'POST /v1/auth/email/verify-code': op('verifyLoginCode', 'Exchange the code for a session (spec 4.2)',
    'Sets the `service_session` and `service_csrf` cookies; no token appears in the body. The first sign-in creates the account.',
    S.LoginResult, ['invalid_code', 'code_expired', 'code_used', 'code_locked', 'rate_limited']),
  'POST /v1/auth/refresh': op('refreshSession', 'Renew the session (spec 4.3)',
    'Rotates both cookies and gives 15 more minutes (at most 12 hours after sign-in). Re-read `service_csrf` afterwards.', S.RefreshResult),
  'POST /v1/auth/logout': op('logout', 'End the session', 'Ends the session and clears both cookies.', S.LogoutResult),
  'GET /v1/auth/session': op('getSession', 'Read the session and account', 'The signed-in account and when the session expires.', S.Session),
  'POST /v1/auth/onboarding/profile': op('setProfile', 'Onboarding: profile (spec 4.4)', 'Records first and last name; the next step is `account_type`.', S.ProfileResult),
  'POST /v1/auth/onboarding/account-type': op('setAccountType', 'Onboarding: account type (spec 4.5)',
    'Completes onboarding and creates the root identity (hybrid Ed25519 + ML-DSA-65). `individual` gets alpha credits.',
    S.AccountTypeResult, ['invalid_account_type', 'onboarding_incomplete', 'onboarding_complete']),

  'POST /v1/service/platforms/personal': op('registerPersonalPlatform', 'Register a personal platform (spec 4.6)',
    'Creates the platform, its connection and API key. The three secrets appear only in this response.',
    S.PlatformRegistration, ['invalid_scopes', 'invalid_callback_url', 'platform_limit_reached', 'account_type_not_supported', ...ONBOARDED]),
  'GET /v1/service/platforms': op('listPlatforms', 'List platforms', 'The account\'s platforms, without secrets.', S.PlatformList),
  'GET /v1/service/platforms/:platform_id': op('getPlatform', 'Read a platform', 'One platform, without secrets.', S.Platform, ['platform_not_found']),
  'PUT /v1/service/platforms/:platform_id/callback': op('setCallbackUrl', 'Set the webhook callback address',
    'Sets or clears (null) where webhooks go; re-enables a disabled callback.', S.Platform, ['platform_not_found', 'invalid_callback_url']),
  'GET /v1/service/connections': op('listConnections', 'List connections', 'The account\'s connections.', S.ConnectionList),
  'GET /v1/service/connections/:connection_id': op('getConnection', 'Read a connection', 'One connection.', S.Connection, ['connection_not_found']),
  'POST /v1/service/connections/:connection_id/rotate-key': op('rotateApiKey', 'Rotate the API key',
    'Issues a new key (shown once); the old key stops at once or after SIDECAR_API_KEY_GRACE_SECONDS. Event connection.key_rotated.',
    S.KeyRotation, ['connection_not_found']),
  'POST /v1/service/connections/:connection_id/remove': op('removeConnection', 'Remove a connection',
    'Its keys stop working, its certificates are revoked and its pending requests denied. Event connection.removed.',
    S.ConnectionRemoval, ['connection_not_found']),
  'POST /v1/service/connections/:connection_id/agents': op('createAgent', 'Create an agent (spec 4.7)',
    'Creates a custodial agent: the service generates and keeps its hybrid keypair. Flat JSON answer.',
    S.AgentCreated, ['connection_not_found', 'invalid_agent_type']),
  'GET /v1/service/connections/:connection_id/agents': op('listConnectionAgents', 'List the connection\'s agents', 'The agents of the API key\'s own connection.', S.AgentList, ['connection_not_found']),
  'GET /v1/service/agents': op('listAgents', 'List agents', 'The account\'s agents.', S.AgentList),

  'POST /v1/service/delegations/self-request': op('createSelfRequest', 'Request a delegation (spec 4.8)',
    'Asks for the connection\'s full scope ceiling for one of its agents (`agent_id` is needed when it has several).',
    S.DelegationRequest, ['connection_not_found', 'agent_not_found', 'agent_required']),
  'POST /v1/service/delegations/requests/:request_id/approve': {
    ...op('approveDelegationRequest', 'Approve a delegation request (spec 4.9)',
      'Issues a certificate signed by the account\'s root identity, for all or some of the requested scopes, with optional expiry and constraints. Event delegation.approved.',
      S.Approval, ['request_not_found', 'request_not_pending', 'empty_scope', 'invalid_scopes', 'scope_not_requested', 'invalid_expiry', 'invalid_constraints', ...ONBOARDED]),
    bodyMembers: { constraints: Type.Union([Type.Ref('Constraints'), Type.Null()], { description: 'Constraints (docs/constraints.md); null or `{}` for none.' }) },
  },
  'POST /v1/service/delegations/requests/:request_id/deny': {
    ...op('denyDelegationRequest', 'Deny a delegation request',
      'Optional body `{reason}`. Event delegation.denied.', S.Denial, ['request_not_found', 'request_not_pending']),
    body: S.DenyDelegationBody,
  },
  'POST /v1/service/delegations/:cert_id/revoke': op('revokeCertificate', 'Revoke a certificate (spec 4.10)',
    'Later verifies of proofs made earlier answer deny/delegation_revoked; present answers 404 no_active_delegation. Repeating it answers the same. Event delegation.revoked.',
    S.Revocation, ['certificate_not_found']),
  'GET /v1/service/delegations/requests': op('listDelegationRequests', 'List delegation requests', 'The account\'s requests, newest first.', S.DelegationRequestList),
  'GET /v1/service/delegations/requests/:request_id': op('getDelegationRequest', 'Read a delegation request', 'One request.', S.DelegationRequest, ['request_not_found']),
  'GET /v1/service/delegations': op('listCertificates', 'List certificates', 'The account\'s certificates, with the signed certificate JSON.', S.CertificateList),
  'GET /v1/service/delegations/:cert_id': op('getCertificate', 'Read a certificate', 'One certificate, with the signed certificate JSON.', S.Certificate, ['certificate_not_found']),
  'GET /v1/service/identity': op('getIdentity', 'Read the root public key', 'The account\'s root public key, to verify certificates offline.', S.Identity, ONBOARDED),

  'POST /v1/service/challenge': op('createChallenge', 'Get a challenge (spec 4.11)', 'A single-use challenge for one proof, issued to the API key\'s connection.', S.Challenge),
  'POST /v1/service/connections/:connection_id/agents/:agent_id/present': op('presentProof', 'Build a proof bundle (spec 4.12)',
    'Signs the challenge with the agent\'s custodial key. Authorizes nothing: only verify decides.',
    S.Presentation, ['connection_not_found', 'agent_not_found', 'no_active_delegation', 'invalid_challenge', 'service_unavailable']),
  'POST /v1/service/verify': op('verifyProof', 'Verify a proof (spec 4.13)',
    'Answers a decision: allow, deny or indeterminate, with a stable reason. Metered, checked against revocation, recorded in the audit trail. A 400 means the proof is bad or spent.',
    S.VerifyResult, ['invalid_challenge', 'invalid_proof', 'proof_stale', 'invalid_signature', 'invalid_scopes', 'credits_exhausted']),

  'GET /v1/service/approvals': { ...op('listApprovals', 'List step-up approvals',
    'The account\'s approvals, newest first, with cursor pagination (`limit` 1–200, default 25) and `state` (`pending` for those waiting). Due ones are expired first.',
    S.ActionApprovalList), query: pageLimit(APPROVAL_LIMITS) },
  'GET /v1/service/approvals/:approval_id': op('getApproval', 'Read a step-up approval',
    'One approval with its action in human terms (summary, amount, method, path, tool).', S.ActionApproval, ['approval_not_found']),
  'POST /v1/service/approvals/:approval_id/approve': op('grantApproval', 'Approve an action',
    'Grants a pending approval: exactly one later verify of the same operation allows, within SIDECAR_APPROVAL_TTL_SECONDS. Event approval.granted.',
    S.ActionApproval, ['approval_not_found', 'approval_not_pending']),
  'POST /v1/service/approvals/:approval_id/deny': op('denyApproval', 'Deny an action',
    'Optional body `{note}`. Verifies of the operation answer deny approval_denied. Event approval.denied.',
    S.ActionApproval, ['approval_not_found', 'approval_not_pending']),
  'GET /v1/service/approvals/:approval_id/status': op('getApprovalStatus', 'Poll an approval (API key)',
    'For the agent\'s platform: the state of an approval requested on the API key\'s connection, to wait for a decision before retrying with a fresh proof.',
    S.ActionApprovalStatus, ['approval_not_found']),
  'GET /v1/service/delegations/:cert_id/usage': op('getCertificateUsage', 'Read a certificate\'s budget and rate usage',
    'Spent and left of `budget` and `max_calls` in the current calendar window (UTC).', S.CertificateUsage, ['certificate_not_found']),

  'GET /v1/service/audit/personal': { ...op('listAuditEvents', 'Read audit events (spec 4.14)',
    'Newest first, with cursor pagination (`limit` 1–200, default 25) and filters: `event_type`, `agent_id`, `from` and `to` (ISO 8601; from inclusive, to exclusive), `decision`, `reason`, `scope`, `cert_id`.', S.AuditPage), query: pageLimit(AUDIT_LIMITS) },
  'GET /v1/service/audit/personal/export': op('exportAuditEvents', 'Export audit events as NDJSON',
    'Streams the account\'s hash-chained audit trail for `from`–`to` as `application/x-ndjson`: a header with the service keys, the signed checkpoints, the events in chain order, a trailer with the counts (docs/audit.md). The last event is always covered by a signed checkpoint, so the file verifies offline with `agent-authz-sidecar audit verify --export`.',
    S.AuditExport),
  'GET /v1/service/usage/personal': op('getUsage', 'Read credits and usage', 'The balance and the verify counts.', S.Usage),
  'GET /v1/service/webhooks/deliveries': {
    ...op('listWebhookDeliveries', 'List webhook deliveries', 'Newest first, with cursor pagination (`limit` 1–200, default 25) and filters `platform_id` and `state`.', S.DeliveryPage),
    query: pageLimit(DELIVERY_LIMITS),
  },
  'GET /v1/service/webhooks/deliveries/:delivery_id': op('getWebhookDelivery', 'Read a webhook delivery', 'One delivery with every attempt.', S.DeliveryDetail, ['delivery_not_found']),
  'POST /v1/service/webhooks/deliveries/:delivery_id/redeliver': op('redeliverWebhook', 'Redeliver a webhook',
    'Queues the same delivery (same id and body) again.', S.Redelivery, ['delivery_not_found', 'callback_not_configured']),
};

/**
 * The codes every operation with this authentication can answer: a malformed
 * request, a header block or URL over 16 KiB and an unsupported `Expect`
 * (refused before routing, runtime/client-error.ts), the authentication
 * refusals, an unavailable store, an unexpected failure; and when it takes a
 * body (every POST and PUT, including those that accept only none or `{}`), a
 * body of another content type or over the size limit.
 * `test/sidecar/ops/openapi-errors.test.ts` sends each of these refusals.
 */
export function commonErrors(auth: 'none' | 'session' | 'session_csrf' | 'api_key', hasBody: boolean): ErrorCode[] {
  const codes: ErrorCode[] = ['invalid_request', 'headers_too_large', 'expectation_failed', 'internal_error', 'service_unavailable'];
  if (auth === 'session' || auth === 'session_csrf') codes.push('auth_required');
  if (auth === 'session_csrf') codes.push('csrf_required', 'csrf_invalid');
  if (auth === 'api_key') codes.push('invalid_api_key');
  if (hasBody) codes.push('unsupported_media_type', 'body_too_large');
  return codes;
}
