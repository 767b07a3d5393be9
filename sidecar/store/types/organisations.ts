/**
 * The store interface (types.ts) of organisations (issue 32; docs/organisations.md): an
 * organisation is a workspace (an `accounts` row, see store/schema.ts) with members, each in one
 * role (src/roles.ts), and invitations by e-mail. A session acts in one workspace.
 */
import type { Role } from '../../../src/roles.js';
import type { AuditEventRecord } from './audit.js';

/** A new organisation: its workspace row and its first owner. */
export interface NewOrganisation {
  id: string;
  name: string;
  /** The person who creates it and becomes its first owner. */
  ownerId: string;
  /** Root identity public key JSON text; the private half sealed. */
  rootPublicKey: string;
  rootSecretEnc: Uint8Array;
  creditsMicros: number;
  now: number;
}

/** One person's membership of one organisation. */
export interface MembershipRecord {
  orgId: string;
  /** The organisation's name. */
  orgName: string;
  accountId: string;
  role: Role;
  createdAt: number;
}

/** A member as the organisation lists them. */
export interface MemberRecord extends MembershipRecord {
  email: string;
  firstName: string | null;
  lastName: string | null;
}

/** An invitation to join an organisation. */
export interface InvitationRecord {
  id: string;
  orgId: string;
  /** The organisation's name. */
  orgName: string;
  /** The invited address, lowercase. */
  email: string;
  role: Role;
  invitedBy: string;
  state: 'pending' | 'accepted' | 'revoked' | 'expired';
  createdAt: number;
  expiresAt: number;
  decidedAt: number | null;
  acceptedBy: string | null;
}

/** Why a membership change was refused, or that there was nothing to change. */
export type MembershipOutcome = 'changed' | 'not_member' | 'last_owner';

/** What accepting an invitation found. */
export type AcceptOutcome =
  | { outcome: 'joined'; membership: MembershipRecord }
  | { outcome: 'not_found' | 'revoked' | 'accepted' | 'expired' | 'already_member' };

/** Organisations, memberships, invitations and the session's workspace. */
export interface OrganisationStore {
  /** Creates the organisation's workspace and its owner's membership, with `audit` (its first chain rows), at once. */
  createOrganisation(o: NewOrganisation, audit: readonly AuditEventRecord[]): Promise<void>;
  /** The organisations `accountId` belongs to, by name. */
  membershipsOf(accountId: string): Promise<MembershipRecord[]>;
  /** One membership, or undefined. */
  membership(orgId: string, accountId: string): Promise<MembershipRecord | undefined>;
  /** The members of `orgId`, owners first, then by e-mail. */
  members(orgId: string): Promise<MemberRecord[]>;
  /**
   * Sets `accountId`'s role in `orgId`, refusing (`last_owner`) to leave the organisation without
   * an owner; concurrent changes are serialized on the organisation's row. `audit` is written
   * with the change (nothing when refused).
   */
  changeRole(orgId: string, accountId: string, role: Role, audit: (m: MembershipRecord) => AuditEventRecord[]):
    Promise<MembershipOutcome>;
  /**
   * Ends `accountId`'s membership of `orgId` (removed, or left) and every session of theirs acting
   * in it, with the same owner rule and serialization as {@link changeRole}.
   */
  removeMember(orgId: string, accountId: string, now: number, audit: (m: MembershipRecord) => AuditEventRecord[]):
    Promise<MembershipOutcome>;
  /**
   * Invites `email` (lowercase) with `role`: first marks the organisation's pending invitation of
   * that address expired if its time has passed. `pending_exists` when one is still pending,
   * `already_member` when a person with that address is a member.
   */
  createInvitation(i: InvitationRecord, audit: readonly AuditEventRecord[]):
    Promise<'created' | 'pending_exists' | 'already_member'>;
  /** The organisation's invitations, newest first (pending ones past their time read `expired`). */
  invitations(orgId: string, now: number): Promise<InvitationRecord[]>;
  /** The pending, unexpired invitations of an address, newest first. */
  invitationsFor(email: string, now: number): Promise<InvitationRecord[]>;
  /** Revokes a pending invitation of `orgId`; false when there is none by that id. */
  revokeInvitation(orgId: string, id: string, now: number, audit: readonly AuditEventRecord[]): Promise<boolean>;
  /**
   * Accepts invitation `id` for the person `accountId` whose address is `email`: `not_found` also
   * when it was sent to another address (nothing is revealed). `audit(m)` is written on joining.
   */
  acceptInvitation(id: string, accountId: string, email: string, now: number,
    audit: (m: MembershipRecord) => AuditEventRecord[]): Promise<AcceptOutcome>;
  /** Points the live session `sessionId` at a workspace (null: the person's own); false when it has ended. */
  setSessionWorkspace(sessionId: string, workspaceId: string | null, audit: readonly AuditEventRecord[]):
    Promise<boolean>;
}
