/**
 * {@link OrganisationStore} on either engine. Every change that the last-owner rule guards
 * (a role change, a removal) first locks the organisation's `accounts` row (PostgreSQL; SQLite
 * has one writer), so two owners demoting each other at once cannot leave none. Administrative
 * audit rows are appended in the same transaction as the change they record.
 */
import { checkMembershipChange, isRole } from '../../../src/roles.js';
import type { Role } from '../../../src/roles.js';
import { appendAudits } from './audit-append.js';
import { all, bytes, get, run, sql, FOR_UPDATE } from './core.js';
import type { Runner, Work } from './core.js';
import type {
  AcceptOutcome, AuditEventRecord, InvitationRecord, MemberRecord, MembershipOutcome, MembershipRecord, NewOrganisation,
  OrganisationStore,
} from '../types.js';

interface MembershipRow {
  org_id: string; org_name: string | null; account_id: string; role: string; created_at: number;
}
interface MemberRow extends MembershipRow { email: string; first_name: string | null; last_name: string | null }
interface InvitationRow {
  id: string; org_id: string; org_name: string | null; email: string; role: string; invited_by: string; state: string;
  created_at: number; expires_at: number; decided_at: number | null; accepted_by: string | null;
}

const role = (value: string): Role => {
  if (!isRole(value)) throw new TypeError(`memberships: stored role ${JSON.stringify(value)} is not a role`);
  return value;
};
const membership = (r: MembershipRow): MembershipRecord => ({
  orgId: r.org_id, orgName: r.org_name ?? '', accountId: r.account_id, role: role(r.role), createdAt: r.created_at,
});
const invitation = (r: InvitationRow, now?: number): InvitationRecord => ({
  id: r.id, orgId: r.org_id, orgName: r.org_name ?? '', email: r.email, role: role(r.role), invitedBy: r.invited_by,
  state: r.state === 'pending' && now !== undefined && r.expires_at <= now
    ? 'expired' : r.state as InvitationRecord['state'],
  createdAt: r.created_at, expiresAt: r.expires_at, decidedAt: r.decided_at, acceptedBy: r.accepted_by,
});

const MEMBERSHIP = sql`SELECT m.org_id, a.org_name, m.account_id, m.role, m.created_at
  FROM memberships m JOIN accounts a ON a.id = m.org_id`;
const INVITATION = sql`SELECT i.*, a.org_name FROM invitations i JOIN accounts a ON a.id = i.org_id`;

/** Organisations, memberships and invitations. */
export class SqlOrganisationStore implements OrganisationStore {
  private readonly r: Runner;
  private readonly chain: boolean;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(r: Runner, chain = true) {
    this.r = r;
    this.chain = chain;
  }

  async createOrganisation(o: NewOrganisation, audit: readonly AuditEventRecord[]): Promise<void> {
    const chain = this.chain;
    await this.r.tx((function* () {
      yield* run(sql`INSERT INTO accounts (id, email, account_type, onboarding_step, root_public_key, root_secret_enc,
        credits_micros, org_name, created_at)
        VALUES (${o.id}, ${`org:${o.id}`}, 'organization', 'complete', ${o.rootPublicKey}, ${bytes(o.rootSecretEnc)},
          ${o.creditsMicros}, ${o.name}, ${o.now})`);
      yield* run(sql`INSERT INTO memberships (org_id, account_id, role, created_at)
        VALUES (${o.id}, ${o.ownerId}, 'owner', ${o.now})`);
      yield* appendAudits(audit, chain);
    })());
  }

  async membershipsOf(accountId: string): Promise<MembershipRecord[]> {
    return (await this.r.read(all<MembershipRow>(sql`${MEMBERSHIP} WHERE m.account_id = ${accountId}
      ORDER BY a.org_name, m.org_id`))).map(membership);
  }

  async membership(orgId: string, accountId: string): Promise<MembershipRecord | undefined> {
    const row = await this.r.read(get<MembershipRow>(sql`${MEMBERSHIP} WHERE m.org_id = ${orgId}
      AND m.account_id = ${accountId}`));
    return row && membership(row);
  }

  async members(orgId: string): Promise<MemberRecord[]> {
    const rows = await this.r.read(all<MemberRow>(sql`SELECT m.org_id, o.org_name, m.account_id, m.role, m.created_at,
      p.email, p.first_name, p.last_name
      FROM memberships m JOIN accounts o ON o.id = m.org_id JOIN accounts p ON p.id = m.account_id
      WHERE m.org_id = ${orgId} ORDER BY CASE WHEN m.role = 'owner' THEN 0 ELSE 1 END, p.email`));
    return rows.map((r) => ({ ...membership(r), email: r.email, firstName: r.first_name, lastName: r.last_name }));
  }

  async changeRole(orgId: string, accountId: string, to: Role, audit: (m: MembershipRecord) => AuditEventRecord[]):
    Promise<MembershipOutcome> {
    const chain = this.chain;
    return this.r.tx((function* () {
      const m = yield* guarded(orgId, accountId, to);
      if (typeof m === 'string') return m;
      yield* run(sql`UPDATE memberships SET role = ${to} WHERE org_id = ${orgId} AND account_id = ${accountId}`);
      yield* appendAudits(audit(m), chain);
      return 'changed' as const;
    })());
  }

  async removeMember(orgId: string, accountId: string, now: number, audit: (m: MembershipRecord) => AuditEventRecord[]):
    Promise<MembershipOutcome> {
    const chain = this.chain;
    return this.r.tx((function* () {
      const m = yield* guarded(orgId, accountId, null);
      if (typeof m === 'string') return m;
      yield* run(sql`DELETE FROM memberships WHERE org_id = ${orgId} AND account_id = ${accountId}`);
      yield* run(sql`UPDATE sessions SET ended_at = ${now} WHERE account_id = ${accountId} AND workspace_id = ${orgId}
        AND ended_at IS NULL`);
      yield* appendAudits(audit(m), chain);
      return 'changed' as const;
    })());
  }

  async createInvitation(i: InvitationRecord, audit: readonly AuditEventRecord[]):
    Promise<'created' | 'pending_exists' | 'already_member'> {
    const chain = this.chain;
    return this.r.tx((function* () {
      yield* run(sql`UPDATE invitations SET state = 'expired', decided_at = expires_at WHERE org_id = ${i.orgId}
        AND email = ${i.email} AND state = 'pending' AND expires_at <= ${i.createdAt}`);
      const member = yield* get(sql`SELECT 1 AS x FROM memberships m JOIN accounts p ON p.id = m.account_id
        WHERE m.org_id = ${i.orgId} AND p.email = ${i.email}`);
      if (member !== undefined) return 'already_member' as const;
      const made = yield* run(sql`INSERT INTO invitations (id, org_id, email, role, invited_by, state, created_at,
        expires_at) VALUES (${i.id}, ${i.orgId}, ${i.email}, ${i.role}, ${i.invitedBy}, 'pending', ${i.createdAt},
        ${i.expiresAt}) ON CONFLICT DO NOTHING`);
      if (made !== 1) return 'pending_exists' as const;
      yield* appendAudits(audit, chain);
      return 'created' as const;
    })());
  }

  async invitations(orgId: string, now: number): Promise<InvitationRecord[]> {
    return (await this.r.read(all<InvitationRow>(sql`${INVITATION} WHERE i.org_id = ${orgId}
      ORDER BY i.created_at DESC, i.id`))).map((r) => invitation(r, now));
  }

  async invitationsFor(email: string, now: number): Promise<InvitationRecord[]> {
    return (await this.r.read(all<InvitationRow>(sql`${INVITATION} WHERE i.email = ${email} AND i.state = 'pending'
      AND i.expires_at > ${now} ORDER BY i.created_at DESC, i.id`))).map((r) => invitation(r, now));
  }

  async revokeInvitation(orgId: string, id: string, now: number, audit: readonly AuditEventRecord[]): Promise<boolean> {
    const chain = this.chain;
    return this.r.tx((function* () {
      const done = yield* run(sql`UPDATE invitations SET state = 'revoked', decided_at = ${now} WHERE id = ${id}
        AND org_id = ${orgId} AND state = 'pending'`);
      if (done === 1) yield* appendAudits(audit, chain);
      return done === 1;
    })());
  }

  async acceptInvitation(id: string, accountId: string, email: string, now: number,
    audit: (m: MembershipRecord) => AuditEventRecord[]): Promise<AcceptOutcome> {
    const chain = this.chain;
    return this.r.tx((function* (): Work<AcceptOutcome> {
      const row = yield* get<InvitationRow>(sql`SELECT i.*, NULL AS org_name FROM invitations i WHERE i.id = ${id}
        ${FOR_UPDATE}`);
      if (row === undefined || row.email !== email) return { outcome: 'not_found' };
      if (row.state === 'revoked' || row.state === 'accepted') return { outcome: row.state };
      if (row.state !== 'pending' || row.expires_at <= now) return { outcome: 'expired' };
      const made = yield* run(sql`INSERT INTO memberships (org_id, account_id, role, created_at)
        VALUES (${row.org_id}, ${accountId}, ${row.role}, ${now}) ON CONFLICT DO NOTHING`);
      if (made !== 1) return { outcome: 'already_member' };
      yield* run(sql`UPDATE invitations SET state = 'accepted', decided_at = ${now}, accepted_by = ${accountId}
        WHERE id = ${id}`);
      const m = membership((yield* get<MembershipRow>(sql`${MEMBERSHIP} WHERE m.org_id = ${row.org_id}
        AND m.account_id = ${accountId}`))!);
      yield* appendAudits(audit(m), chain);
      return { outcome: 'joined', membership: m };
    })());
  }

  async setSessionWorkspace(sessionId: string, workspaceId: string | null, audit: readonly AuditEventRecord[]):
    Promise<boolean> {
    const chain = this.chain;
    return this.r.tx((function* () {
      const done = yield* run(sql`UPDATE sessions SET workspace_id = ${workspaceId} WHERE id = ${sessionId}
        AND ended_at IS NULL`);
      if (done === 1) yield* appendAudits(audit, chain);
      return done === 1;
    })());
  }
}

/**
 * Locks the organisation's row, reads the membership and applies the last-owner rule to moving it
 * to `to` (null: ending it): the membership, or why not.
 */
function* guarded(
  orgId: string, accountId: string, to: Role | null,
): Work<MembershipRecord | 'not_member' | 'last_owner'> {
  yield* get(sql`SELECT id FROM accounts WHERE id = ${orgId}${FOR_UPDATE}`);
  const row = yield* get<MembershipRow>(sql`${MEMBERSHIP} WHERE m.org_id = ${orgId} AND m.account_id = ${accountId}`);
  if (row === undefined) return 'not_member';
  const m = membership(row);
  const owners = (yield* get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM memberships WHERE org_id = ${orgId}
    AND role = 'owner'`))!.n;
  const check = checkMembershipChange({ from: m.role, to, owners });
  return check.ok ? m : check.code;
}
