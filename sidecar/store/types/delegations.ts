/**
 * The store interface (types.ts), by subject: delegation requests and certificates.
 */
import type { OutboxEventInput } from './outbox.js';

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

/** The columns of a certificate that present reads ({@link DelegationStore.activeCertificateForAgent}). */
export type ActiveCertificate = Pick<CertificateRecord, 'id' | 'agentId' | 'certSha256' | 'status' | 'expiresAt'>;

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
  /**
   * The newest `approved` certificate of an agent (expiry not checked): only what present needs (no certificate JSON).
   */
  activeCertificateForAgent(agentId: string): Promise<ActiveCertificate | undefined>;
  /** Revokes; returns false when it was already revoked. */
  revokeCertificate(id: string, reason: string, now: number, event: OutboxEventInput | null): Promise<boolean>;
  /** Ids of all revoked certificates (warms the revocation cache at startup). */
  revokedCertificateIds(): Promise<string[]>;
}
