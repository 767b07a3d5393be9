/**
 * {@link DelegationStore} on either engine: delegation requests and
 * certificates, with their outbox events in the same transaction. On
 * PostgreSQL a revocation notifies every replica on commit (the trigger of
 * postgres/migrations.ts).
 */
import { SEQ, all, get, pick, run, sql } from './core.js';
import type { Runner, Work } from './core.js';
import { insertOutboxEvent } from './outbox.js';
import type {
  ActiveCertificate, CertificateRecord, DelegationRequestRecord, DelegationStore, OutboxEventInput, RevokedCertificate,
} from '../types.js';
import { certFromRow, constraintsText, requestFromRow } from '../rows.js';
import type { CertRow, RequestRow } from '../rows.js';

/** A conditional state change and, when it changed the row, its event. */
function* changeWithEvent(change: Work<number>, event: OutboxEventInput | null): Work<boolean> {
  if ((yield* change) !== 1) return false;
  if (event) yield* insertOutboxEvent(event);
  return true;
}

/** A row lock that a concurrent revocation of the same row waits for (PostgreSQL; SQLite writes one at a time). */
const FOR_SHARE = pick('', ' FOR SHARE');

/** Inserts a certificate row. */
function insertCertificate(c: CertificateRecord): Work<number> {
  return run(sql`INSERT INTO certificates (id, request_id, account_id, connection_id, agent_id, approved_scope,
    constraints, cert_json, cert_sha256, status, issued_at, expires_at, revoked_at, revoke_reason,
    parent_cert_id, depth, max_delegation_depth)
    VALUES (${c.id}, ${c.requestId}, ${c.accountId}, ${c.connectionId}, ${c.agentId},
    ${JSON.stringify(c.approvedScope)}, ${constraintsText(c.constraints)}, ${c.certJson}, ${c.certSha256},
    ${c.status}, ${c.issuedAt}, ${c.expiresAt}, ${c.revokedAt}, ${c.revokeReason},
    ${c.parentCertId}, ${c.depth}, ${c.maxDelegationDepth})`);
}

/** Inserts a delegation request row. */
function insertRequest(q: DelegationRequestRecord): Work<number> {
  return run(sql`INSERT INTO delegation_requests (id, connection_id, account_id, agent_id,
    requested_scopes, proposed_constraints, state, cert_id, decided_at, created_at)
    VALUES (${q.id}, ${q.connectionId}, ${q.accountId}, ${q.agentId}, ${JSON.stringify(q.requestedScopes)},
    ${constraintsText(q.proposedConstraints)}, ${q.state}, ${q.certId}, ${q.decidedAt}, ${q.createdAt})`);
}

type Revoked = { id: string; agent_id: string; connection_id: string; depth: number };
const revokedOf = (r: Revoked): RevokedCertificate => ({
  id: r.id, agentId: r.agent_id, connectionId: r.connection_id, depth: Number(r.depth) });

/** Delegation requests and certificates. */
export class SqlDelegationStore implements DelegationStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async createRequest(q: DelegationRequestRecord): Promise<void> {
    await this.r.write(insertRequest(q));
  }

  async getRequest(id: string): Promise<DelegationRequestRecord | undefined> {
    const row = await this.r.read(get<RequestRow>(sql`SELECT * FROM delegation_requests WHERE id = ${id}`));
    return row && requestFromRow(row);
  }

  async listRequests(accountId: string): Promise<DelegationRequestRecord[]> {
    return (await this.r.read(all<RequestRow>(sql`SELECT * FROM delegation_requests WHERE account_id = ${accountId}
      ORDER BY created_at DESC, ${SEQ} DESC`)))
      .map(requestFromRow);
  }

  async approveRequest(requestId: string, c: CertificateRecord, event: OutboxEventInput | null): Promise<boolean> {
    return this.r.tx((function* () {
      const approve = run(sql`UPDATE delegation_requests
        SET state = 'approved', cert_id = ${c.id}, decided_at = ${c.issuedAt}
        WHERE id = ${requestId} AND state = 'pending'`);
      if ((yield* approve) !== 1) return false;
      yield* insertCertificate(c);
      if (event) yield* insertOutboxEvent(event);
      return true;
    })());
  }

  async denyRequest(requestId: string, now: number, event: OutboxEventInput | null): Promise<boolean> {
    return this.r.tx(changeWithEvent(run(sql`UPDATE delegation_requests SET state = 'denied', decided_at = ${now}
      WHERE id = ${requestId} AND state = 'pending'`), event));
  }

  async getCertificate(id: string): Promise<CertificateRecord | undefined> {
    const row = await this.r.read(get<CertRow>(sql`SELECT * FROM certificates WHERE id = ${id}`));
    return row && certFromRow(row);
  }

  async listCertificates(accountId: string): Promise<CertificateRecord[]> {
    return (await this.r.read(all<CertRow>(sql`SELECT * FROM certificates WHERE account_id = ${accountId}
      ORDER BY issued_at DESC, ${SEQ} DESC`)))
      .map(certFromRow);
  }

  async activeCertificateForAgent(agentId: string): Promise<ActiveCertificate | undefined> {
    // Not SELECT *: the certificate JSON (~10 KB) is not needed on present's path.
    type Active = Pick<CertRow, 'id' | 'agent_id' | 'cert_sha256' | 'status' | 'expires_at'>;
    const row = await this.r.read(get<Active>(sql`SELECT id, agent_id, cert_sha256,
      status, expires_at FROM certificates WHERE agent_id = ${agentId} AND status = 'approved'
        ORDER BY issued_at DESC, ${SEQ} DESC LIMIT 1`));
    return row && {
      id: row.id, agentId: row.agent_id, certSha256: row.cert_sha256, status: row.status, expiresAt: row.expires_at,
    };
  }

  async revokeCertificate(id: string, reason: string, now: number, event: OutboxEventInput | null): Promise<boolean> {
    return this.r.tx(changeWithEvent(run(sql`UPDATE certificates
      SET status = 'revoked', revoked_at = ${now}, revoke_reason = ${reason}
      WHERE id = ${id} AND status = 'approved'`), event));
  }

  async issueSubDelegation(q: DelegationRequestRecord, c: CertificateRecord,
    event: OutboxEventInput | null): Promise<boolean> {
    if (c.parentCertId === null) throw new TypeError('issueSubDelegation: the certificate names no parent');
    const parentId = c.parentCertId;
    return this.r.tx((function* () {
      // Locks the parent row: a revocation of it waits for this transaction, or has already revoked it.
      const parent = yield* get<{ status: string }>(sql`SELECT status FROM certificates
        WHERE id = ${parentId}${FOR_SHARE}`);
      if (parent?.status !== 'approved') return false;
      yield* insertRequest(q);
      yield* insertCertificate(c);
      if (event) yield* insertOutboxEvent(event);
      return true;
    })());
  }

  async revokeTree(id: string, reason: string, now: number,
    eventFor: (c: RevokedCertificate, reason: string) => OutboxEventInput | null): Promise<RevokedCertificate[]> {
    return this.r.tx((function* () {
      const revoked: RevokedCertificate[] = [];
      const revoke = function* (rowId: string, why: string): Work<RevokedCertificate | null> {
        const changed = yield* run(sql`UPDATE certificates SET status = 'revoked', revoked_at = ${now},
          revoke_reason = ${why} WHERE id = ${rowId} AND status = 'approved'`);
        if (changed !== 1) return null;
        const row = (yield* get<Revoked>(sql`SELECT id, agent_id, connection_id, depth FROM certificates
          WHERE id = ${rowId}`))!;
        const r = revokedOf(row);
        const event = eventFor(r, why);
        if (event) yield* insertOutboxEvent(event);
        revoked.push(r);
        return r;
      };
      yield* revoke(id, reason);
      // Breadth first; a chain is at most MAX_DELEGATION_DEPTH deep. The parent's row lock (held
      // since its update) makes a concurrent issueSubDelegation under it wait, or be seen here.
      let frontier = [id];
      for (let level = 0; frontier.length > 0 && level <= 16; level++) {
        const next: string[] = [];
        for (const parent of frontier) {
          // Every child, revoked already or not: an approved certificate below a revoked one is revoked too.
          const children = yield* all<{ id: string }>(sql`SELECT id FROM certificates
            WHERE parent_cert_id = ${parent} ORDER BY issued_at, id`);
          for (const child of children) {
            yield* revoke(child.id, 'ancestor_revoked');
            next.push(child.id);
          }
        }
        frontier = next;
      }
      return revoked;
    })());
  }

  async childCertificates(id: string): Promise<CertificateRecord[]> {
    return (await this.r.read(all<CertRow>(sql`SELECT * FROM certificates WHERE parent_cert_id = ${id}
      ORDER BY issued_at, ${SEQ}`))).map(certFromRow);
  }

  async revokedCertificateIds(): Promise<string[]> {
    return (await this.r.read(all<{ id: string }>(sql`SELECT id FROM certificates
      WHERE status = 'revoked'`))).map((x) => x.id);
  }
}
