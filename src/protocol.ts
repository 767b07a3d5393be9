/**
 * The verify protocol, defined once: the request a receiving application
 * (the gateway, forward-auth, your own middleware) sends to
 * `POST /v1/service/verify`, the constraint context inside it, and the
 * decision it gets back (spec 4.13, 2.7 and 4.15). The sidecar validates and
 * answers with these types; the gateway builds and reads them.
 *
 * Typed from the decision and reason tables (`decisions.ts`), so a reason that
 * is not in the table cannot be written into a response.
 */
import type { DecisionReason, DecisionValue } from './decisions.js';

/**
 * Path of the verify operation (spec 4.13).
 *
 * ```ts
 * await fetch(new URL(VERIFY_PATH, sidecarUrl), { method: 'POST', headers: { [API_KEY_HEADER]: apiKey }, body });
 * ```
 */
export const VERIFY_PATH = '/v1/service/verify';
/**
 * Path of the challenge operation (spec 4.11).
 *
 * ```ts
 * const { challenge } = await (await fetch(new URL(CHALLENGE_PATH, sidecarUrl), { method: 'POST', headers: { [API_KEY_HEADER]: apiKey } })).json();
 * ```
 */
export const CHALLENGE_PATH = '/v1/service/challenge';
/**
 * The header that carries a proof bundle: base64 of the bundle JSON (spec 2.6). Lowercase, as Node reads it.
 *
 * ```ts
 * const proof = req.headers[PROOF_HEADER];   // string | string[] | undefined
 * ```
 */
export const PROOF_HEADER = 'x-service-proof';
/**
 * The header that carries a platform API key (spec 5).
 *
 * ```ts
 * const headers = { [API_KEY_HEADER]: process.env.AGENT_AUTHZ_API_KEY!, 'content-type': 'application/json' };
 * ```
 */
export const API_KEY_HEADER = 'x-service-api-key';
/**
 * The response header with which a gateway passes the `approval_id` of an approval deny
 * (`approval_required`, …) on to the agent (docs/gateway.md). Lowercase, as Node reads it.
 */
export const APPROVAL_ID_HEADER = 'x-service-approval-id';
/** The shape of an approval id (a UUID, lowercase) that a gateway passes on. */
export const APPROVAL_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The constraint context: facts about the request actually received, derived
 * by the receiving application, never copied from the caller (spec 4.15 step 3).
 * Every member is optional on the wire; a constraint whose fact is missing denies.
 *
 * ```ts
 * const context: VerifyContext = { method: 'POST', path: '/v1/payments', amount: '12.50', currency: 'EUR', client_ip: '203.0.113.9' };
 * ```
 */
export interface VerifyContext {
  /** HTTP method, uppercase ASCII. */
  method?: string;
  /** Normalized request path (no query). */
  path?: string;
  /** Client IP address (IPv4 or IPv6). */
  client_ip?: string;
  /** Tenant identifier. */
  tenant?: string;
  /** Decimal amount, e.g. `"12.50"` (up to 6 decimals). */
  amount?: string;
  /** ISO 4217 currency code, uppercase. */
  currency?: string;
  /** Lowercase hex SHA-256 of the raw request body. */
  body_sha256?: string;
  /**
   * Lowercase hex SHA-256 of the query string as received (the bytes after the first `?`), sent
   * by the gateway only when the request has a non-empty query. An operation-bound proof binds
   * it, and an approval covers it (docs/proofs.md).
   */
  query_sha256?: string;
  /**
   * The MCP tool of a JSON-RPC `tools/call` (`params.name`, 1–128 of `A-Z a-z 0-9 _ - .`), sent by
   * the gateway's MCP routes. An operation-bound proof that names a tool needs it (docs/proofs.md).
   */
  tool?: string;
}

/**
 * The body of `POST /v1/service/verify`.
 *
 * ```ts
 * const body: VerifyRequest = { proof_bundle: JSON.parse(Buffer.from(header, 'base64').toString()), required_scope: 'payments:send', context };
 * ```
 */
export interface VerifyRequest {
  /** The proof bundle from present (spec 4.12), as parsed JSON. */
  proof_bundle: unknown;
  /** The scope the protected action requires (spec 2.9). */
  required_scope: string;
  /** Facts about the request for the certificate's constraints. */
  context?: VerifyContext;
}

/**
 * The 200 body of `POST /v1/service/verify`: a decision and its stable reason (spec 2.7).
 *
 * ```ts
 * const answer = (await res.json()) as VerifyResponse;
 * if (res.status === 200 && answer.decision === 'allow') await next();   // nothing else runs protected code
 * ```
 */
export interface VerifyResponse {
  /** Only `allow` runs protected code; treat any value outside {@link DecisionValue} as no decision. */
  decision: DecisionValue;
  /** The stable reason, from `DECISION_REASONS`. */
  decision_reason: DecisionReason;
  /** The agent the proof speaks for (when the proof was read). */
  agent_id?: string;
  /** The certificate the proof refers to (when the proof was read). */
  cert_id?: string;
  /** Echo of `required_scope`. */
  scope?: string;
  /** With `constraint_denied`: the constraint that did not hold. */
  constraint?: string;
  /** Id of the audit event recorded for this decision. */
  audit_event_id?: string;
  /**
   * The id of this decision (every answer): the `event_id` of its audit event when one was
   * recorded. Its explanation is `GET /v1/service/decisions/{decision_id}` (docs/authzen.md).
   */
  decision_id?: string;
  /**
   * With `approval_required`, `approval_denied`, `approval_expired` and `approval_used`: the
   * approval of this operation; with an allow that used an approval, that approval. A gateway
   * passes it to the agent (docs/gateway.md), which can poll its status (docs/api.md).
   */
  approval_id?: string;
}
