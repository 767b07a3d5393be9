/**
 * The success bodies of the organisation operations (issue 32; docs/organisations.md): the
 * session's workspace, workspaces, members and invitations. Registered with the others
 * (`RESPONSE_SCHEMAS` in schemas.ts).
 */
import { Type } from '@sinclair/typebox';
import type { TSchema } from '@sinclair/typebox';
import { ROLES } from '../../src/roles.js';

const Str = Type.String();
const Time = Type.String({ format: 'date-time' });
const NullableStr = Type.Union([Type.String(), Type.Null()]);
const Role = Type.Union(ROLES.map((r) => Type.Literal(r)), { description: 'A role (docs/organisations.md, "Roles").' });

/** Names a schema for `components.schemas`. */
const named = <T extends TSchema>(id: string, schema: T): T => ({ ...schema, $id: id }) as T;

/** The workspace a session acts in. */
export const Workspace = named('Workspace', Type.Object({
  workspace_id: Str,
  kind: Type.Union([Type.Literal('personal'), Type.Literal('organization')]),
  name: Type.Union([Str, Type.Null()], { description: 'The organisation\'s name; null for the personal workspace.' }),
  role: Role,
}));
/** The workspaces a person may act in, their own first. */
export const WorkspaceList = named('WorkspaceList', Type.Object({
  current_workspace_id: Str, workspaces: Type.Array(Type.Ref('Workspace')),
}));
/** A created organisation. */
export const Organization = named('Organization', Type.Object({
  organization_id: Str, name: Str, role: Role, created_at: Time,
}));
/** A member of the session's organisation. */
export const Member = named('Member', Type.Object({
  account_id: Str, email: Str, first_name: NullableStr, last_name: NullableStr, role: Role, joined_at: Time,
}));
export const MemberList = named('MemberList', Type.Object({ members: Type.Array(Type.Ref('Member')) }));
/** The answer to a removal or a departure. */
export const MemberRemoval = named('MemberRemoval', Type.Object({
  account_id: Str, status: Type.Union([Type.Literal('removed'), Type.Literal('left')]),
}));
/** An invitation. */
export const Invitation = named('Invitation', Type.Object({
  invitation_id: Str, organization_id: Str, organization_name: Str, email: Str, role: Role,
  state: Type.Union(['pending', 'accepted', 'revoked', 'expired'].map((x) => Type.Literal(x))),
  created_at: Time, expires_at: Time,
}));
export const InvitationList = named('InvitationList', Type.Object({ invitations: Type.Array(Type.Ref('Invitation')) }));


/** An organisation's publisher domain and how to prove it. */
export const PublisherDomain = named('PublisherDomain', Type.Object({
  domain: Str,
  record_name: Type.String({ description: 'Where the TXT record goes: `_agent-authz.<domain>`.' }),
  record_text: Type.String({ description: 'What it must say: `agent-authz-domain-verification=<token>`.' }),
  state: Type.Union([Type.Literal('unverified'), Type.Literal('verified'), Type.Literal('lapsed')]),
  claimed_at: Time,
  verified_at: Type.Union([Time, Type.Null()]),
  lapsed_at: Type.Union([Time, Type.Null()]),
  checked_at: Type.Union([Time, Type.Null()]),
  last_outcome: Type.Union([Str, Type.Null()],
    { description: '`verified`, `mismatch`, `absent`, `unreachable` or `taken`.' }),
}));
/** A published platform in the directory. */
export const DirectoryEntry = named('DirectoryEntry', Type.Object({
  platform_id: Str, name: Str, description: Str, surface_type: Str,
  scopes: Type.Array(Str, { description: 'The scopes it may ask a connecting account holder for.' }),
  publisher: Type.Object({ organization_id: Str, name: Str, verified_domain: Str }),
}));
export const Directory = named('Directory', Type.Object({ platforms: Type.Array(Type.Ref('DirectoryEntry')) }));

/** Every schema of this file. */
export const ORGANISATION_SCHEMAS: readonly TSchema[] = [
  Workspace, WorkspaceList, Organization, Member, MemberList, MemberRemoval, Invitation, InvitationList,
  PublisherDomain, DirectoryEntry, Directory,
];
