/**
 * The store interface (types.ts), by subject: audit evidence (chain heads, signed
 * checkpoints, retention anchors, exports, the service keys) and the read-only
 * source of `audit verify`; the audit event row itself.
 */

/** An audit event. */
export interface AuditEventRecord {
  id: string;
  seq?: number;
  accountId: string;
  eventType:
    | 'proof.presented' | 'proof.verified' | 'proof.rejected'
    | 'approval.requested' | 'approval.granted' | 'approval.denied' | 'approval.expired'
    | 'access.evaluated'
    | 'organization.created' | 'member.invited' | 'member.joined' | 'member.role_changed' | 'member.removed'
    | 'member.left' | 'invitation.revoked' | 'workspace.switched' | 'platform.updated'
    | 'platform.created' | 'platform.published' | 'platform.unpublished'
    | 'domain.claimed' | 'domain.verified' | 'domain.lapsed'
    | 'connection.created' | 'connection.removed' | 'connection.key_rotated';
  connectionId: string | null;
  agentId: string | null;
  certId: string | null;
  requiredScope: string | null;
  details: Record<string, unknown>;
  createdAt: number;
}

/** An audit row with its chain fields, in chain order. */
export interface ChainedAuditEvent extends AuditEventRecord {
  /** 1-based position in the account's chain. */
  position: number;
  prevHash: string;
  hash: string;
}

/** One account's chain head and when it was last signed. */
export interface AuditChainHead {
  accountId: string;
  position: number;
  hash: string;
  /** Highest position a checkpoint signs (0: none yet). */
  checkpointPosition: number;
  /** When the last checkpoint was made (or, before the first, when the chain started). */
  checkpointAt: number;
}

/** A stored checkpoint (`src/audit-chain.ts` `AuditCheckpoint`, the signature as its JSON form). */
export interface AuditCheckpointRecord {
  id: string;
  accountId: string;
  position: number;
  head: string;
  kind: 'periodic' | 'anchor';
  keyId: string;
  createdAt: number;
  signature: { ed25519: string; ml_dsa_65: string };
}

/** A service signing key; the secret is sealed under the master key. */
export interface ServiceKeyRecord {
  /** The key id (`keyIdOf` the public key). */
  id: string;
  /** What it signs, e.g. `audit-checkpoint`; one key per purpose. */
  purpose: string;
  /** Public key JSON text (`hybrid-ed25519-mldsa65`). */
  publicKey: string;
  secretEnc: Uint8Array;
  createdAt: number;
}

/** Where retention may cut one account's chain: rows up to `position` are all older than the cut-off. */
export interface PrunePoint {
  accountId: string;
  position: number;
  /** The hash of the row at `position` (what the anchor signs). */
  hash: string;
}

/** A push-export claim: the account's rows after `after` are due, up to `head`. */
export interface ExportClaim {
  accountId: string;
  after: number;
  head: number;
}

/** Audit evidence: chain heads, checkpoints, retention, exports, the service key. */
export interface AuditStore {
  /** Stores `candidate` unless a key with its purpose exists; returns the stored key (races: one wins). */
  ensureServiceKey(candidate: ServiceKeyRecord): Promise<ServiceKeyRecord>;
  /** Every service key (secrets included, sealed). */
  serviceKeys(): Promise<ServiceKeyRecord[]>;
  getHead(accountId: string): Promise<AuditChainHead | undefined>;
  /**
   * Heads due a checkpoint: rows after the last checkpoint, and either at least `rows` of
   * them or the last checkpoint made at or before `olderThan`. At most `limit`.
   */
  headsDue(q: { rows: number; olderThan: number; limit: number }): Promise<AuditChainHead[]>;
  /**
   * Stores a checkpoint if its `head` is the hash of the account's row at `position` and no
   * checkpoint of that kind signs that position yet; returns whether it was stored. Moves
   * the head's `checkpointPosition` / `checkpointAt` forward.
   */
  insertCheckpoint(c: AuditCheckpointRecord): Promise<boolean>;
  /** An account's checkpoints in position order, optionally within [fromPosition, toPosition]. */
  listCheckpoints(
    q: { accountId: string; fromPosition?: number; toPosition?: number },
  ): Promise<AuditCheckpointRecord[]>;
  /**
   * Per account with rows older than `olderThan`: the longest chain prefix whose rows are all
   * older (a row is removed only with every row before it). At most `limit` accounts.
   */
  prunePoints(olderThan: number, limit: number): Promise<PrunePoint[]>;
  /**
   * One transaction: stores `anchor` (kind `anchor`), deletes the account's rows up to its
   * position and the checkpoints below it. Returns the rows deleted, or -1 (nothing done) when
   * the anchor's head is not the hash of the row at its position.
   */
  pruneTo(anchor: AuditCheckpointRecord): Promise<number>;
  /** An account's rows in chain order with position > `after`, at most `limit`. */
  readChain(accountId: string, after: number, limit: number): Promise<ChainedAuditEvent[]>;
  /**
   * The contiguous chain part from the first row with created_at ≥ `from` to the last row with
   * created_at < `to` (positions), or undefined when none is in the range.
   */
  chainRange(accountId: string, from: number, to: number): Promise<{ first: number; last: number } | undefined>;
  /**
   * Leases up to `limit` accounts whose chain has rows past the `sink`'s cursor (an account
   * with no cursor starts at 0), until `now + leaseMs`.
   */
  claimExport(sink: string, now: number, leaseMs: number, limit: number): Promise<ExportClaim[]>;
  /**
   * Moves cursors forward (each only from `from`; an already moved one is left) and ends their leases, in one
   * transaction.
   */
  advanceExport(sink: string, moves: { accountId: string; from: number; to: number }[]): Promise<void>;
  /** Ends leases without moving the cursors. */
  releaseExport(sink: string, accountIds: string[]): Promise<void>;
  /** Rows not yet exported to `sink`, over all accounts. */
  exportBacklog(sink: string): Promise<number>;
}

/**
 * A read-only view of an audit trail for the offline verifier (`audit verify`): a database
 * opened without writing, or an export file. Rows come in position order.
 */
export interface AuditSource {
  /** Service public keys found in the source: key id and public key JSON text. */
  serviceKeys(): Promise<{ id: string; publicKey: string }[]>;
  /** Every account with a chain head, rows or checkpoints. */
  accounts(): Promise<string[]>;
  /** The stored chain head (null when the source keeps none, as an export). */
  head(accountId: string): Promise<{ position: number; hash: string } | null>;
  checkpoints(accountId: string): Promise<AuditCheckpointRecord[]>;
  /** The account's chained rows in position order. */
  rows(accountId: string): AsyncIterable<ChainedAuditEvent>;
  /** Rows of the account without chain fields: how many, and the first one's id. */
  unchained(accountId: string): Promise<{ count: number; firstId: string | null }>;
  close(): Promise<void>;
}
