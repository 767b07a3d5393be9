/**
 * In-memory caches of the decision path, all bounded with lru-cache:
 *
 * - the revocation cache (`certId → status`), which revoke updates in the
 *   same process before the revoke call returns;
 * - the API-key cache (`ApiKeyCache`, `auth/api-key.ts`): successful
 *   authentications for a few seconds, dropped by key rotation and connection
 *   removal before they return;
 * - the certificate-verification cache, keyed by the certificate's SHA-256,
 *   holding the parsed certificate whose root signature verified;
 * - prepared verifiers of account root keys (imported KeyObjects); proof
 *   signatures are checked and made by the crypto pool (`crypto/pool.ts`),
 *   which caches the agents' verifiers and signers itself.
 *
 * No cache can turn a revoked certificate into an allow: a miss reads the
 * store, a stale "approved" never overwrites a "revoked", and the verify
 * transaction re-reads the status before it commits an allow.
 */
import { LRUCache } from 'lru-cache';
import type { HybridVerifier } from '../../src/crypto/hybrid.js';
import type { DelegationCertificate } from '../../src/certificate.js';
import { API_KEY_CACHE_SIZE, ApiKeyCache } from '../auth/api-key.js';

/** Cache sizes (entries). */
export const CACHE_SIZES = { status: 100_000, certs: 10_000, verifiers: 10_000, apiKeys: API_KEY_CACHE_SIZE } as const;

/** The decision caches of one sidecar instance. */
export class DecisionCaches {
  /** Read-through mode ({@link suspend}). */
  private suspended = false;
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

  /** Records a status read from the store; never overwrites a known revocation; keeps no approval while suspended. */
  noteStatus(certId: string, status: 'approved' | 'revoked'): void {
    if (status === 'approved' && (this.suspended || this.status.has(certId))) return;
    this.status.set(certId, status);
  }

  /** Marks a certificate revoked (called by revoke before it returns, and by the store's change feed). */
  markRevoked(certId: string): void {
    this.status.set(certId, 'revoked');
  }

  /**
   * Read-through mode, while the store's change feed (other replicas' changes) is down: known
   * approvals and cached API keys are dropped and not kept again; known revocations stay.
   */
  suspend(): void {
    this.suspended = true;
    this.apiKeys.suspended = true;
    this.apiKeys.clear();
    for (const [id, s] of this.status.entries()) if (s === 'approved') this.status.delete(id);
  }

  /** Leaves read-through mode after the feed resynced: `revokedIds` are every revoked certificate. */
  resume(revokedIds: Iterable<string>): void {
    for (const id of revokedIds) this.status.set(id, 'revoked');
    this.suspended = false;
    this.apiKeys.suspended = false;
  }
}
