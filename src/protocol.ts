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
 * The request header that carries an idempotency key (docs/gateway.md#idempotency). Lowercase, as Node reads it.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** The shape of an idempotency key: 1–255 printable ASCII characters (no space). */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** The response header that marks a replayed answer (`true`). Lowercase, as Node reads it. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';
/** Path of the operation that records the upstream's answer to a claimed key (docs/api.md). */
export const IDEMPOTENCY_RECORD_PATH = '/v1/service/idempotency/record';
/** Path of the operation that releases a claimed key whose request got no upstream answer (docs/api.md). */
export const IDEMPOTENCY_RELEASE_PATH = '/v1/service/idempotency/release';
/**
 * The bounds of a recorded answer: the body (larger ones are recorded without it), the number of
 * headers, and each header's name and value (longer ones are not recorded).
 */
export const IDEMPOTENCY_LIMITS = Object.freeze({
  bodyBytes: 32 * 1024, headers: 64, headerNameLength: 128, headerValueLength: 2048,
  /** A claim's lease, which the gateway asks for (its upstream timeout and a margin), in seconds. */
  minLeaseSeconds: 1, maxLeaseSeconds: 3600,
});

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
  /**
   * The request's idempotency key (docs/gateway.md#idempotency): an allow claims it, or finds the
   * recorded answer of the same request (`replay`: not debited again).
   */
  idempotency?: VerifyIdempotency;
}

/** The idempotency block of a verify request. */
export interface VerifyIdempotency {
  /** The `Idempotency-Key` as the agent sent it ({@link IDEMPOTENCY_KEY_PATTERN}). */
  key: string;
  /** Lowercase hex SHA-256 of the request: method, path, query and body (the gateway's `requestHash`). */
  request_sha256: string;
  /** How long the claim holds the key while the request is forwarded, in seconds. */
  lease_seconds: number;
}

/** An upstream answer recorded in the ledger, as the API carries it. */
export interface RecordedResponse {
  /** The upstream's HTTP status. */
  status: number;
  /** The headers to replay, `[name, value]` pairs, lowercase names. */
  headers: [string, string][];
  /** The body, base64 (empty when `body_omitted`). */
  body: string;
  /** The body was over {@link IDEMPOTENCY_LIMITS}.bodyBytes and is not recorded. */
  body_omitted: boolean;
}

/**
 * The idempotency member of an allow: the key was claimed (forward, then record the answer under
 * `claim_id`), or this is a repeat of a recorded request (answer `response`; do not forward).
 */
export type VerifyIdempotencyResult =
  | { status: 'claimed'; claim_id: string }
  | { status: 'replay'; response: RecordedResponse };

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
   * A deny under a sub-delegated certificate: the link of its chain the deny failed at (depth 0
   * is the certificate the account holder signed; docs/certificates.md).
   */
  link?: { depth: number; cert_id: string };
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
  /** With an allow of a request that carried an idempotency block: claimed or replay. */
  idempotency?: VerifyIdempotencyResult;
}
