/**
 * In-memory caches of the decision path, all bounded with lru-cache:
 *
 * - the revocation cache (`certId → status`), which revoke updates in the
 *   same process before the revoke call returns;
 * - the API-key cache ({@link ApiKeyCache}): successful authentications for
 *   a few seconds, dropped by key rotation and connection removal before
 *   they return;
 * - the certificate-verification cache, keyed by the certificate's SHA-256,
 *   holding the parsed certificate whose root signature verified;
 * - prepared verifiers of account root keys (imported KeyObjects); proof
 *   signatures are checked and made by the crypto pool (`crypto-pool.ts`),
 *   which caches the agents' verifiers and signers itself.
 *
 * No cache can turn a revoked certificate into an allow: a miss reads the
 * store, a stale "approved" never overwrites a "revoked", and the verify
 * transaction re-reads the status before it commits an allow.
 */
import { LRUCache } from 'lru-cache';
import type { HybridVerifier } from '../../src/crypto/hybrid.js';
import type { DelegationCertificate } from '../../src/certificate.js';
import type { ApiKeyAuth } from '../http/auth.js';

/** Cache sizes (entries). */
export const CACHE_SIZES = { status: 100_000, certs: 10_000, verifiers: 10_000, apiKeys: 10_000 } as const;

/** How long a successful API-key authentication is reused (ms, monotonic time). */
export const API_KEY_CACHE_TTL_MS = 5_000;

interface ApiKeyEntry {
  readonly auth: ApiKeyAuth;
  /** The key's own end of life (service clock, ms): its lifetime, or a rotated key's grace. */
  readonly validUntil: number | null;
  /** End of the cache lifetime (`performance.now()` ms). */
  readonly until: number;
}

/**
 * Successful API-key authentications by key digest, for {@link API_KEY_CACHE_TTL_MS}
 * and never past the key's `validUntil`. Rotation and connection removal call
 * {@link invalidateConnection} before they return; an authentication that read the
 * store before such a call is not cached after it (generation check). Failures are
 * never cached.
 */
export class ApiKeyCache {
  private readonly entries = new LRUCache<string, ApiKeyEntry>({ max: CACHE_SIZES.apiKeys });
  private gen = 0;

  /** Bumped by every invalidation; pass the value read before the store lookup to {@link set}. */
  get generation(): number {
    return this.gen;
  }

  /** The cached authentication for `digest`, if still fresh and the key still valid at `now` (service clock). */
  get(digest: string, now: number): ApiKeyAuth | undefined {
    const e = this.entries.get(digest);
    if (!e) return undefined;
    if (performance.now() >= e.until || (e.validUntil !== null && e.validUntil <= now)) {
      this.entries.delete(digest);
      return undefined;
    }
    return e.auth;
  }

  /** Caches a successful authentication, unless an invalidation happened since `generation` was read. */
  set(digest: string, auth: ApiKeyAuth, validUntil: number | null, generation: number): void {
    if (generation !== this.gen) return;
    this.entries.set(digest, { auth, validUntil, until: performance.now() + API_KEY_CACHE_TTL_MS });
  }

  /** Drops every cached key of a connection (rotation, removal). */
  invalidateConnection(connectionId: string): void {
    this.gen++;
    for (const [k, e] of this.entries.entries()) if (e.auth.connectionId === connectionId) this.entries.delete(k);
  }

  /** Drops everything. */
  clear(): void {
    this.gen++;
    this.entries.clear();
  }
}

/** The decision caches of one sidecar instance. */
export class DecisionCaches {
  private readonly status = new LRUCache<string, 'approved' | 'revoked'>({ max: CACHE_SIZES.status });
  /** Verified certificates by `cert_sha256`. */
  readonly certs = new LRUCache<string, DelegationCertificate>({ max: CACHE_SIZES.certs });
  /** Successful API-key authentications (a few seconds). */
  readonly apiKeys = new ApiKeyCache();
  /** Prepared verifiers (certificate issuers' root keys) by public-key JSON text. */
  readonly verifiers = new LRUCache<string, HybridVerifier>({ max: CACHE_SIZES.verifiers });

  /** Cached status of a certificate, if known. */
  statusOf(certId: string): 'approved' | 'revoked' | undefined {
    return this.status.get(certId);
  }

  /** Records a status read from the store; never overwrites a known revocation. */
  noteStatus(certId: string, status: 'approved' | 'revoked'): void {
    if (status === 'approved' && this.status.has(certId)) return;
    this.status.set(certId, status);
  }

  /** Marks a certificate revoked (called by revoke before it returns). */
  markRevoked(certId: string): void {
    this.status.set(certId, 'revoked');
  }
}
