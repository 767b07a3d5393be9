/**
 * The shapes of the `/v1` answers the console reads (docs/api.md).
 */

/** A platform (no secrets). */
export interface Platform {
  platform_id: string; connection_id: string | null; name: string; description: string; surface_type: string;
  publish_state: string; default_allowed_scopes: string[]; callback_url: string | null; callback_disabled_at: string | null;
  expires_at: string | null; created_at: string;
}
/** The answer of a registration: the platform's three secrets, shown once. */
export interface Registration {
  api_key: string; api_key_prefix: string; connection_id: string; platform_id: string; name: string; expires_at: string;
  signing_secret: string; webhook_signing_secret: string;
}
/** A connection. */
export interface Connection {
  connection_id: string; platform_id: string; allowed_scopes: string[]; status: string; removed_at: string | null; created_at: string }
/** An agent. */
export interface Agent { agent_id: string; name: string; agent_type: string; custody_mode: string; connection_id?: string; created_at?: string }
/** A delegation request. */
export interface DelegationRequest {
  request_id: string; connection_id: string; agent_id: string; requested_scope: string[]; state: 'pending' | 'approved' | 'denied';
  cert_id: string | null; decided_at: string | null; created_at: string;
  /** The constraints a platform proposed with its request (docs/organisations.md); null: none. */
  proposed_constraints?: Record<string, unknown> | null;
}
/** A certificate (delegation). */
export interface Certificate {
  cert_id: string; request_id: string; connection_id: string; agent_id: string; approved_scope: string[];
  constraints: Record<string, unknown> | null; status: 'approved' | 'revoked'; issued_at: string; expires_at: string | null;
  revoked_at: string | null; revoke_reason: string | null; cert_sha256: string;
  /** Sub-delegation (docs/certificates.md): parent (null at a root), depth (0 at a root), right to delegate. */
  parent_cert_id?: string | null; depth?: number; max_delegation_depth?: number | null;
}
/** The answer of a revocation: the certificate and the sub-delegated descendants revoked with it. */
export interface Revocation {
  cert_id: string; status: 'revoked'; already_revoked: boolean; revoked_at: string; descendants_revoked: string[];
}
/** A step-up approval of one action (docs/api.md, Approvals). */
export interface ActionApproval {
  approval_id: string; state: 'pending' | 'granted' | 'denied' | 'used' | 'expired'; summary: string; scope: string;
  action: {
    method: string | null; path: string | null; tool: string | null; amount: string | null; currency: string | null; tenant: string | null; bound: boolean };
  agent_id: string; connection_id: string; cert_id: string; context: Record<string, string>; operation: Record<string, string> | null;
  note: string | null; created_at: string | null; expires_at: string | null; decided_at: string | null; settled_at: string | null;
}
/** What a certificate's limits used and have left in the current window (docs/api.md, Budgets and rate limits). */
export interface CertificateUsage {
  cert_id: string;
  budget: {
    amount: string; currency: string; period: string; window_start: string; window_end: string | null;
    spent: string; left: string; spent_micros: number; left_micros: number } | null;
  max_calls: { count: number; period: string; window_start: string; window_end: string | null; used: number; left: number } | null;
}
/** An audit event. */
export interface AuditEvent {
  event_id: string; event_type: string; occurred_at: string; connection_id: string | null; agent_id: string | null;
  cert_id: string | null; required_scope: string | null; details: Record<string, unknown> | null;
}
/** One constraint of an explanation, evaluated alone (docs/authzen.md, Explained decisions). */
export interface ExplainedConstraint { name: string; limit: unknown; value: unknown; holds: boolean; missing?: boolean }
/** A budget or call counter of an explanation, as read before the call. */
export interface ExplainedCounter {
  kind: 'budget' | 'calls'; window_start: string; currency?: string; used: string | number; this_call: string | number;
  limit: string | number;
}
/** The explanation of a decision (`GET /v1/service/decisions/personal/{decision_id}`); never a secret. */
export interface DecisionExplanation {
  decision_id: string; time: string; mode: string; decision: string; reason: string; stage: string; agent_id: string;
  certificate: { cert_id: string; scopes: string[]; constraints: Record<string, unknown> | null; issued_at: string;
    expires_at: string | null } | null;
  scope: { asked: string; granted: string[]; delegated: boolean };
  context: Record<string, unknown> | null;
  constraints: ExplainedConstraint[];
  constraint?: string;
  approval: { rule: Record<string, unknown> | null; approval_id: string | null; state: string | null };
  counters: ExplainedCounter[];
  would_allow: ({ change: string } & Record<string, unknown>)[];
}
/** The usage read. */
export interface Usage {
  account_id: string; balance_micros: number; balance_dollars: string; price_per_verify_micros: number;
  verify_calls: number; allows: number; denies: number; remaining_verify_calls: number;
}
/** A webhook delivery. */
export interface Delivery {
  delivery_id: string; platform_id: string; connection_id: string | null; event: string; state: string; attempts: number;
  next_attempt_at: string | null; last_status: number | null; last_error: string | null; delivered_at: string | null; created_at: string;
  attempt_history?: { attempt: number; attempted_at: string; status: number | null; error: string | null; duration_ms: number | null }[];
}

/** True when a certificate is in force now (approved and not past its expiry). */
export function isActive(c: Certificate, now = Date.now()): boolean {
  return c.status === 'approved' && (c.expires_at === null || Date.parse(c.expires_at) > now);
}

/** The organisation's publisher domain (`GET /v1/service/organization/domain`, docs/organisations.md). */
export interface PublisherDomain {
  domain: string; record_name: string; record_text: string; state: 'unverified' | 'verified' | 'lapsed';
  claimed_at: string; verified_at: string | null; lapsed_at: string | null; checked_at: string | null;
  last_outcome: string | null;
}
/** A published platform in the directory (`GET /v1/service/directory`). */
export interface DirectoryEntry {
  platform_id: string; name: string; description: string; surface_type: string; scopes: string[];
  publisher: { organization_id: string; name: string; verified_domain: string };
}
/** An organisation just created (`POST /v1/service/organizations`). */
export interface Organization { organization_id: string; name: string; role: string; created_at: string }

/** The constraints a platform proposed with `r`; null when none (an empty object is none too). */
export function proposedConstraints(r: DelegationRequest): Record<string, unknown> | null {
  const c = r.proposed_constraints;
  return c && Object.keys(c).length > 0 ? c : null;
}
