/**
 * In-memory caches of the decision path, all bounded with lru-cache:
 *
 * - the revocation cache (`certId → status`), which revoke updates in the
 *   same process before the revoke call returns;
 * - the certificate-verification cache, keyed by the certificate's SHA-256,
 *   holding the parsed certificate whose root signature verified;
 * - prepared verifiers and signers (imported KeyObjects).
 *
 * No cache can turn a revoked certificate into an allow: a miss reads the
 * store, a stale "approved" never overwrites a "revoked", and the verify
 * transaction re-reads the status before it commits an allow.
 */
import { LRUCache } from 'lru-cache';
import type { HybridSigner, HybridVerifier } from '../../src/crypto/hybrid.ts';
import type { DelegationCertificate } from '../../src/certificate.ts';

/** Cache sizes (entries). */
export const CACHE_SIZES = { status: 100_000, certs: 10_000, verifiers: 10_000, signers: 2_000 } as const;

/** The decision caches of one sidecar instance. */
export class DecisionCaches {
  private readonly status = new LRUCache<string, 'approved' | 'revoked'>({ max: CACHE_SIZES.status });
  /** Verified certificates by `cert_sha256`. */
  readonly certs = new LRUCache<string, DelegationCertificate>({ max: CACHE_SIZES.certs });
  /** Prepared verifiers by public-key JSON text. */
  readonly verifiers = new LRUCache<string, HybridVerifier>({ max: CACHE_SIZES.verifiers });
  /** Prepared custodial signers by agent id. */
  readonly signers = new LRUCache<string, HybridSigner>({ max: CACHE_SIZES.signers });

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
