/**
 * Organisation roles and what each may do (issue 32). One table, role →
 * permissions, that every session endpoint of an organisation is checked
 * against, and that `docs/` prints. Pure: no I/O.
 *
 * The roles, from the minimum:
 * - `owner`: everything, including members and the organisation's deletion;
 * - `admin`: platforms, publishing, domains, connections, keys, webhooks;
 * - `approver`: approves, denies and revokes delegations, and decides
 *   step-up approvals (separation of duties: an admin who is not also an
 *   approver cannot grant authority to agents);
 * - `auditor`: reads the audit, usage, decisions and webhook deliveries;
 * - `member`: reads platforms, connections, agents, delegations, requests
 *   and approvals, and changes nothing.
 * Every role also reads what `member` reads. A personal workspace has one
 * person, who is its owner.
 *
 * The last owner of an organisation can neither leave nor be demoted nor be
 * removed ({@link checkMembershipChange}): an organisation always has
 * someone who can manage it.
 */

/** The roles, from most to least powerful. */
export const ROLES = ['owner', 'admin', 'approver', 'auditor', 'member'] as const;

/** An organisation role. */
export type Role = (typeof ROLES)[number];

/** What a session may do in a workspace; each session endpoint needs exactly one. */
export const PERMISSIONS = {
  /** Read platforms, connections, agents, delegations, delegation requests and approvals. */
  read: 'Read platforms, connections, agents, delegations, requests and approvals.',
  /** Read the audit (and export it), usage, decision explanations and webhook deliveries. */
  audit_read: 'Read the audit, its export, usage, decision explanations and webhook deliveries.',
  /** Approve, deny and revoke delegations (and sub-delegation trees); request one for the workspace's own agents. */
  delegations_decide: 'Approve, deny and revoke delegations; request one for the workspace\'s agents.',
  /** Approve and deny step-up approvals. */
  approvals_decide: 'Approve and deny step-up approvals.',
  /** Create platforms, set callbacks, publish, verify domains, rotate keys, manage connections, redeliver webhooks. */
  platforms_manage: 'Create and publish platforms, verify domains, manage connections, keys and webhooks.',
  /** Invite, remove and change the role of members; revoke invitations. */
  members_manage: 'Invite and remove members, change roles, revoke invitations.',
  /** Delete the organisation. */
  organisation_delete: 'Delete the organisation.',
} as const;

/** A permission name. */
export type Permission = keyof typeof PERMISSIONS;

/** The role → permissions table (read by {@link can}, printed in `docs/`). */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = Object.freeze({
  owner: Object.freeze(Object.keys(PERMISSIONS) as Permission[]),
  admin: Object.freeze(['read', 'audit_read', 'platforms_manage'] as Permission[]),
  approver: Object.freeze(['read', 'delegations_decide', 'approvals_decide'] as Permission[]),
  auditor: Object.freeze(['read', 'audit_read'] as Permission[]),
  member: Object.freeze(['read'] as Permission[]),
});

/** Whether `value` is a role name. */
export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

/**
 * Whether `role` grants `permission`.
 * @throws TypeError for an unknown role or permission (a programming error, not input).
 */
export function can(role: Role, permission: Permission): boolean {
  const granted = ROLE_PERMISSIONS[role];
  if (granted === undefined) throw new TypeError(`can: unknown role ${JSON.stringify(role)}`);
  if (!Object.hasOwn(PERMISSIONS, permission)) {
    throw new TypeError(`can: unknown permission ${JSON.stringify(permission)}`);
  }
  return granted.includes(permission);
}

/** A change to one membership: a role change, or its end (left or removed: `to` is `null`). */
export interface MembershipChange {
  /** The member's role now. */
  from: Role;
  /** The role after the change; `null` when the member leaves or is removed. */
  to: Role | null;
  /** How many owners the organisation has now, this member included. */
  owners: number;
}

/** Why {@link checkMembershipChange} refused (an error-table code). */
export type MembershipRefusal = 'last_owner';

/** Whether a membership change keeps at least one owner; `last_owner` when it would leave none. */
export function checkMembershipChange(change: MembershipChange): { ok: true } | { ok: false; code: MembershipRefusal } {
  if (!Number.isInteger(change.owners) || change.owners < 0) {
    throw new TypeError('checkMembershipChange: owners must be a count');
  }
  const losesOwner = change.from === 'owner' && change.to !== 'owner';
  if (losesOwner && change.owners <= 1) return { ok: false, code: 'last_owner' };
  return { ok: true };
}
