/**
 * The store interface (types.ts), by subject: accounts, e-mail login codes,
 * sessions and the login rate limits.
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
  /** An organisation's name (`accountType` `organization`); null for a person. */
  orgName?: string | null;
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
  /** The organisation the session acts in; null or absent: the person's own workspace. */
  workspaceId?: string | null;
}

/** Result of {@link AccountStore.hitRateLimit}. */
export interface RateLimitHit {
  /** Whether this hit is within the limit. */
  allowed: boolean;
  /** Hits in the current window, this one included. */
  count: number;
  /** Milliseconds until the window ends. */
  retryAfterMs: number;
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
  completeOnboarding(
    id: string, v: { accountType: string; rootPublicKey: string; rootSecretEnc: Uint8Array; creditsMicros: number },
  ): Promise<boolean>;
  /** Creates a session; when `replaces` is given, that session ends in the same transaction. */
  createSession(rec: SessionRecord, replaces?: string): Promise<void>;
  getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined>;
  endSession(id: string, now: number): Promise<void>;
}
