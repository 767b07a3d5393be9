/**
 * Rows of the approval and audit-evidence tables and their mapping to the
 * store's records, shared by both engines (same tables, same columns; see
 * rows.ts for the rest).
 */
import type {
  ApprovalRecord, ApprovalState, AuditChainHead, AuditCheckpointRecord, ChainedAuditEvent, ServiceKeyRecord,
} from './types.js';
import { auditFromRow } from './rows.js';
import type { AuditRow } from './rows.js';

/** An `approvals` row. */
export interface ApprovalRow {
  seq: number; id: string; account_id: string; connection_id: string; platform_id: string; agent_id: string; cert_id: string;
  scope: string; fingerprint: string; context: string; operation: string | null; state: ApprovalState; note: string | null;
  created_at: number; expires_at: number; decided_at: number | null; settled_at: number | null;
}

/** The record of an `approvals` row. */
export const approvalFromRow = (r: ApprovalRow): ApprovalRecord => ({
  id: r.id, seq: r.seq, accountId: r.account_id, connectionId: r.connection_id, platformId: r.platform_id, agentId: r.agent_id,
  certId: r.cert_id, scope: r.scope, fingerprint: r.fingerprint, context: JSON.parse(r.context) as Record<string, string>,
  operation: r.operation === null ? null : JSON.parse(r.operation) as Record<string, string>, state: r.state, note: r.note,
  createdAt: r.created_at, expiresAt: r.expires_at, decidedAt: r.decided_at, settledAt: r.settled_at,
});

/** An `audit_chain_heads` row. */
export interface HeadRow { account_id: string; position: number; hash: string; checkpoint_position: number; checkpoint_at: number }
/** An `audit_checkpoints` row. */
export interface CheckpointRow {
  id: string; account_id: string; position: number; head: string; kind: string; key_id: string; signature: string; created_at: number;
}
/** A `service_keys` row. */
export interface ServiceKeyRow { id: string; purpose: string; public_key: string; secret_enc: Buffer; created_at: number }
/** An `audit_events` row with its chain columns. */
export type ChainRow = AuditRow & { chain_position: number; prev_hash: string; hash: string };

/** Maps a chain head. */
export const headFromRow = (r: HeadRow): AuditChainHead => ({
  accountId: r.account_id, position: r.position, hash: r.hash, checkpointPosition: r.checkpoint_position, checkpointAt: r.checkpoint_at,
});
/** Maps a checkpoint. */
export const checkpointFromRow = (r: CheckpointRow): AuditCheckpointRecord => ({
  id: r.id, accountId: r.account_id, position: r.position, head: r.head, kind: r.kind as AuditCheckpointRecord['kind'], keyId: r.key_id,
  createdAt: r.created_at, signature: JSON.parse(r.signature) as AuditCheckpointRecord['signature'],
});
/** Maps a service key. */
export const serviceKeyFromRow = (r: ServiceKeyRow): ServiceKeyRecord => ({
  id: r.id, purpose: r.purpose, publicKey: r.public_key, secretEnc: new Uint8Array(r.secret_enc), createdAt: r.created_at,
});
/** A chained row as the store's record. */
export const chainedFromRow = (r: ChainRow): ChainedAuditEvent => ({ ...auditFromRow(r), position: r.chain_position, prevHash: r.prev_hash, hash: r.hash });

/**
 * A checkpoint row as the offline verifier reads it (both engines' audit sources): a signature
 * that is not JSON becomes an empty one, which the checker reports as forged, instead of
 * stopping the read.
 */
export const sourceCheckpointFromRow = (r: CheckpointRow): AuditCheckpointRecord => {
  let signature: AuditCheckpointRecord['signature'];
  try { signature = JSON.parse(r.signature) as AuditCheckpointRecord['signature']; } catch { signature = { ed25519: '', ml_dsa_65: '' }; }
  return { ...checkpointFromRow({ ...r, signature: '{}' }), signature };
};

/**
 * A chained row as the offline verifier reads it: `details` that are not JSON are kept as text
 * under `unreadable_details` (so the row's hash no longer matches and the checker names it).
 */
export const sourceRowFromRow = (r: ChainRow): ChainedAuditEvent => {
  let details: Record<string, unknown>;
  try { details = JSON.parse(r.details) as Record<string, unknown>; } catch { details = { unreadable_details: r.details }; }
  return { ...chainedFromRow({ ...r, details: '{}' }), details };
};
