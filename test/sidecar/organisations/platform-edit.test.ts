/**
 * Editing a platform (issue 32; docs/organisations.md, "Publishing"): `PATCH
 * /v1/service/platforms/{platform_id}` sets the name and/or the description under the
 * registration's text rules, so a platform registered without a description can be published; a
 * published platform's directory entry shows an edit at once, and its description cannot be
 * emptied (`409 description_required`) nor its callback cleared (`409 callback_url_required`); every edit that changes something is a `platform.updated`
 * audit event; roles without `platforms_manage` and other workspaces are refused. Publishing runs
 * against a real DNS server on loopback (dnsmasq).
 */
import t from 'tap';
import { expectError, onboard, startSidecar } from '../../helpers/sidecar.js';
import type { Client } from '../../helpers/sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../../helpers/dnsmasq.js';
import { addMember, orgOwner } from '../../helpers/organisations.js';

const edit = (c: Client, id: string, body: unknown) => c.req('PATCH', `/v1/service/platforms/${id}`, body);

t.test('validation, roles, other workspaces, the audit event', async (t) => {
  const sc = await startSidecar({ sendCodePerMinute: 100 });
  t.teardown(() => sc.close());
  const { c: owner, orgId } = await orgOwner(sc, 'owner@edit.example.org', 'Edit Ltd');
  const reg = await owner.post('/v1/service/platforms', { name: 'Bare', surface_type: 'agentic_api',
    default_allowed_scopes: ['data:read'] });
  t.equal(reg.status, 200);
  const id = reg.body.platform_id as string;
  const before = (await owner.get(`/v1/service/platforms/${id}`)).body;
  t.equal(before.description, '', 'registered without a description');

  const r = await edit(owner, id, { description: '  Books trips.\nWorldwide.  ' });
  t.equal(r.status, 200);
  t.same(r.body, { ...before, description: 'Books trips.\nWorldwide.' }, 'the platform view, description normalised');
  t.same((await owner.get(`/v1/service/platforms/${id}`)).body, r.body, 'GET reads the same');
  t.match((await edit(owner, id, { name: 'Acme Travel', description: 'Books trips.' })).body,
    { platform_id: id, name: 'Acme Travel', description: 'Books trips.' });
  t.equal((await edit(owner, id, { name: 'Acme Travel' })).status, 200, 'an edit that changes nothing is answered');

  // Validation: each refusal is coded and names the field; nothing changes.
  const bad: [unknown, string, string][] = [
    [{}, 'body', 'an empty body'],
    [{ name: '' }, 'body.name', 'an empty name'],
    [{ name: 'x'.repeat(201) }, 'body.name', 'a name over 200 characters'],
    [{ name: 'two\nlines' }, 'body.name', 'a name over two lines'],
    [{ description: 'x'.repeat(2001) }, 'body.description', 'a description over 2000 characters'],
    [{ surface_type: 'meetings' }, 'body.surface_type', 'a member that cannot be edited'],
    [{ name: 'ok', publish_state: 'published' }, 'body.publish_state', 'an unknown member beside a known one'],
    [{ name: 5 }, 'body.name', 'a name that is not a string'],
    [{ description: '   ' }, 'body.description', 'a blank description (empty is the way to remove it)'],
  ];
  for (const [body, field, what] of bad) {
    const res = await edit(owner, id, body);
    expectError(t, res, 400, 'invalid_request', what);
    t.match(res.body.error, { field }, `${what}: names ${field}`);
  }
  expectError(t, await owner.req('PATCH', `/v1/service/platforms/${id}`, undefined), 400, 'invalid_request', 'no body');
  expectError(t, await owner.req('PATCH', `/v1/service/platforms/${id}`, undefined, { csrf: false }), 403,
    'csrf_required', 'without the CSRF header');
  t.match((await owner.get(`/v1/service/platforms/${id}`)).body, { name: 'Acme Travel', description: 'Books trips.' });

  // Roles: only those with platforms_manage (owner, admin) edit.
  const admin = await addMember(owner, sc, orgId, 'admin@edit.example.org', 'admin');
  t.match((await edit(admin, id, { name: 'Acme Trips' })).body, { name: 'Acme Trips' }, 'an admin edits');
  for (const role of ['approver', 'auditor', 'member']) {
    const c = await addMember(owner, sc, orgId, `${role}@edit.example.org`, role);
    const res = await edit(c, id, { name: `by ${role}` });
    expectError(t, res, 403, 'role_forbidden', `${role} is refused`);
    t.match(res.body.error, { role, permission: 'platforms_manage' });
  }

  // Another workspace (an organisation, a person) gets the GET's 404, and the platform is untouched.
  const { c: rival } = await orgOwner(sc, 'owner@rival.example.org', 'Rival');
  const person = await onboard(sc, 'person@example.com');
  for (const [c, who] of [[rival, 'another organisation'], [person, 'a personal workspace']] as const) {
    expectError(t, await c.get(`/v1/service/platforms/${id}`), 404, 'platform_not_found', `${who}: GET`);
    expectError(t, await edit(c, id, { name: 'Stolen' }), 404, 'platform_not_found', `${who}: PATCH`);
  }
  expectError(t, await edit(owner, 'no-such-platform', { name: 'x' }), 404, 'platform_not_found');
  t.equal((await owner.get(`/v1/service/platforms/${id}`)).body.name, 'Acme Trips');

  // The organisation's chain: one platform.updated per edit that changed something, naming the members.
  const audit = await owner.get('/v1/service/audit/personal?limit=100&event_type=platform.updated');
  t.equal(audit.status, 200);
  const events = (audit.body.events as { event_type: string; details: Record<string, unknown> }[]).reverse();
  t.same(events.map((e) => e.event_type), ['platform.updated', 'platform.updated', 'platform.updated']);
  t.match(events.map((e) => e.details), [
    { platform_id: id, changed: ['description'], description: 'Books trips.\nWorldwide.' },
    { platform_id: id, changed: ['name', 'description'], name: 'Acme Travel', description: 'Books trips.' },
    { platform_id: id, changed: ['name'], name: 'Acme Trips' },
  ]);
  const ownerId = (await owner.get('/v1/auth/session')).body.account_id;
  const adminId = (await admin.get('/v1/auth/session')).body.account_id;
  t.same(events.map((e) => e.details.actor_account_id), [ownerId, ownerId, adminId], 'who acted');
});

if (dnsmasqMissing()) {
  t.pass('skipped: dnsmasq is not installed (.ci/run installs it)', { skip: true });
} else {
  t.test('a described platform publishes; the directory shows edits at once; its description stays', async (t) => {
    const dns = await startDnsmasq(['example.org'], {});
    t.teardown(() => dns.close());
    const sc = await startSidecar({ sendCodePerMinute: 100, dnsServers: [dns.address] });
    t.teardown(() => sc.close());
    const { c: acme, orgId } = await orgOwner(sc, 'owner@acme.example.org', 'Acme');
    const claim = await acme.req('PUT', '/v1/service/organization/domain', { domain: 'acme.example.org' });
    await dns.setRecords({ [claim.body.record_name]: [[claim.body.record_text]] });
    t.equal((await acme.post('/v1/service/organization/domain/verify')).body.state, 'verified');
    const reg = await acme.post('/v1/service/platforms', { name: 'Acme Travel', surface_type: 'agentic_api',
      default_allowed_scopes: ['data:read'], callback_url: 'http://127.0.0.1:9/hook' });
    const id = reg.body.platform_id as string;
    const publish = () => acme.post(`/v1/service/platforms/${id}/publish`);

    expectError(t, await publish(), 409, 'description_required', 'registered without a description');
    await edit(acme, id, { description: 'Books trips.' });
    t.equal((await publish()).body.publish_state, 'published', 'published once described');

    const reader = await onboard(sc, 'reader@example.com');
    const entry = async () => (await reader.get('/v1/service/directory')).body.platforms;
    t.match(await entry(), [{ platform_id: id, name: 'Acme Travel', description: 'Books trips.',
      publisher: { organization_id: orgId } }]);
    t.match((await edit(acme, id, { name: 'Acme Trips', description: 'Books trips and hotels.' })).body,
      { publish_state: 'published' });
    t.match(await entry(), [{ platform_id: id, name: 'Acme Trips', description: 'Books trips and hotels.' }],
      'the directory shows the edit at once');

    for (const body of [{ description: '' }, { name: 'Renamed', description: '' }]) {
      const res = await edit(acme, id, body);
      expectError(t, res, 409, 'description_required', `a published platform keeps a description (${JSON.stringify(body)})`);
      t.match(res.body.error, { field: 'body.description' });
    }
    t.match(await entry(), [{ name: 'Acme Trips', description: 'Books trips and hotels.' }], 'nothing changed');

    const callback = (url: string | null) => acme.req('PUT', `/v1/service/platforms/${id}/callback`, { callback_url: url });
    expectError(t, await callback(null), 409, 'callback_url_required', 'a published platform keeps a callback');
    t.equal((await acme.get(`/v1/service/platforms/${id}`)).body.callback_url, 'http://127.0.0.1:9/hook', 'kept');
    t.equal((await callback('http://127.0.0.1:9/other')).body.callback_url, 'http://127.0.0.1:9/other',
      'a published platform may change its callback');

    t.equal((await acme.post(`/v1/service/platforms/${id}/unpublish`)).body.publish_state, 'unpublished');
    t.equal((await callback(null)).body.callback_url, null, 'unpublished, the callback can be cleared');
    expectError(t, await publish(), 409, 'callback_url_required', 'and it cannot be published again without one');
    await callback('http://127.0.0.1:9/hook');
    t.match((await edit(acme, id, { description: '' })).body, { description: '', publish_state: 'unpublished' },
      'unpublished, the description can be removed');
    expectError(t, await publish(), 409, 'description_required', 'and it cannot be published again without one');
  });
}
