/**
 * The audit hash chain and its signed checkpoints, defined once (pure: no I/O).
 * The store computes the links with these functions inside the transaction
 * that appends a row; `agent-authz-sidecar audit verify` recomputes them
 * offline with the same functions (the checker is `audit-check.ts`).
 *
 * One chain per account. Row `n` (positions start at 1) links to row `n-1`:
 *
 *   content = SHA-256(utf8(canonical({t, id, account_id, event_type, connection_id,
 *                                     agent_id, cert_id, required_scope, details, created_at})))
 *   hash(n) = SHA-256(utf8("agent-authz.audit-link.v1") || 0x00 || prev(32 bytes)
 *                     || position(8 bytes, big-endian) || content)
 *
 * with `t = "agent-authz.audit-row.v1"`, `prev` = hash(n-1) (for n = 1 the 32 zero
 * bytes of {@link GENESIS_HASH}) and the canonical JSON of `canonical.ts`. Hashes
 * are lowercase hex. The link is a fixed binary frame (rather than one more canonical
 * object) so an SQL engine can compute it from the content hash (PostgreSQL:
 * `sha256(... || int8send(position) || ...)`). docs/audit.md has the details.
 *
 * A checkpoint signs one chain head with the service's hybrid key (domain
 * {@link CHECKPOINT_DOMAIN}) over the canonical JSON of its fields.
 */
import { createHash } from 'node:crypto';
import { canonicalize } from './canonical.js';
import { publicKeyToJson } from './crypto/hybrid.js';
import type { HybridPublicKey, HybridSignatureJson } from './crypto/hybrid.js';

/** The `prev` of a chain's first row: 32 zero bytes, hex. */
export const GENESIS_HASH = '0'.repeat(64);
/** The type tag inside every row's canonical content. */
export const AUDIT_ROW_TAG = 'agent-authz.audit-row.v1';
/** The prefix of every link frame. */
export const AUDIT_LINK_TAG = 'agent-authz.audit-link.v1';
/** The type tag inside every checkpoint's signed content. */
export const CHECKPOINT_TAG = 'agent-authz.audit-checkpoint.v1';
/** The hybrid-signature domain of checkpoints (see `domainSeparatedMessage`). */
export const CHECKPOINT_DOMAIN = 'audit-checkpoint';
/** Checkpoint kinds: a periodic one, or the anchor that retention leaves at the last removed row. */
export const CHECKPOINT_KINDS = ['periodic', 'anchor'] as const;
/** One checkpoint kind. */
export type CheckpointKind = (typeof CHECKPOINT_KINDS)[number];

const HEX64 = /^[0-9a-f]{64}$/;
const LINK_PREFIX = Buffer.from(`${AUDIT_LINK_TAG}\0`, 'utf8');

/** The fields of an audit row that its content hash covers. */
export interface AuditRowContent {
  id: string;
  accountId: string;
  eventType: string;
  connectionId: string | null;
  agentId: string | null;
  certId: string | null;
  requiredScope: string | null;
  details: Record<string, unknown>;
  /** Unix ms. */
  createdAt: number;
}

/** A row with its place in the chain. */
export interface ChainedRow extends AuditRowContent {
  /** 1-based position in the account's chain. */
  position: number;
  /** Hash of the previous row (hex), {@link GENESIS_HASH} for position 1. */
  prevHash: string;
  /** This row's hash (hex). */
  hash: string;
}

/** A signed checkpoint of one account's chain head. */
export interface AuditCheckpoint {
  id: string;
  accountId: string;
  /** The position of the head it signs. */
  position: number;
  /** The hash of the row at `position`. */
  head: string;
  kind: CheckpointKind;
  /** {@link keyIdOf} the signing key. */
  keyId: string;
  /** Unix ms. */
  createdAt: number;
  signature: HybridSignatureJson;
}

/** True for a lowercase hex SHA-256. */
export function isHash(s: unknown): s is string {
  return typeof s === 'string' && HEX64.test(s);
}

/**
 * The content hash of a row (32 bytes). Throws `TypeError` when a field is not encodable
 * (a float or `undefined` in `details`): such a row cannot be chained.
 */
export function contentHash(r: AuditRowContent): Buffer {
  const text = canonicalize({
    t: AUDIT_ROW_TAG, id: r.id, account_id: r.accountId, event_type: r.eventType, connection_id: r.connectionId,
    agent_id: r.agentId, cert_id: r.certId, required_scope: r.requiredScope, details: r.details, created_at: r.createdAt,
  });
  return createHash('sha256').update(text, 'utf8').digest();
}

/** The link hash (hex) of the row at `position` with content hash `content` after `prevHash`. */
export function linkHash(prevHash: string, position: number, content: Uint8Array): string {
  if (!isHash(prevHash)) throw new TypeError('audit chain: prevHash must be 64 lowercase hex characters');
  if (!Number.isSafeInteger(position) || position < 1) throw new TypeError('audit chain: position must be a positive integer');
  if (content.length !== 32) throw new TypeError('audit chain: content hash must be 32 bytes');
  const pos = Buffer.alloc(8);
  pos.writeBigUInt64BE(BigInt(position));
  return createHash('sha256').update(LINK_PREFIX).update(Buffer.from(prevHash, 'hex')).update(pos).update(content).digest('hex');
}

/** The hash a row must carry: its link over its own content, position and `prevHash`. */
export function rowHash(r: AuditRowContent & { position: number; prevHash: string }): string {
  return linkHash(r.prevHash, r.position, contentHash(r));
}

/** Places `row` after `head` (null: the chain is empty): its position, prev and hash. */
export function chainAfter(head: { position: number; hash: string } | null, row: AuditRowContent): { position: number; prevHash: string; hash: string } {
  const position = (head?.position ?? 0) + 1;
  const prevHash = head?.hash ?? GENESIS_HASH;
  return { position, prevHash, hash: linkHash(prevHash, position, contentHash(row)) };
}

/** The bytes a checkpoint's signature covers: the canonical JSON of every field but the signature. */
export function checkpointMessage(c: Omit<AuditCheckpoint, 'signature'>): Uint8Array {
  return new TextEncoder().encode(canonicalize({
    t: CHECKPOINT_TAG, id: c.id, account_id: c.accountId, position: c.position, head: c.head, kind: c.kind,
    key_id: c.keyId, created_at: c.createdAt,
  }));
}

/** A service key's id: the first 32 hex characters of the SHA-256 of its canonical public-key JSON. */
export function keyIdOf(publicKey: HybridPublicKey): string {
  return createHash('sha256').update(canonicalize(publicKeyToJson(publicKey)), 'utf8').digest('hex').slice(0, 32);
}
