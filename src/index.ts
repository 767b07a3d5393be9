/**
 * `agent-authz`: the pure core shared by the sidecar, the gateway and the
 * receiver — the error table, the scope vocabulary, the decision reasons and
 * the webhook signature rule. No I/O; importing it loads no native addon, no
 * mailer and no post-quantum library.
 *
 * ```ts
 * import { ERRORS, isValidScope, DECISION_REASONS } from 'agent-authz';
 *
 * isValidScope('data:read');                 // true
 * ERRORS.invalid_challenge.status;           // 400
 * DECISION_REASONS.not_delegated.decision;   // 'deny'
 * ```
 *
 * The parts you deploy have their own entry points: `agent-authz/gateway`
 * (Fastify plugin), `agent-authz/receiver` (webhook receiver),
 * `agent-authz/receiver/sqlite` (its durable dedup store), `agent-authz/sidecar`
 * (embed the service). Exported here: what an application that talks to the
 * sidecar needs — the error table and its body shape, the scope vocabulary, the
 * verify protocol, the decision reasons, and webhook signatures. The services'
 * internals (`ServiceError`, the custom-scope grammar table) are not.
 */
export { ERRORS, GATEWAY_ERRORS, GATEWAY_ERROR_CODES, errorBody, isErrorCode } from './errors.js';
export type { ErrorBody, ErrorCode, ErrorSpec, GatewayErrorCode } from './errors.js';
export { CANONICAL_SCOPES, MAX_SCOPES_PER_LIST, isCanonicalScope, isCustomScope, isSensitiveScope, isValidScope } from './scopes.js';
export type { CanonicalScope } from './scopes.js';
export { API_KEY_HEADER, CHALLENGE_PATH, PROOF_HEADER, VERIFY_PATH } from './protocol.js';
export type { VerifyContext, VerifyRequest, VerifyResponse } from './protocol.js';
export { DECISION_REASONS } from './decisions.js';
export type { DecisionReason, DecisionValue } from './decisions.js';
export {
  WEBHOOK_EVENT_TYPES, WEBHOOK_HEADERS, WEBHOOK_TOLERANCE_SECONDS, isTimestampFresh, isWebhookEventType, signWebhook, verifyWebhookSignature,
} from './webhooks.js';
export type { WebhookEnvelope, WebhookEvent, WebhookEventType } from './webhooks.js';
