/**
 * The role matrix (issue 32): every session operation of the API, called in an organisation by
 * a member of each role, is refused with `403 role_forbidden` exactly when the role lacks the
 * operation's permission (src/roles.ts), and the refusal happens before anything else (no body,
 * no ids needed). The operations a person does for themselves (`person`) are open to every role;
 * those that end or move the session (logout, refresh, switch, leave) are checked by their
 * declaration here and exercised in members.test.ts.
 */
import t from 'tap';
import { ROUTES } from '../../../sidecar/api/operations.js';
import { ROLES, can } from '../../../src/roles.js';
import type { Permission, Role } from '../../../src/roles.js';
import { login, startSidecar } from '../../helpers/sidecar.js';
import type { Client } from '../../helpers/sidecar.js';

const SESSION_MOVERS = new Set(['logout', 'refreshSession', 'switchWorkspace', 'leaveOrganization']);

t.test('every session operation × every role', async (t) => {
  const sc = await startSidecar({ sendCodePerMinute: 100 });
  t.teardown(() => sc.close());
  const owner = await login(sc, 'matrix-owner@example.com');
  await owner.post('/v1/auth/onboarding/profile', { first_name: 'Org', last_name: 'Owner' });
  const made = await owner.post('/v1/auth/onboarding/account-type', { account_type: 'organization', organization_name: 'Matrix Ltd' });
  t.equal(made.status, 200);
  const orgId = made.body.organization_id as string;

  // One member per role, each signed in and acting in the organisation.
  const members = new Map<Role, Client>([['owner', owner]]);
  for (const role of ROLES.filter((r) => r !== 'owner')) {
    const email = `matrix-${role}@example.com`;
    const inv = await owner.post('/v1/service/organization/invitations', { email, role });
    t.equal(inv.status, 200, `invite ${role}`);
    const c = await login(sc, email);
    t.equal((await c.post(`/v1/service/invitations/${inv.body.invitation_id}/accept`)).status, 200, `${role} accepts`);
    const sw = await c.post('/v1/auth/session/workspace', { workspace_id: orgId });
    t.same(sw.body, { workspace_id: orgId, kind: 'organization', name: 'Matrix Ltd', role });
    members.set(role, c);
  }

  const session = ROUTES.filter((r) => r.auth === 'session' || r.auth === 'session_csrf');
  t.ok(session.length >= 40, `${session.length} session operations`);
  for (const r of session) {
    t.ok(r.permission !== undefined, `${r.operation.operationId} declares a permission`);
    if (SESSION_MOVERS.has(r.operation.operationId)) {
      t.equal(r.permission, 'person', `${r.operation.operationId} is the person's own`);
      continue;
    }
    const url = r.url.replace(/:(\w+)/g, 'no-such-$1');
    for (const role of ROLES) {
      const c = members.get(role)!;
      const res = r.method === 'GET' ? await c.get(url) : await c.req(r.method, url, {});
      const allowed = r.permission === 'person' || can(role, r.permission as Permission);
      const got = `${res.status} ${res.body?.error?.code ?? ''}`;
      if (allowed) t.not(res.body?.error?.code, 'role_forbidden', `${role} may ${r.operation.operationId} (${got})`);
      else {
        t.equal(got, '403 role_forbidden', `${role} may not ${r.operation.operationId}`);
        t.match(res.body.error, { role, permission: r.permission, status: 403 });
      }
    }
  }
  // Nothing the refusals tried changed the organisation: the members are as they were.
  const list = await owner.get('/v1/service/organization/members');
  t.same(list.body.members.map((m: { role: string }) => m.role).sort(), [...ROLES].sort());
});
