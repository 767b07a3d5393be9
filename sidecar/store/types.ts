/**
 * The store interface: every read and write the sidecar makes to durable
 * state, as async domain operations. It names no engine type: the SQLite
 * store (`sqlite/`) and the PostgreSQL store (`postgres/`) implement it, and
 * the contract suite (test/sidecar/store/contract.ts) holds both to it.
 *
 * Times are Unix milliseconds. JSON-ish fields are already parsed. Sealed
 * (encrypted) values are opaque `Uint8Array`s; the store never sees a
 * plaintext secret or private key.
 */

import type { OutboxEventInput, OutboxStore, ProofStore } from './ledger-types.js';
import type { ApprovalStore, UsageStore } from './approval-types.js';
import type { ChangeFeed, PoolStats, RateLimitHit } from './engine-types.js';

/** The proof, audit and outbox parts of the interface (ledger-types.ts), re-exported so the store has one import path. */
export type * from './ledger-types.js';
/** The approval and usage-counter parts (approval-types.ts). */
export type * from './approval-types.js';
import type { AuditStore } from './audit-types.js';
/** The audit-evidence part (audit-types.ts): chain heads, checkpoints, exports, the service key. */
export type * from './audit-types.js';
/** The change feed, monitor and pool types (engine-types.ts). */
export type * from './engine-types.js';

/** An account holder. */
export interface AccountRecord {
  id: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  accountType: string | null;
  onboardingStep: string;
  /** Root identity public key JSON text (null before onboarding completes). */
  rootPublicKey: string | null;
  rootSecretEnc: Uint8Array | null;
  creditsMicros: number;
  verifyCalls: number;
  verifyAllows: number;
  verifyDenies: number;
  createdAt: number;
}

/** A stored (hashed) e-mail login code. */
export interface LoginCodeRecord {
  id: string;
  email: string;
  codeHash: string;
  attempts: number;
  expiresAt: number;
  usedAt: number | null;
  createdAt: number;
}

/** A session row (the token itself is never stored, only its hash). */
export interface SessionRecord {
  id: string;
  tokenHash: string;
  accountId: string;
  expiresAt: number;
  absoluteExpiresAt: number;
  endedAt: number | null;
  createdAt: number;
}

/** Login codes, accounts and sessions. */
export interface AccountStore {
  /** The newest login code for an e-mail address. */
  latestLoginCode(email: string): Promise<LoginCodeRecord | undefined>;
  /** Stores a new code; earlier unused codes for the address stop working. */
  insertLoginCode(rec: LoginCodeRecord): Promise<void>;
  /** Counts one try if fewer than `max` were made (atomically); false when the code is out of tries. */
  reserveCodeAttempt(id: string, max: number): Promise<boolean>;
  /** Gives back a try reserved by a successful attempt (so only wrong tries count). */
  releaseCodeAttempt(id: string): Promise<void>;
  /** Marks a code used if it was unused; false if it was already used. */
  consumeLoginCode(id: string, now: number): Promise<boolean>;
  /**
   * Counts one hit on `key` in its fixed window (`windowMs`, starting with the first hit after
   * the previous window ended) and says whether it is within `limit`. Atomic: concurrent hits,
   * from any process sharing the database, are counted exactly. Refused hits count too.
   */
  hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<RateLimitHit>;
  /**
   * Gives back one allowed hit on `key` that was not spent after all (a later check refused the
   * request), in the window ending at `windowEnd` (the hit's `now + retryAfterMs`) only: once
   * that window has been replaced, nothing changes. Never below zero.
   */
  releaseRateLimit(key: string, windowEnd: number): Promise<void>;
  /** Deletes rate-limit windows that ended before `olderThan`; returns the count. */
  purgeRateLimits(olderThan: number): Promise<number>;
  /** The account for an e-mail address, created (with `newId`) if none exists. */
  findOrCreateAccount(email: string, newId: string, now: number): Promise<AccountRecord>;
  getAccount(id: string): Promise<AccountRecord | undefined>;
  /** The onboarded accounts with the lowest credit balances (metrics). */
  lowestBalances(limit: number): Promise<{ accountId: string; creditsMicros: number }[]>;
  updateProfile(id: string, firstName: string, lastName: string): Promise<void>;
  /** Completes onboarding once; false if it was already complete. */
  completeOnboarding(id: string, v: { accountType: string; rootPublicKey: string; rootSecretEnc: Uint8Array; creditsMicros: number }): Promise<boolean>;
  /** Creates a session; when `replaces` is given, that session ends in the same transaction. */
  createSession(rec: SessionRecord, replaces?: string): Promise<void>;
  getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined>;
  endSession(id: string, now: number): Promise<void>;
}

/** A platform and its connection, as registered. */
export interface PlatformRecord {
  id: string;
  accountId: string;
  name: string;
  description: string;
  surfaceType: string;
  publishState: string;
  defaultAllowedScopes: string[];
  callbackUrl: string | null;
  callbackDisabledAt: number | null;
  signingSecretEnc: Uint8Array;
  webhookSecretEnc: Uint8Array;
  expiresAt: number;
  createdAt: number;
}

/** A connection (created together with its platform). */
export interface ConnectionRecord {
  id: string;
  platformId: string;
  accountId: string;
  allowedScopes: string[];
  status: 'active' | 'removed';
  removedAt: number | null;
  createdAt: number;
}

/** An API key row (digest only). */
export interface ApiKeyRecord {
  id: string;
  connectionId: string;
  prefix: string;
  digest: string;
  status: 'active' | 'rotated' | 'removed';
  /** For rotated keys: end of the grace period (null = no grace). */
  validUntil: number | null;
  createdAt: number;
}

/** An agent with its custodial key. */
export interface AgentRecord {
  id: string;
  connectionId: string;
  accountId: string;
  name: string;
  agentType: string;
  custodyMode: string;
  publicKey: string;
  secretEnc: Uint8Array;
  createdAt: number;
}

/** A certificate revoked as a side effect (connection removal). */
export interface RevokedCert { certId: string; agentId: string }
/** A pending request denied as a side effect (connection removal). */
export interface DeniedRequest { requestId: string; agentId: string }

/** Platforms, connections, API keys and agents. */
export interface PlatformStore {
  countPlatforms(accountId: string): Promise<number>;
  /**
   * Creates platform + connection + API key + `connection.created` outbox event atomically,
   * unless the account already has `maxPlatforms` platforms (checked in the same transaction);
   * returns false then.
   */
  createPlatform(p: PlatformRecord, c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput | null, maxPlatforms: number): Promise<boolean>;
  getPlatform(id: string): Promise<PlatformRecord | undefined>;
  listPlatforms(accountId: string): Promise<PlatformRecord[]>;
  setCallbackUrl(platformId: string, url: string | null): Promise<void>;
  /** Marks the callback disabled (receiver answered 410). */
  disableCallback(platformId: string, now: number): Promise<void>;
  getConnection(id: string): Promise<ConnectionRecord | undefined>;
  listConnections(accountId: string): Promise<ConnectionRecord[]>;
  /** The API key row with this prefix (any status). */
  getApiKeyByPrefix(prefix: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Rotates atomically: the active key becomes `rotated` (valid until
   * `graceUntil`, null = stops at once), `next` becomes active, and the event
   * built from the previous key's prefix is enqueued. Returns the previous
   * key, or undefined when the connection is not active.
   */
  rotateApiKey(connectionId: string, next: ApiKeyRecord, graceUntil: number | null, event: (previousPrefix: string | null) => OutboxEventInput): Promise<ApiKeyRecord | undefined>;
  /**
   * Removes a connection: its keys stop working, its active certificates are
   * revoked, its pending requests are denied, and the events built by `events`
   * are enqueued, all atomically.
   * Returns the revoked certificates, or undefined if it was not active.
   */
  removeConnection(connectionId: string, now: number, events: (revoked: RevokedCert[], denied: DeniedRequest[]) => OutboxEventInput[]): Promise<RevokedCert[] | undefined>;
  createAgent(a: AgentRecord): Promise<void>;
  getAgent(id: string): Promise<AgentRecord | undefined>;
  listAgents(filter: { accountId?: string; connectionId?: string }): Promise<AgentRecord[]>;
}

/** A delegation request. States: `pending`, `approved`, `denied`. */
export interface DelegationRequestRecord {
  id: string;
  connectionId: string;
  accountId: string;
  agentId: string;
  requestedScopes: string[];
  state: 'pending' | 'approved' | 'denied';
  certId: string | null;
  decidedAt: number | null;
  createdAt: number;
}

/** The columns of a certificate that present reads ({@link DelegationStore.activeCertificateForAgent}). */
export type ActiveCertificate = Pick<CertificateRecord, 'id' | 'agentId' | 'certSha256' | 'status' | 'expiresAt'>;

/** A delegation certificate. */
export interface CertificateRecord {
  id: string;
  requestId: string;
  accountId: string;
  connectionId: string;
  agentId: string;
  approvedScope: string[];
  constraints: unknown;
  /** The signed certificate, canonical JSON text. */
  certJson: string;
  certSha256: string;
  status: 'approved' | 'revoked';
  issuedAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  revokeReason: string | null;
}

/** Delegation requests and certificates. */
export interface DelegationStore {
  createRequest(r: DelegationRequestRecord): Promise<void>;
  getRequest(id: string): Promise<DelegationRequestRecord | undefined>;
  listRequests(accountId: string): Promise<DelegationRequestRecord[]>;
  /** Approves a pending request and stores the certificate; false if it was not pending. */
  approveRequest(requestId: string, cert: CertificateRecord, event: OutboxEventInput | null): Promise<boolean>;
  /** Denies a pending request; false if it was not pending. */
  denyRequest(requestId: string, now: number, event: OutboxEventInput | null): Promise<boolean>;
  getCertificate(id: string): Promise<CertificateRecord | undefined>;
  listCertificates(accountId: string): Promise<CertificateRecord[]>;
  /** The newest `approved` certificate of an agent (expiry not checked): only what present needs (no certificate JSON). */
  activeCertificateForAgent(agentId: string): Promise<ActiveCertificate | undefined>;
  /** Revokes; returns false when it was already revoked. */
  revokeCertificate(id: string, reason: string, now: number, event: OutboxEventInput | null): Promise<boolean>;
  /** Ids of all revoked certificates (warms the revocation cache at startup). */
  revokedCertificateIds(): Promise<string[]>;
}

/** The whole store. */
export interface Store {
  readonly accounts: AccountStore;
  readonly platforms: PlatformStore;
  readonly delegations: DelegationStore;
  readonly proofs: ProofStore;
  readonly outbox: OutboxStore;
  /** Step-up approvals (approval-types.ts). */
  readonly approvals: ApprovalStore;
  /** Usage counters of budgets and rate limits (approval-types.ts). */
  readonly usage: UsageStore;
  readonly audit: AuditStore;
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
