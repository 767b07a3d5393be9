/**
 * The store interface: every read and write the sidecar makes to durable
 * state, as async domain operations. It names no engine type: the SQLite
 * store (`sqlite/`) and the PostgreSQL store (`postgres/`) implement it, and
 * the contract suite (test/sidecar/store/contract.ts) holds both to it.
 *
 * Times are Unix milliseconds. JSON-ish fields are already parsed. Sealed
 * (encrypted) values are opaque `Uint8Array`s; the store never sees a
 * plaintext secret or private key. The parts are grouped by subject under
 * types/ and re-exported here: import them from this file.
 */
import type { AccountStore } from './types/accounts.js';
import type { ApprovalStore, UsageStore } from './types/approvals.js';
import type { AuditStore } from './types/audit.js';
import type { DelegationStore } from './types/delegations.js';
import type { DecisionStore } from './types/decisions.js';
import type { IdempotencyStore } from './types/idempotency.js';
import type { OrganisationStore } from './types/organisations.js';
import type { PublishingStore } from './types/publishing.js';
import type { ChangeFeed, PoolStats } from './types/engine.js';
import type { OutboxStore } from './types/outbox.js';
import type { PlatformStore } from './types/platforms.js';
import type { ProofStore } from './types/proofs.js';
export type * from './types/accounts.js';
export type * from './types/platforms.js';
export type * from './types/delegations.js';
export type * from './types/proofs.js';
export type * from './types/approvals.js';
export type * from './types/outbox.js';
export type * from './types/audit.js';
export type * from './types/engine.js';
export type * from './types/decisions.js';
export type * from './types/idempotency.js';
export type * from './types/organisations.js';
export type * from './types/publishing.js';

/** The whole store. */
export interface Store {
  readonly accounts: AccountStore;
  readonly platforms: PlatformStore;
  readonly delegations: DelegationStore;
  readonly proofs: ProofStore;
  readonly outbox: OutboxStore;
  /** Step-up approvals. */
  readonly approvals: ApprovalStore;
  /** Usage counters of budgets and rate limits. */
  readonly usage: UsageStore;
  readonly audit: AuditStore;
  /** The explanations of decisions. */
  readonly decisions: DecisionStore;
  /** The idempotency ledger (docs/gateway.md#idempotency). */
  readonly idempotency: IdempotencyStore;
  /** Organisations, memberships, invitations (docs/organisations.md). */
  readonly organisations: OrganisationStore;
  /** Publisher domains, publish states, the directory (docs/organisations.md). */
  readonly publishing: PublishingStore;
  /**
   * Changes committed by other processes sharing the database, for cache invalidation;
   * absent when one process owns the database (then the routes update the caches themselves).
   */
  readonly changes?: ChangeFeed;
  /** Readiness: the store answers and migrations are applied. */
  ping(): Promise<{ ok: boolean; schemaVersion: number; expectedVersion: number }>;
  /**
   * The master-key check: stores `candidate` (a value sealed with the master key) unless a
   * key-check value exists, and returns the stored one. A process whose key cannot open the
   * returned value must not start.
   */
  keyCheck(candidate: Uint8Array): Promise<Uint8Array>;
  /** The connection pool's state (metrics). */
  poolStats(): PoolStats;
  close(): Promise<void>;
}
