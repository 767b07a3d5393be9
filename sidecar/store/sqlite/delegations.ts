/**
 * SQLite implementation of {@link DelegationStore}: delegation requests and
 * certificates, with their outbox events written in the same transaction.
 */
import type { Db } from './db.js';
import { insertOutboxEvent } from './outbox.js';
import type { ActiveCertificate, CertificateRecord, DelegationRequestRecord, DelegationStore, OutboxEventInput } from '../types.js';
import { certFromRow, constraintsText, requestFromRow } from '../rows.js';
import type { CertRow, RequestRow } from '../rows.js';


/** Delegation requests and certificates on SQLite. */
export class SqliteDelegationStore implements DelegationStore {
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  async createRequest(r: DelegationRequestRecord): Promise<void> {
    this.db.tx(() => {
      this.db.run('INSERT INTO delegation_requests (id, connection_id, account_id, agent_id, requested_scopes, state, cert_id, decided_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        r.id, r.connectionId, r.accountId, r.agentId, JSON.stringify(r.requestedScopes), r.state, r.certId, r.decidedAt, r.createdAt);
    });
  }

  async getRequest(id: string): Promise<DelegationRequestRecord | undefined> {
    const r = this.db.get<RequestRow>('SELECT * FROM delegation_requests WHERE id = ?', id);
    return r && requestFromRow(r);
  }

  async listRequests(accountId: string): Promise<DelegationRequestRecord[]> {
    return this.db.all<RequestRow>('SELECT * FROM delegation_requests WHERE account_id = ? ORDER BY created_at DESC, rowid DESC', accountId).map(requestFromRow);
  }

  async approveRequest(requestId: string, c: CertificateRecord, event: OutboxEventInput | null): Promise<boolean> {
    return this.db.tx(() => {
      if (this.db.run("UPDATE delegation_requests SET state = 'approved', cert_id = ?, decided_at = ? WHERE id = ? AND state = 'pending'", c.id, c.issuedAt, requestId) !== 1) return false;
      this.db.run(`INSERT INTO certificates (id, request_id, account_id, connection_id, agent_id, approved_scope, constraints, cert_json, cert_sha256,
        status, issued_at, expires_at, revoked_at, revoke_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      c.id, c.requestId, c.accountId, c.connectionId, c.agentId, JSON.stringify(c.approvedScope),
      constraintsText(c.constraints),
      c.certJson, c.certSha256, c.status, c.issuedAt, c.expiresAt, c.revokedAt, c.revokeReason);
      if (event) insertOutboxEvent(this.db, event);
      return true;
    });
  }

  async denyRequest(requestId: string, now: number, event: OutboxEventInput | null): Promise<boolean> {
    return this.db.tx(() => {
      if (this.db.run("UPDATE delegation_requests SET state = 'denied', decided_at = ? WHERE id = ? AND state = 'pending'", now, requestId) !== 1) return false;
      if (event) insertOutboxEvent(this.db, event);
      return true;
    });
  }

  async getCertificate(id: string): Promise<CertificateRecord | undefined> {
    const r = this.db.get<CertRow>('SELECT * FROM certificates WHERE id = ?', id);
    return r && certFromRow(r);
  }

  async listCertificates(accountId: string): Promise<CertificateRecord[]> {
    return this.db.all<CertRow>('SELECT * FROM certificates WHERE account_id = ? ORDER BY issued_at DESC, rowid DESC', accountId).map(certFromRow);
  }

  async activeCertificateForAgent(agentId: string): Promise<ActiveCertificate | undefined> {
    // Not SELECT *: the certificate JSON (~10 KB) is not needed on present's path.
    const r = this.db.get<Pick<CertRow, 'id' | 'agent_id' | 'cert_sha256' | 'status' | 'expires_at'>>(
      "SELECT id, agent_id, cert_sha256, status, expires_at FROM certificates WHERE agent_id = ? AND status = 'approved' ORDER BY issued_at DESC, rowid DESC LIMIT 1", agentId);
    return r && { id: r.id, agentId: r.agent_id, certSha256: r.cert_sha256, status: r.status, expiresAt: r.expires_at };
  }

  async revokeCertificate(id: string, reason: string, now: number, event: OutboxEventInput | null): Promise<boolean> {
    return this.db.tx(() => {
      if (this.db.run("UPDATE certificates SET status = 'revoked', revoked_at = ?, revoke_reason = ? WHERE id = ? AND status = 'approved'", now, reason, id) !== 1) return false;
      if (event) insertOutboxEvent(this.db, event);
      return true;
    });
  }

  async revokedCertificateIds(): Promise<string[]> {
    return this.db.all<{ id: string }>("SELECT id FROM certificates WHERE status = 'revoked'").map((r) => r.id);
  }
}
