/**
 * Invitations to an organisation (issue 32; docs/organisations.md): a member who manages members
 * invites an e-mail address with a role; the invited person signs in with that address (the
 * e-mail code proves it) and accepts. An invitation is pending for 7 days, once per address and
 * organisation, and can be revoked until it is accepted.
 */
import crypto from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as O from '../api/organisation-schemas.js';
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import type { InvitationRecord } from '../store/types.js';
import { NoBody, iso } from '../http/resources.js';
import { normalizeEmail } from './auth.js';
import { adminEvent, requireRole, sessionOrganisation } from './organisations.js';

/** How long an invitation stays pending. */
export const INVITATION_TTL_MS = 7 * 86_400_000;

const InviteBody = Type.Object(
  { email: Type.String({ minLength: 3, maxLength: 254 }), role: Type.String({ maxLength: 32 }) },
  { additionalProperties: false });
const IdParam = Type.Object({ invitation_id: Type.String({ maxLength: 100 }) });
const TAGS = ['organizations'];

function view(i: InvitationRecord): Static<typeof O.Invitation> {
  return { invitation_id: i.id, organization_id: i.orgId, organization_name: i.orgName, email: i.email, role: i.role,
    state: i.state, created_at: iso(i.createdAt)!, expires_at: iso(i.expiresAt)! };
}

/** The routes of this file, each defined once (api/route.ts). */
export const INVITATIONS_ROUTES = {
  inviteMember: defineRoute({
    method: 'POST', url: '/v1/service/organization/invitations', auth: 'session_csrf', permission: 'members_manage',
    schema: { body: InviteBody, tags: TAGS },
    operation: op('inviteMember', 'Invite a person',
      'Invites an e-mail address with a role and e-mails the invitation; pending for 7 days.', O.Invitation,
      ['account_type_not_supported', 'invitation_pending', 'already_member']),
  }),
  listInvitations: defineRoute({
    method: 'GET', url: '/v1/service/organization/invitations', auth: 'session', permission: 'members_manage',
    schema: { tags: TAGS },
    operation: op('listInvitations', 'List the organisation\'s invitations', 'Newest first, in every state.',
      O.InvitationList, ['account_type_not_supported']),
  }),
  revokeInvitation: defineRoute({
    method: 'POST', url: '/v1/service/organization/invitations/:invitation_id/revoke', auth: 'session_csrf',
    permission: 'members_manage', schema: { params: IdParam, body: NoBody, tags: TAGS },
    operation: op('revokeInvitation', 'Revoke an invitation', 'Only a pending invitation can be revoked.', O.Invitation,
      ['account_type_not_supported', 'invitation_not_found', 'invitation_closed']),
  }),
  listMyInvitations: defineRoute({
    method: 'GET', url: '/v1/service/invitations', auth: 'session', permission: 'person',
    schema: { tags: TAGS },
    operation: op('listMyInvitations', 'List invitations to you',
      'The pending invitations to the signed-in person\'s e-mail address.', O.InvitationList),
  }),
  acceptInvitation: defineRoute({
    method: 'POST', url: '/v1/service/invitations/:invitation_id/accept', auth: 'session_csrf', permission: 'person',
    schema: { params: IdParam, body: NoBody, tags: TAGS },
    operation: op('acceptInvitation', 'Accept an invitation',
      'Joins the organisation with the invitation\'s role. Only the invited address can accept (another gets 404).',
      O.Workspace, ['invitation_not_found', 'invitation_closed', 'already_member']),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the invitation routes. */
export async function registerInvitationRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  mount(app, INVITATIONS_ROUTES.inviteMember, async (request) => {
    const orgId = sessionOrganisation(request);
    const b = request.body as { email: string; role: string };
    const email = normalizeEmail(b.email);
    const role = requireRole(b.role, 'body.role');
    const me = request.session!.personId;
    const now = ctx.clock();
    const org = await ctx.store.accounts.getAccount(orgId);
    const inviter = await ctx.store.accounts.getAccount(me);
    const inv: InvitationRecord = {
      id: crypto.randomUUID(), orgId, orgName: org?.orgName ?? '', email, role, invitedBy: me, state: 'pending',
      createdAt: now, expiresAt: now + INVITATION_TTL_MS, decidedAt: null, acceptedBy: null,
    };
    const made = await ctx.store.organisations.createInvitation(inv,
      [adminEvent(ctx, orgId, 'member.invited', me, { invitation_id: inv.id, email, role })]);
    if (made === 'pending_exists') throw new ServiceError('invitation_pending');
    if (made === 'already_member') throw new ServiceError('already_member');
    try {
      await ctx.mailer.sendInvitation(email, { orgName: inv.orgName, role, invitedBy: inviter?.email ?? 'A member',
        expiresAt: iso(inv.expiresAt)!, invitationId: inv.id });
    } catch (err) {
      // The invitation stands (the invited person lists it after signing in); revoking and inviting sends it again.
      request.log.warn({ err, invitationId: inv.id }, 'invitation e-mail could not be sent');
    }
    return view(inv);
  });

  mount(app, INVITATIONS_ROUTES.listInvitations, async (request) => {
    const list = await ctx.store.organisations.invitations(sessionOrganisation(request), ctx.clock());
    return { invitations: list.map(view) };
  });

  mount(app, INVITATIONS_ROUTES.revokeInvitation, async (request) => {
    const orgId = sessionOrganisation(request);
    const id = (request.params as { invitation_id: string }).invitation_id;
    const now = ctx.clock();
    const done = await ctx.store.organisations.revokeInvitation(orgId, id, now,
      [adminEvent(ctx, orgId, 'invitation.revoked', request.session!.personId, { invitation_id: id })]);
    const inv = (await ctx.store.organisations.invitations(orgId, now)).find((i) => i.id === id);
    if (inv === undefined) throw new ServiceError('invitation_not_found');
    if (!done) throw new ServiceError('invitation_closed', undefined, { state: inv.state });
    return view(inv);
  });

  mount(app, INVITATIONS_ROUTES.listMyInvitations, async (request) => {
    const me = await ctx.store.accounts.getAccount(request.session!.personId);
    if (!me) throw new ServiceError('auth_required');
    return { invitations: (await ctx.store.organisations.invitationsFor(me.email, ctx.clock())).map(view) };
  });

  mount(app, INVITATIONS_ROUTES.acceptInvitation, async (request) => {
    const me = await ctx.store.accounts.getAccount(request.session!.personId);
    if (!me) throw new ServiceError('auth_required');
    const id = (request.params as { invitation_id: string }).invitation_id;
    const r = await ctx.store.organisations.acceptInvitation(id, me.id, me.email, ctx.clock(),
      (m) => [adminEvent(ctx, m.orgId, 'member.joined', me.id, { account_id: me.id, invitation_id: id, role: m.role })],
    );
    if (r.outcome === 'not_found') throw new ServiceError('invitation_not_found');
    if (r.outcome === 'already_member') throw new ServiceError('already_member');
    if (r.outcome !== 'joined') throw new ServiceError('invitation_closed', undefined, { state: r.outcome });
    const m = r.membership;
    return { workspace_id: m.orgId, kind: 'organization' as const, name: m.orgName, role: m.role };
  });
}
