/**
 * The one table of error codes used by the sidecar and the gateway plugin.
 *
 * Every refusal either part sends has the shape `{error:{code,message,status}}`
 * and its code comes from {@link ERRORS}. `docs/errors.md` lists the same table;
 * `test/src/errors.test.ts` checks the two against each other.
 *
 * Convention (from fastify/jose): a rejected untrusted input throws a
 * {@link ServiceError}; programmer or configuration misuse throws a `TypeError`.
 */

/**
 * One entry of the error table.
 *
 * ```ts
 * const spec: ErrorSpec = ERRORS.proof_required;   // { status: 401, message: '...' }
 * ```
 */
export interface ErrorSpec {
  /** HTTP status the code is sent with. */
  readonly status: number;
  /** Default human-readable message (safe to show to any caller). */
  readonly message: string;
}

/**
 * The codes only the gateway plugin (or its forward-auth endpoint) sends, to the agent: part
 * of {@link ERRORS}. The agent-side client reads a response with one of them as the gateway's
 * refusal (client/errors.ts), so a code added here is recognized there with no second list.
 *
 * ```ts
 * GATEWAY_ERRORS.proof_required.status;   // 401
 * ```
 */
export const GATEWAY_ERRORS = {
  proof_required: { status: 401, message: 'An X-Service-Proof header is required.' },
  duplicate_proof_header: { status: 403, message: 'Send exactly one X-Service-Proof header.' },
  route_not_mapped: { status: 403, message: 'This route is not mapped to a scope.' },
  ambiguous_path: { status: 400, message: 'The request path is ambiguous.' },
  not_delegated: { status: 403, message: 'The scope was never delegated to this agent.' },
  delegation_revoked: { status: 403, message: 'The delegation certificate was revoked.' },
  delegation_expired: { status: 403, message: 'The delegation certificate has expired.' },
  constraint_denied: { status: 403, message: 'A constraint of the delegation denies this request.' },
  proof_rejected: { status: 403, message: 'The proof does not demonstrate authority for this request.' },
  decision_indeterminate: { status: 503, message: 'No authorization decision could be made.' },
  verify_unavailable: { status: 503, message: 'The authorization service is unavailable.' },
  upstream_unavailable: { status: 502, message: 'The upstream service is unavailable.' },
  tool_not_mapped: { status: 403, message: 'This MCP tool is not mapped to a scope.' },
  batch_not_supported: { status: 400, message: 'JSON-RPC batches are not accepted; send one message per request.' },
  body_not_forwarded: { status: 403, message: 'This route needs the request body, which the proxy did not send to the decision endpoint.' },
  override_header_refused: { status: 400, message: 'Method and URL override headers (X-HTTP-Method-Override, X-Original-URL, ...) are not accepted.' },
  mcp_session_not_found: {
    status: 404,
    message: 'No such MCP session (it ended, expired, or was not opened through this gateway); initialize a new one.',
  },
  mcp_session_forbidden: { status: 403, message: 'This MCP session belongs to another agent.' },
  mcp_session_header_invalid: { status: 400, message: 'Send at most one Mcp-Session-Id header, spelled with dashes.' },
  a2a_method_not_mapped: { status: 403, message: 'This A2A method is not mapped to a scope on this route.' },
  a2a_task_not_found: {
    status: 404,
    message: 'No such task of this agent (not created by this agent through this gateway, or no longer remembered).',
  },
  a2a_push_url_refused: {
    status: 400,
    message: 'The push-notification URL is refused (https to a public address only, as for webhooks).',
  },
  idempotency_key_required: {
    status: 400, message: 'This route requires exactly one Idempotency-Key header of 1-255 printable ASCII characters.',
  },
  // The idempotency ledger's refusals: verify answers them to the gateway, which passes them on.
  idempotency_in_flight: {
    status: 409, message: 'A request with this Idempotency-Key is still in progress; retry later.',
  },
  idempotency_key_reused: { status: 422, message: 'This Idempotency-Key was used for a different request.' },
} as const satisfies Record<string, ErrorSpec>;

/**
 * The error-code table: `code → {status, message}`. Every refusal of the
 * sidecar and the gateway carries one of these codes (docs/errors.md).
 *
 * ```ts
 * import { ERRORS } from 'agent-authz';
 *
 * ERRORS.proof_required.status;   // 401
 * ERRORS.route_not_mapped.message;
 * ```
 */
export const ERRORS = {
  // generic request handling
  invalid_request: { status: 400, message: 'The request is malformed.' },
  unsupported_media_type: { status: 415, message: 'The request body must be application/json.' },
  body_too_large: { status: 413, message: 'The request body is too large.' },
  headers_too_large: { status: 431, message: 'The request headers or URL are too large.' },
  expectation_failed: { status: 417, message: 'The Expect header is not supported; send the request without it or with 100-continue.' },
  not_found: { status: 404, message: 'No such resource.' },
  route_not_found: { status: 404, message: 'No such route.' },
  method_not_allowed: { status: 405, message: 'The method is not allowed on this route.' },
  rate_limited: { status: 429, message: 'Too many requests; retry later.' },
  internal_error: { status: 500, message: 'The service could not complete the request.' },
  service_unavailable: { status: 503, message: 'The service is temporarily unavailable.' },

  // account plane: login codes, sessions, CSRF, onboarding
  invalid_code: { status: 400, message: 'The code is not valid for this e-mail address.' },
  code_expired: { status: 400, message: 'The code has expired; request a new one.' },
  code_used: { status: 400, message: 'The code was already used; request a new one.' },
  code_locked: { status: 400, message: 'Too many wrong tries; request a new code.' },
  auth_required: { status: 401, message: 'A valid session is required.' },
  csrf_required: { status: 403, message: 'The X-Service-CSRF header and service_csrf cookie are required.' },
  csrf_invalid: { status: 403, message: 'The CSRF token does not match this session.' },
  onboarding_incomplete: { status: 409, message: 'Finish onboarding first.' },
  onboarding_complete: { status: 409, message: 'Onboarding is already complete.' },
  invalid_account_type: { status: 400, message: 'account_type must be individual or organization.' },
  account_type_not_supported: { status: 403, message: 'This operation is not available for this account type.' },

  // organisations: roles, members, invitations, workspaces (docs/organisations.md)
  role_forbidden: { status: 403, message: 'Your role in this organisation does not allow this operation.' },
  organization_not_found: { status: 404, message: 'No such organisation, or you are not a member of it.' },
  member_not_found: { status: 404, message: 'No such member of this organisation.' },
  last_owner: { status: 409, message: 'An organisation must keep at least one owner.' },
  already_member: { status: 409, message: 'This person is already a member of the organisation.' },
  invitation_not_found: { status: 404, message: 'No such invitation for your address.' },
  invitation_pending: { status: 409, message: 'This address already has a pending invitation to the organisation.' },
  invitation_closed: { status: 409, message: 'The invitation was accepted, revoked or has expired.' },
  domain_not_claimed: { status: 404, message: 'The organisation has not claimed a publisher domain.' },
  domain_not_verified: { status: 409, message: 'The TXT record that proves the domain was not found.' },
  domain_taken: { status: 409, message: 'Another organisation has verified this domain.' },
  invalid_domain: { status: 400, message: 'Not a domain an organisation can claim.' },
  publish_state_invalid: { status: 409, message: 'The platform cannot make this move from its publish state.' },
  publisher_domain_unverified: { status: 409, message: 'Publishing needs a verified publisher domain.' },
  callback_url_required: { status: 409, message: 'Publishing needs a callback URL.' },
  description_required: { status: 409, message: 'Publishing needs a description.' },
  scope_not_offered: { status: 400, message: 'A scope is not offered (by the platform or the connection).' },
  already_connected: { status: 409, message: 'This workspace already has an active connection to the platform.' },

  // platforms, connections, agents
  invalid_scopes: { status: 400, message: 'One or more scopes are not in the vocabulary.' },
  platform_limit_reached: { status: 409, message: 'A personal account can register one draft platform.' },
  invalid_callback_url: { status: 400, message: 'The callback URL is not allowed.' },
  invalid_api_key: { status: 401, message: 'The API key is missing or not valid.' },
  platform_not_found: { status: 404, message: 'No such platform.' },
  connection_not_found: { status: 404, message: 'No such connection.' },
  agent_not_found: { status: 404, message: 'No such agent.' },
  invalid_agent_type: { status: 400, message: 'agent_type must be api_agent.' },

  // delegations
  agent_required: { status: 409, message: 'The connection does not have exactly one agent; pass agent_id.' },
  request_not_found: { status: 404, message: 'No such delegation request.' },
  request_not_pending: { status: 409, message: 'The delegation request is no longer pending.' },
  scope_not_requested: { status: 400, message: 'approved_scope may only contain scopes that were requested.' },
  empty_scope: { status: 400, message: 'approved_scope must not be empty.' },
  invalid_constraints: { status: 400, message: 'The constraints are not valid.' },
  invalid_expiry: { status: 400, message: 'expires_at must be a future ISO 8601 timestamp.' },
  certificate_not_found: { status: 404, message: 'No such delegation certificate.' },
  delegation_not_permitted: { status: 403, message: 'The certificate does not grant the right to delegate.' },
  delegation_depth_exceeded: { status: 403,
    message: 'The sub-delegation would be deeper than its chain or the service allows.' },
  delegation_widens: { status: 400,
    message: 'A sub-delegation may only narrow its parent: scopes, constraints and expiry.' },
  constraints_loosened: { status: 400,
    message: 'An approval may keep the proposed constraints or make them stricter, never looser.' },
  delegation_cross_connection: { status: 403,
    message: 'An agent can sub-delegate only to another agent of its own connection.' },
  invalid_delegation_depth: { status: 400,
    message: 'max_delegation_depth must be an integer from 0 to the allowed maximum.' },

  // proofs and verify
  no_active_delegation: { status: 404, message: 'The agent has no active delegation certificate.' },
  invalid_challenge: { status: 400, message: 'The challenge is unknown, spent, expired or for another audience.' },
  invalid_proof: { status: 400, message: 'The proof bundle is malformed.' },
  proof_stale: { status: 400, message: 'The proof is outside the freshness window.' },
  invalid_signature: { status: 400, message: 'A signature in the proof does not verify.' },
  credits_exhausted: { status: 402, message: 'The account has no credits left for this call.' },

  // AuthZEN (docs/authzen.md)
  decision_not_found: { status: 404, message: 'No such decision.' },
  batch_too_large: { status: 400, message: 'An evaluations request holds at most 100 evaluations.' },
  evaluation_indeterminate: { status: 503,
    message: 'No authorization decision could be made (nothing was decided); retry later.' },
  // idempotency ledger (idempotency_in_flight and idempotency_key_reused are in GATEWAY_ERRORS)
  idempotency_claim_not_found: { status: 404, message: 'No such idempotency claim in progress.' },

  // approvals
  approval_not_found: { status: 404, message: 'No such approval.' },
  approval_not_pending: { status: 409, message: 'The approval is no longer pending.' },

  // webhooks
  delivery_not_found: { status: 404, message: 'No such webhook delivery.' },
  callback_not_configured: { status: 409, message: 'The platform has no callback URL.' },

  // gateway plugin (sent by the gateway to the agent)
  ...GATEWAY_ERRORS,
} as const satisfies Record<string, ErrorSpec>;

/**
 * Every error code the service can send.
 *
 * ```ts
 * const retryable: ErrorCode[] = ['rate_limited', 'verify_unavailable'];
 * ```
 */
export type ErrorCode = keyof typeof ERRORS;

/**
 * A code of {@link GATEWAY_ERRORS}: sent only by the gateway (or its forward-auth endpoint).
 *
 * ```ts
 * const code: GatewayErrorCode = 'proof_required';
 * ```
 */
export type GatewayErrorCode = keyof typeof GATEWAY_ERRORS;

/**
 * The codes of {@link GATEWAY_ERRORS}, in table order.
 *
 * ```ts
 * const refusal = new Set<string>(GATEWAY_ERROR_CODES).has(body.error.code);
 * ```
 */
export const GATEWAY_ERROR_CODES: readonly GatewayErrorCode[] = Object.freeze(Object.keys(GATEWAY_ERRORS) as GatewayErrorCode[]);

/**
 * True when `code` is in the error table.
 *
 * ```ts
 * const body = await res.json() as ErrorBody;
 * if (isErrorCode(body.error.code)) console.log(ERRORS[body.error.code].status);
 * ```
 */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERRORS, code);
}

/**
 * The JSON body of every error response.
 *
 * ```ts
 * const { error } = (await res.json()) as ErrorBody;   // { code: 'proof_required', message, status: 401, ... }
 * ```
 */
export interface ErrorBody {
  error: { code: string; message: string; status: number; [extra: string]: unknown };
}

/**
 * A coded error for rejected untrusted input. Route handlers and pipeline
 * stages throw it; the error handler turns it into an {@link ErrorBody}.
 *
 * ```ts
 * throw new ServiceError('invalid_request', 'required_scope must be a scope.');
 * ```
 */
export class ServiceError extends Error {
  /** Code from {@link ERRORS}. */
  readonly code: ErrorCode;
  /** HTTP status, from the table. */
  readonly status: number;
  /** Extra members for the error body (for example the offending field). */
  readonly extra: Record<string, unknown> | undefined;
  /** Extra response headers (for example `Retry-After`). */
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message?: string, extra?: Record<string, unknown>, headers?: Record<string, string>) {
    super(message ?? ERRORS[code].message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.extra = extra;
    this.headers = headers;
  }

  /** The response body for this error. */
  toBody(): ErrorBody {
    return errorBody(this.code, this.message, this.extra);
  }
}

/**
 * Builds the `{error:{code,message,status}}` body for a code of the table.
 *
 * ```ts
 * reply.code(401).send(errorBody('proof_required'));
 * ```
 */
export function errorBody(code: ErrorCode, message?: string, extra?: Record<string, unknown>): ErrorBody {
  return { error: { ...extra, code, message: message ?? ERRORS[code].message, status: ERRORS[code].status } };
}
