/**
 * The store interface: every read and write the sidecar makes to durable
 * state, as async domain operations. It names no SQLite type, so that a
 * PostgreSQL store can implement the same interface later.
 *
 * Times are Unix milliseconds. JSON-ish fields are already parsed. Sealed
 * (encrypted) values are opaque `Uint8Array`s; the store never sees a
 * plaintext secret or private key.
 */

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

/** A lifecycle event to put in the webhook outbox in the same transaction as its state change. */
export interface OutboxEventInput {
  /** Delivery id (UUID), also inside the sealed body. */
  id: string;
  accountId: string;
  platformId: string;
  connectionId: string | null;
  eventType: string;
  /** Sealed JSON body (aad = delivery id). */
  bodyEnc: Uint8Array;
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

/** A challenge row; the `id` is the SHA-256 of the challenge value. */
export interface ChallengeRecord {
  id: string;
  audienceConnectionId: string;
  accountId: string;
  expiresAt: number;
  presentedAt: number | null;
  consumedAt: number | null;
  createdAt: number;
}

/** An audit event. */
export interface AuditEventRecord {
  id: string;
  seq?: number;
  accountId: string;
  eventType: 'proof.presented' | 'proof.verified' | 'proof.rejected';
  connectionId: string | null;
  agentId: string | null;
  certId: string | null;
  requiredScope: string | null;
  details: Record<string, unknown>;
  createdAt: number;
}

/** What a verify commits in one transaction. */
export interface DecisionCommit {
  challengeId: string;
  audienceConnectionId: string;
  now: number;
  accountId: string;
  priceMicros: number;
  decision: 'allow' | 'deny';
  /** For an allow, the certificate whose status is re-read inside the transaction. */
  certId: string | null;
  audit: AuditEventRecord;
}

/** Result of {@link ProofStore.commitDecision}. */
export type DecisionCommitResult = 'committed' | 'invalid_challenge' | 'credits_exhausted' | 'certificate_revoked';

/** Challenges, presentations, verify decisions, audit and metering. */
export interface ProofStore {
  insertChallenge(c: ChallengeRecord): Promise<void>;
  getChallenge(id: string): Promise<ChallengeRecord | undefined>;
  /** Marks a live challenge presented and records `proof.presented`; false if it is unknown, presented, consumed or expired. */
  presentChallenge(id: string, now: number, audit: AuditEventRecord): Promise<boolean>;
  /** Balance check without debit (fast pre-check). */
  creditsOf(accountId: string): Promise<number>;
  /**
   * One transaction: consume the challenge (must be unconsumed, unexpired and
   * issued to the audience), debit the price, count the call and append the
   * audit row. Nothing is written unless everything is. An allow whose
   * certificate is no longer `approved` commits nothing and returns
   * `certificate_revoked`.
   */
  commitDecision(c: DecisionCommit): Promise<DecisionCommitResult>;
  /**
   * For verify outcomes that are not decisions (400s): debit the call and,
   * when `challengeId` is given, consume that challenge too; no audit row.
   */
  consumeAndDebit(challengeId: string | null, audienceConnectionId: string, now: number, accountId: string, priceMicros: number): Promise<DecisionCommitResult>;
  /** Audit read, newest first; `before` is a seq cursor. */
  listAudit(q: { accountId: string; limit: number; before?: number; eventType?: string; agentId?: string }): Promise<AuditEventRecord[]>;
  /** Deletes challenges that are consumed or expired before `olderThan`; returns the count. */
  purgeChallenges(olderThan: number): Promise<number>;
  /** Deletes audit rows older than `olderThan` (retention); returns the count. */
  purgeAudit(olderThan: number): Promise<number>;
}

/** A claimed delivery, ready to send. */
export interface ClaimedDelivery {
  id: string;
  platformId: string;
  eventType: string;
  bodyEnc: Uint8Array;
  /** Attempts made before this one. */
  attempts: number;
  createdAt: number;
  callbackUrl: string | null;
  callbackDisabled: boolean;
  webhookSecretEnc: Uint8Array;
}

/** A delivery as listed to the account holder. */
export interface DeliveryRecord {
  id: string;
  platformId: string;
  connectionId: string | null;
  eventType: string;
  state: 'pending' | 'delivered' | 'dead' | 'disabled';
  attempts: number;
  nextAttemptAt: number;
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: number | null;
  createdAt: number;
  seq: number;
}

/** One delivery attempt. */
export interface DeliveryAttemptRecord {
  attempt: number;
  attemptedAt: number;
  status: number | null;
  error: string | null;
  durationMs: number;
}

/** The webhook outbox (filled by the other stores inside their transactions). */
export interface OutboxStore {
  /** Leases up to `limit` due deliveries until `now + leaseMs`. */
  claimDue(now: number, limit: number, leaseMs: number): Promise<ClaimedDelivery[]>;
  /**
   * Records an attempt and moves the delivery: `delivered`, `pending` with a
   * next attempt time, `dead` (schedule exhausted) or `disabled` (410).
   */
  recordAttempt(id: string, a: DeliveryAttemptRecord, next: { state: DeliveryRecord['state']; nextAttemptAt: number }): Promise<void>;
  /** Releases a lease without recording an attempt (shutdown). */
  release(id: string): Promise<void>;
  /**
   * Releases every lease of a pending delivery, without recording attempts;
   * returns how many were released. Called once when the worker starts: one
   * sidecar process owns the database, so at start nothing can be in flight
   * and any lease left was held by a process that died (kill -9, crash).
   */
  releaseAllLeases(): Promise<number>;
  listDeliveries(q: { accountId: string; platformId?: string; state?: string; limit: number; before?: number }): Promise<DeliveryRecord[]>;
  getDelivery(id: string): Promise<(DeliveryRecord & { accountId: string }) | undefined>;
  listAttempts(deliveryId: string): Promise<DeliveryAttemptRecord[]>;
  /** Makes a delivery due now again (keeps its id and body). */
  redeliver(id: string, now: number): Promise<void>;
  /** Depth (pending) and the creation time of the oldest pending delivery. */
  stats(): Promise<{ pending: number; oldestPendingAt: number | null }>;
}

/** The whole store. */
export interface Store {
  readonly accounts: AccountStore;
  readonly platforms: PlatformStore;
  readonly delegations: DelegationStore;
  readonly proofs: ProofStore;
  readonly outbox: OutboxStore;
  /** Readiness: the store answers and migrations are applied. */
  ping(): Promise<{ ok: boolean; schemaVersion: number; expectedVersion: number }>;
  /** Online backup to a file (SQLite backup API or the engine's equivalent). */
  backup(file: string): Promise<void>;
  close(): Promise<void>;
}
