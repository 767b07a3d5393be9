/**
 * Table rows and their mapping to the store's records, shared by both
 * engines: the SQLite and PostgreSQL schemas have the same tables and column
 * names (times as integer Unix ms, JSON as text, sealed values as bytes that
 * both drivers return as a Buffer). Extra columns a row may carry (the
 * PostgreSQL `seq` of some tables) are ignored.
 */
import type {
  AccountRecord, AgentRecord, ApiKeyRecord, AuditEventRecord, CertificateRecord, ChallengeRecord, ClaimedDelivery, ConnectionRecord,
  DelegationRequestRecord, DeliveryAttemptRecord, DeliveryRecord, LoginCodeRecord, PlatformRecord, SessionRecord,
} from './types.js';

/** An `accounts` row. */
export interface AccountRow {
  id: string; email: string; first_name: string | null; last_name: string | null; account_type: string | null;
  onboarding_step: string; root_public_key: string | null; root_secret_enc: Buffer | null; credits_micros: number;
  verify_calls: number; verify_allows: number; verify_denies: number; created_at: number; org_name?: string | null;
}
/** A `login_codes` row. */
export interface CodeRow { id: string; email: string; code_hash: string; attempts: number; expires_at: number; used_at: number | null; created_at: number }
/** A `sessions` row. */
export interface SessionRow {
  id: string; token_hash: string; account_id: string; expires_at: number; absolute_expires_at: number; ended_at: number | null;
  created_at: number; workspace_id?: string | null;
}
/** A `platforms` row. */
export interface PlatformRow {
  id: string; account_id: string; name: string; description: string; surface_type: string; publish_state: string;
  default_allowed_scopes: string; callback_url: string | null; callback_disabled_at: number | null;
  signing_secret_enc: Buffer; webhook_secret_enc: Buffer; expires_at: number; created_at: number;
}
/** A `connections` row. */
export interface ConnectionRow {
  id: string; platform_id: string; account_id: string; allowed_scopes: string; status: 'active' | 'removed';
  removed_at: number | null; created_at: number;
}
/** An `api_keys` row. */
export interface KeyRow {
  id: string; connection_id: string; prefix: string; digest: string; status: ApiKeyRecord['status']; valid_until: number | null;
  created_at: number;
}
/** An `agents` row. */
export interface AgentRow {
  id: string; connection_id: string; account_id: string; name: string; agent_type: string; custody_mode: string;
  public_key: string; secret_enc: Buffer; created_at: number;
}
/** A `delegation_requests` row. */
export interface RequestRow {
  id: string; connection_id: string; account_id: string; agent_id: string; requested_scopes: string;
  proposed_constraints: string | null;
  state: DelegationRequestRecord['state']; cert_id: string | null; decided_at: number | null; created_at: number;
}
/** A `certificates` row. */
export interface CertRow {
  id: string; request_id: string; account_id: string; connection_id: string; agent_id: string; approved_scope: string;
  constraints: string | null; cert_json: string; cert_sha256: string; status: CertificateRecord['status'];
  issued_at: number; expires_at: number | null; revoked_at: number | null; revoke_reason: string | null;
  parent_cert_id: string | null; depth: number; max_delegation_depth: number;
}
/** A `challenges` row. */
export interface ChallengeRow {
  id: string; audience_connection_id: string; account_id: string; expires_at: number; presented_at: number | null;
  consumed_at: number | null; created_at: number;
}
/** An `audit_events` row. */
export interface AuditRow {
  seq: number; id: string; account_id: string; event_type: AuditEventRecord['eventType']; connection_id: string | null;
  agent_id: string | null; cert_id: string | null; required_scope: string | null; details: string; created_at: number;
}
/** An `outbox` row without its body. */
export interface OutboxRow {
  id: string; seq: number; account_id: string; platform_id: string; connection_id: string | null; event_type: string;
  state: DeliveryRecord['state']; attempts: number; next_attempt_at: number; lease_until: number | null;
  last_status: number | null; last_error: string | null; delivered_at: number | null; created_at: number;
}

/** A due delivery joined with its platform (claimDue). */
export interface ClaimRow {
  id: string; platform_id: string; event_type: string; body_enc: Buffer; attempts: number; created_at: number;
  callback_url: string | null; callback_disabled_at: number | null; webhook_secret_enc: Buffer;
}
/** A `delivery_attempts` row. */
export interface AttemptRow { attempt: number; attempted_at: number; status: number | null; error: string | null; duration_ms: number }

/** The `outbox` columns of {@link OutboxRow} (the body left out). */
export const DELIVERY_COLUMNS = `id, seq, account_id, platform_id, connection_id, event_type, state, attempts, next_attempt_at,
  lease_until, last_status, last_error, delivered_at, created_at`;

const u8 = (b: Buffer): Uint8Array => new Uint8Array(b);

/** Maps an `accounts` row. */
export const accountFromRow = (r: AccountRow): AccountRecord => ({
  id: r.id, email: r.email, firstName: r.first_name, lastName: r.last_name, accountType: r.account_type,
  onboardingStep: r.onboarding_step, rootPublicKey: r.root_public_key,
  rootSecretEnc: r.root_secret_enc ? u8(r.root_secret_enc) : null, creditsMicros: r.credits_micros,
  verifyCalls: r.verify_calls, verifyAllows: r.verify_allows, verifyDenies: r.verify_denies, createdAt: r.created_at,
  orgName: r.org_name ?? null,
});
/** Maps a `login_codes` row. */
export const codeFromRow = (r: CodeRow): LoginCodeRecord => ({
  id: r.id, email: r.email, codeHash: r.code_hash, attempts: r.attempts, expiresAt: r.expires_at, usedAt: r.used_at, createdAt: r.created_at,
});
/** Maps a `sessions` row. */
export const sessionFromRow = (r: SessionRow): SessionRecord => ({
  id: r.id, tokenHash: r.token_hash, accountId: r.account_id, expiresAt: r.expires_at,
  absoluteExpiresAt: r.absolute_expires_at, endedAt: r.ended_at, createdAt: r.created_at,
  workspaceId: r.workspace_id ?? null,
});
/** Maps a `platforms` row. */
export const platformFromRow = (r: PlatformRow): PlatformRecord => ({
  id: r.id, accountId: r.account_id, name: r.name, description: r.description, surfaceType: r.surface_type,
  publishState: r.publish_state, defaultAllowedScopes: JSON.parse(r.default_allowed_scopes) as string[],
  callbackUrl: r.callback_url, callbackDisabledAt: r.callback_disabled_at,
  signingSecretEnc: u8(r.signing_secret_enc), webhookSecretEnc: u8(r.webhook_secret_enc), expiresAt: r.expires_at, createdAt: r.created_at,
});
/** Maps a `connections` row. */
export const connectionFromRow = (r: ConnectionRow): ConnectionRecord => ({
  id: r.id, platformId: r.platform_id, accountId: r.account_id, allowedScopes: JSON.parse(r.allowed_scopes) as string[],
  status: r.status, removedAt: r.removed_at, createdAt: r.created_at,
});
/** Maps an `api_keys` row. */
export const keyFromRow = (r: KeyRow): ApiKeyRecord => ({
  id: r.id, connectionId: r.connection_id, prefix: r.prefix, digest: r.digest, status: r.status, validUntil: r.valid_until, createdAt: r.created_at,
});
/** Maps an `agents` row. */
export const agentFromRow = (r: AgentRow): AgentRecord => ({
  id: r.id, connectionId: r.connection_id, accountId: r.account_id, name: r.name, agentType: r.agent_type,
  custodyMode: r.custody_mode, publicKey: r.public_key, secretEnc: u8(r.secret_enc), createdAt: r.created_at,
});
/** Maps a `delegation_requests` row. */
export const requestFromRow = (r: RequestRow): DelegationRequestRecord => ({
  id: r.id, connectionId: r.connection_id, accountId: r.account_id, agentId: r.agent_id,
  requestedScopes: JSON.parse(r.requested_scopes) as string[],
  proposedConstraints: r.proposed_constraints === null ? null
    : JSON.parse(r.proposed_constraints) as Record<string, unknown>,
  state: r.state, certId: r.cert_id, decidedAt: r.decided_at, createdAt: r.created_at,
});
/** Maps a `certificates` row. */
export const certFromRow = (r: CertRow): CertificateRecord => ({
  id: r.id, requestId: r.request_id, accountId: r.account_id, connectionId: r.connection_id, agentId: r.agent_id,
  approvedScope: JSON.parse(r.approved_scope) as string[], constraints: r.constraints === null ? null : JSON.parse(r.constraints),
  certJson: r.cert_json, certSha256: r.cert_sha256, status: r.status, issuedAt: r.issued_at, expiresAt: r.expires_at,
  revokedAt: r.revoked_at, revokeReason: r.revoke_reason,
  parentCertId: r.parent_cert_id, depth: Number(r.depth), maxDelegationDepth: Number(r.max_delegation_depth),
});
/** Maps a `challenges` row. */
export const challengeFromRow = (r: ChallengeRow): ChallengeRecord => ({
  id: r.id, audienceConnectionId: r.audience_connection_id, accountId: r.account_id, expiresAt: r.expires_at,
  presentedAt: r.presented_at, consumedAt: r.consumed_at, createdAt: r.created_at,
});
/** Maps an `audit_events` row. */
export const auditFromRow = (r: AuditRow): AuditEventRecord => ({
  id: r.id, seq: r.seq, accountId: r.account_id, eventType: r.event_type, connectionId: r.connection_id, agentId: r.agent_id,
  certId: r.cert_id, requiredScope: r.required_scope, details: JSON.parse(r.details) as Record<string, unknown>, createdAt: r.created_at,
});
/** Maps an `outbox` row. */
export const deliveryFromRow = (r: OutboxRow): DeliveryRecord => ({
  id: r.id, platformId: r.platform_id, connectionId: r.connection_id, eventType: r.event_type, state: r.state,
  attempts: r.attempts, nextAttemptAt: r.next_attempt_at, lastStatus: r.last_status, lastError: r.last_error,
  deliveredAt: r.delivered_at, createdAt: r.created_at, seq: r.seq,
});

/** Maps a claimed delivery. */
export const claimFromRow = (r: ClaimRow): ClaimedDelivery => ({
  id: r.id, platformId: r.platform_id, eventType: r.event_type, bodyEnc: u8(r.body_enc), attempts: r.attempts, createdAt: r.created_at,
  callbackUrl: r.callback_url, callbackDisabled: r.callback_disabled_at !== null, webhookSecretEnc: u8(r.webhook_secret_enc),
});
/** Maps a `delivery_attempts` row. */
export const attemptFromRow = (r: AttemptRow): DeliveryAttemptRecord => ({
  attempt: r.attempt, attemptedAt: r.attempted_at, status: r.status, error: r.error, durationMs: r.duration_ms,
});

/** Longest `last_error` / attempt error text kept (characters). */
export const MAX_ERROR_CHARS = 500;

/** Clips an error text to {@link MAX_ERROR_CHARS}. */
export const clipError = (s: string | null): string | null => (s === null || s.length <= MAX_ERROR_CHARS ? s : s.slice(0, MAX_ERROR_CHARS));

/** JSON text of certificate constraints (null when there are none). */
export const constraintsText = (c: unknown): string | null => (c === null || c === undefined ? null : JSON.stringify(c));
