/**
 * Organisation fixtures over real HTTP for the tests of issue 32: an owner who onboarded as an
 * organisation, and a member invited by e-mail who accepted and acts in it.
 */
import { login, onboard } from './sidecar.js';
import type { Client, TestSidecar } from './sidecar.js';

/** Signs `email` in on `sc` and onboards them as the first owner of a new organisation `name`, acting in it. */
export async function orgOwner(sc: TestSidecar, email: string, name: string): Promise<{ c: Client; orgId: string }> {
  const c = await login(sc, email);
  await c.post('/v1/auth/onboarding/profile', { first_name: 'P', last_name: 'Q' });
  const r = await c.post('/v1/auth/onboarding/account-type', { account_type: 'organization', organization_name: name });
  if (r.status !== 200) throw new Error(`onboarding as an organisation: ${r.status} ${r.text}`);
  return { c, orgId: r.body.organization_id as string };
}

/**
 * `inviter` (a session that may manage members of `orgId`) invites `email` as `role`; the person
 * onboards on `sc`, accepts, and switches to the organisation. Returns their session.
 */
export async function addMember(inviter: Client, sc: TestSidecar, orgId: string, email: string, role: string): Promise<Client> {
  const inv = await inviter.post('/v1/service/organization/invitations', { email, role });
  if (inv.status !== 200) throw new Error(`invite ${email}: ${inv.status} ${inv.text}`);
  const c = await onboard(sc, email);
  const ok = await c.post(`/v1/service/invitations/${inv.body.invitation_id}/accept`);
  if (ok.status !== 200) throw new Error(`accept ${email}: ${ok.status} ${ok.text}`);
  await c.post('/v1/auth/session/workspace', { workspace_id: orgId });
  return c;
}
