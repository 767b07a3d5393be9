/**
 * Organisations (issue 32; docs/organisations.md): creating one, the workspaces a person may act
 * in and switching between them, and the members of the session's organisation with their roles.
 * Invitations are in invitations.ts. Every change is an audit event in the organisation's chain,
 * written in the transaction that makes it.
 */
import crypto from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { defineRoute, mount, op, ONBOARDED } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as O from '../api/organisation-schemas.js';
import { canonicalize } from '../../src/canonical.js';
import { generateHybridKeyPair, publicKeyToJson } from '../../src/crypto/hybrid.js';
import { ServiceError } from '../../src/errors.js';
import { ROLES, isRole } from '../../src/roles.js';
import type { Role } from '../../src/roles.js';
import { AAD } from '../secrets.js';
import type { ServiceContext } from '../context.js';
import type { AuditEventRecord, MembershipOutcome } from '../store/types.js';
import { NoBody, TEXT_RULES, iso, requireText } from '../http/resources.js';
import { clearSessionCookies } from '../http/auth.js';
import { adminRow } from '../audit/admin-events.js';

const NameBody = Type.Object({ name: Type.String({ maxLength: 400 }) }, { additionalProperties: false });
const SwitchBody = Type.Object({ workspace_id: Type.String({ maxLength: 100 }) }, { additionalProperties: false });
const RoleBody = Type.Object({ role: Type.String({ maxLength: 32 }) }, { additionalProperties: false });
const MemberParam = Type.Object({ account_id: Type.String({ maxLength: 100 }) });
const TAGS = ['organizations'];

/** An administrative audit event of `workspaceId`, by the person `actorId`. */
export function adminEvent(
  ctx: ServiceContext, workspaceId: string, type: AuditEventRecord['eventType'], actorId: string,
  details: Record<string, unknown> = {},
): AuditEventRecord {
  return adminRow(ctx, workspaceId, type, { actor_account_id: actorId, ...details });
}

/** The role in a request body, or 400 naming the field. */
export function requireRole(value: string, field: string): Role {
  if (!isRole(value)) {
    throw new ServiceError('invalid_request', `${field} must be one of ${ROLES.join(', ')}.`, { field });
  }
  return value;
}

/** The session's organisation, or 403 `account_type_not_supported` in a personal workspace. */
export function sessionOrganisation(request: FastifyRequest): string {
  const org = request.session!.organisationId;
  if (org === null) {
    throw new ServiceError('account_type_not_supported', 'This needs an organisation workspace; switch to one.');
  }
  return org;
}

/** Creates an organisation with its root identity and alpha credits; `personId` becomes its first owner. */
export async function createOrganisation(ctx: ServiceContext, personId: string, rawName: string, field = 'body.name'):
  Promise<Static<typeof O.Organization>> {
  const name = requireText(rawName, field, TEXT_RULES.name);
  const id = crypto.randomUUID();
  const kp = generateHybridKeyPair();
  const now = ctx.clock();
  try {
    await ctx.store.organisations.createOrganisation({
      id, name, ownerId: personId, rootPublicKey: canonicalize(publicKeyToJson(kp.publicKey)),
      rootSecretEnc: ctx.box.seal(kp.secretSeed, AAD.rootSecret(id)), creditsMicros: ctx.config.alphaCreditsMicros, now,
    }, [adminEvent(ctx, id, 'organization.created', personId, { name })]);
  } finally {
    kp.secretSeed.fill(0);
  }
  return { organization_id: id, name, role: 'owner', created_at: iso(now)! };
}

function refuse(outcome: MembershipOutcome): void {
  if (outcome === 'not_member') throw new ServiceError('member_not_found');
  if (outcome === 'last_owner') throw new ServiceError('last_owner');
}

/** The routes of this file, each defined once (api/route.ts). */
export const ORGANISATIONS_ROUTES = {
  createOrganization: defineRoute({
    method: 'POST', url: '/v1/service/organizations', auth: 'session_csrf', permission: 'person',
    schema: { body: NameBody, tags: TAGS },
    operation: op('createOrganization', 'Create an organisation',
      'Creates an organisation (its own root identity, credits and audit chain) with the signed-in person as its first '
        + 'owner. The session stays where it is; switch to act in it.', O.Organization, [...ONBOARDED]),
  }),
  listWorkspaces: defineRoute({
    method: 'GET', url: '/v1/service/workspaces', auth: 'session', permission: 'person',
    schema: { tags: TAGS },
    operation: op('listWorkspaces', 'List your workspaces',
      'The personal workspace and every organisation the signed-in person belongs to, with their role in each.',
      O.WorkspaceList),
  }),
  switchWorkspace: defineRoute({
    method: 'POST', url: '/v1/auth/session/workspace', auth: 'session_csrf', permission: 'person',
    schema: { body: SwitchBody, tags: TAGS },
    operation: op('switchWorkspace', 'Act in another workspace',
      'Points the session at one of the person\'s workspaces (their own account id, or an organisation they belong '
        + 'to); an audit event records it in the workspace entered.', O.Workspace, ['organization_not_found']),
  }),
  listMembers: defineRoute({
    method: 'GET', url: '/v1/service/organization/members', auth: 'session', permission: 'read',
    schema: { tags: TAGS },
    operation: op('listMembers', 'List the organisation\'s members', 'Owners first, then by e-mail address.',
      O.MemberList, ['account_type_not_supported']),
  }),
  setMemberRole: defineRoute({
    method: 'POST', url: '/v1/service/organization/members/:account_id/role', auth: 'session_csrf',
    permission: 'members_manage', schema: { params: MemberParam, body: RoleBody, tags: TAGS },
    operation: op('setMemberRole', 'Change a member\'s role',
      'The last owner cannot be demoted (`409 last_owner`).', O.Member,
      ['account_type_not_supported', 'member_not_found', 'last_owner']),
  }),
  removeMember: defineRoute({
    method: 'POST', url: '/v1/service/organization/members/:account_id/remove', auth: 'session_csrf',
    permission: 'members_manage', schema: { params: MemberParam, body: NoBody, tags: TAGS },
    operation: op('removeMember', 'Remove a member',
      'Ends the membership and, at once, every session of that person acting in the organisation. The last owner '
        + 'cannot be removed.', O.MemberRemoval, ['account_type_not_supported', 'member_not_found', 'last_owner']),
  }),
  leaveOrganization: defineRoute({
    method: 'POST', url: '/v1/service/organization/leave', auth: 'session_csrf', permission: 'person',
    schema: { body: NoBody, tags: TAGS },
    operation: op('leaveOrganization', 'Leave the organisation',
      'Ends the signed-in person\'s membership of the session\'s organisation and every session of theirs in it, this '
        + 'one included (sign in again). The last owner cannot leave.', O.MemberRemoval,
      ['account_type_not_supported', 'last_owner']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the organisation routes. */
export async function registerOrganisationRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  const person = async (request: FastifyRequest) => {
    const a = await ctx.store.accounts.getAccount(request.session!.personId);
    if (!a) throw new ServiceError('auth_required');
    return a;
  };

  mount(app, ORGANISATIONS_ROUTES.createOrganization, async (request) => {
    const a = await person(request);
    if (a.onboardingStep !== 'complete') throw new ServiceError('onboarding_incomplete');
    return createOrganisation(ctx, a.id, (request.body as { name: string }).name);
  });

  mount(app, ORGANISATIONS_ROUTES.listWorkspaces, async (request) => {
    const s = request.session!;
    const orgs = await ctx.store.organisations.membershipsOf(s.personId);
    return {
      current_workspace_id: s.accountId,
      workspaces: [
        { workspace_id: s.personId, kind: 'personal' as const, name: null, role: 'owner' as const },
        ...orgs.map((m) => ({ workspace_id: m.orgId, kind: 'organization' as const, name: m.orgName, role: m.role })),
      ],
    };
  });

  mount(app, ORGANISATIONS_ROUTES.switchWorkspace, async (request) => {
    const s = request.session!;
    const target = (request.body as { workspace_id: string }).workspace_id;
    const personal = target === s.personId;
    const m = personal ? undefined : await ctx.store.organisations.membership(target, s.personId);
    if (!personal && m === undefined) throw new ServiceError('organization_not_found');
    const event = adminEvent(ctx, target, 'workspace.switched', s.personId, { from_workspace_id: s.accountId });
    if (!(await ctx.store.organisations.setSessionWorkspace(s.sessionId, personal ? null : target, [event]))) {
      throw new ServiceError('auth_required');
    }
    return m === undefined
      ? { workspace_id: s.personId, kind: 'personal' as const, name: null, role: 'owner' as const }
      : { workspace_id: m.orgId, kind: 'organization' as const, name: m.orgName, role: m.role };
  });

  mount(app, ORGANISATIONS_ROUTES.listMembers, async (request) => {
    const members = await ctx.store.organisations.members(sessionOrganisation(request));
    return { members: members.map((m) => ({ account_id: m.accountId, email: m.email, first_name: m.firstName,
      last_name: m.lastName, role: m.role, joined_at: iso(m.createdAt)! })) };
  });

  mount(app, ORGANISATIONS_ROUTES.setMemberRole, async (request) => {
    const orgId = sessionOrganisation(request);
    const accountId = (request.params as { account_id: string }).account_id;
    const role = requireRole((request.body as { role: string }).role, 'body.role');
    refuse(await ctx.store.organisations.changeRole(orgId, accountId, role, (m) => m.role === role ? [] : [
      adminEvent(ctx, orgId, 'member.role_changed', request.session!.personId,
        { account_id: accountId, from: m.role, to: role }),
    ]));
    const m = (await ctx.store.organisations.members(orgId)).find((x) => x.accountId === accountId);
    if (m === undefined) throw new ServiceError('member_not_found');
    return { account_id: m.accountId, email: m.email, first_name: m.firstName, last_name: m.lastName, role: m.role,
      joined_at: iso(m.createdAt)! };
  });

  mount(app, ORGANISATIONS_ROUTES.removeMember, async (request) => {
    const orgId = sessionOrganisation(request);
    const accountId = (request.params as { account_id: string }).account_id;
    refuse(await ctx.store.organisations.removeMember(orgId, accountId, ctx.clock(), (m) => [
      adminEvent(ctx, orgId, 'member.removed', request.session!.personId, { account_id: accountId, role: m.role }),
    ]));
    return { account_id: accountId, status: 'removed' as const };
  });

  mount(app, ORGANISATIONS_ROUTES.leaveOrganization, async (request, reply) => {
    const orgId = sessionOrganisation(request);
    const me = request.session!.personId;
    refuse(await ctx.store.organisations.removeMember(orgId, me, ctx.clock(), (m) => [
      adminEvent(ctx, orgId, 'member.left', me, { account_id: me, role: m.role }),
    ]));
    clearSessionCookies(ctx, reply);
    return { account_id: me, status: 'left' as const };
  });
}
