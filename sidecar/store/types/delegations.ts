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
  /**
   * The constraints the platform proposed with the request (docs/organisations.md); null: none. An approval keeps
   * them or makes them stricter.
   */
  proposedConstraints: Record<string, unknown> | null;
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
  /** The parent certificate of a sub-delegated one (null: signed by the account holder). */
  parentCertId: string | null;
  /** Depth in its chain: 0 for a certificate the account holder signed. */
  depth: number;
  /** The right to delegate further: levels a chain may go below it (0: none). */
  maxDelegationDepth: number;
}

/** A certificate a chain revocation revoked ({@link DelegationStore.revokeTree}). */
export type RevokedCertificate = Pick<CertificateRecord, 'id' | 'agentId' | 'connectionId' | 'depth'>;

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
  /**
   * Issues a sub-delegated certificate (`cert.parentCertId` set) with its delegation request
   * (recorded `approved`) and event, in one transaction that first locks the parent: false
   * (nothing written) when the parent is no longer `approved`. A concurrent {@link revokeTree}
   * of an ancestor either waits for it and revokes the new certificate too, or is seen by it.
   */
  issueSubDelegation(request: DelegationRequestRecord, cert: CertificateRecord,
    event: OutboxEventInput | null): Promise<boolean>;
  /**
   * Revokes a certificate and every `approved` descendant (its sub-delegations, theirs, …) in one
   * transaction, with one event each (`eventFor`; the named certificate gets `reason`, a
   * descendant `ancestor_revoked`). Returns what it revoked, the named certificate first; a
   * certificate revoked already is not revoked again (no event), but its approved descendants are.
   */
  revokeTree(id: string, reason: string, now: number,
    eventFor: (c: RevokedCertificate, reason: string) => OutboxEventInput | null): Promise<RevokedCertificate[]>;
  /** The certificates whose parent is `id` (any status), oldest first. */
  childCertificates(id: string): Promise<CertificateRecord[]>;
  /** Ids of all revoked certificates (warms the revocation cache at startup). */
  revokedCertificateIds(): Promise<string[]>;
}
