/**
 * Publishing against a real DNS server on loopback (dnsmasq; issue 32): an organisation claims a
 * publisher domain, proves it with a TXT record, publishes a platform that has a callback and a
 * description, and appears in the directory; a second organisation cannot take the verified
 * domain; the re-check lapses the claim when the record goes, unpublishing at once, but not when
 * the server does not answer; the moves of the publish state and their refusals. Every change is an
 * administrative audit event of the workspace whose state changed (a connection's in both the connecting
 * workspace's and the publisher's chain), with no secret in any row, and the chains verify offline.
 */
import t from 'tap';
import path from 'node:path';
import { Client, expectError, onboard, startSidecar } from '../../helpers/sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../../helpers/dnsmasq.js';
import { orgOwner } from '../../helpers/organisations.js';
import type { TxtRecords } from '../../helpers/dnsmasq.js';
import { recheckDomains } from '../../../sidecar/publishing/recheck.js';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { verifyCli } from '../audit/helpers.js';

type Row = { event_type: string; connection_id: string | null; details: Record<string, unknown> };
/** The workspace's administrative audit rows, oldest first (decision events have none of these types). */
async function adminRows(c: Client): Promise<Row[]> {
  const r = await c.get('/v1/service/audit/personal?limit=200');
  if (r.status !== 200) throw new Error(`audit read: ${r.status} ${r.text}`);
  return (r.body.events as Row[]).reverse();
}

if (dnsmasqMissing()) {
  t.pass('skipped: dnsmasq is not installed (.ci/run installs it)', { skip: true });
} else {
  t.test('claim, verify, publish, the directory, a taken domain, a lapse', async (t) => {
    const records: TxtRecords = {};
    const dns = await startDnsmasq(['example.org'], records);
    t.teardown(() => dns.close());
    const sc = await startSidecar({ sendCodePerMinute: 100, dnsServers: [dns.address] });
    t.teardown(() => sc.close());
    const { c: acme, orgId: acmeId } = await orgOwner(sc, 'owner@acme.example.org', 'Acme');
    const reg = await acme.post('/v1/service/platforms', { name: 'Acme Travel', surface_type: 'agentic_api',
      default_allowed_scopes: ['data:read', 'payments:send'], description: 'Books trips.', callback_url: 'http://127.0.0.1:9/hook' });
    t.equal(reg.status, 200);
    const bare = await acme.post('/v1/service/platforms', { name: 'Acme Bare', surface_type: 'agentic_api',
      default_allowed_scopes: ['data:read'] });
    const publish = (c: Client, id: string) => c.post(`/v1/service/platforms/${id}/publish`);

    expectError(t, await publish(acme, reg.body.platform_id), 409, 'publisher_domain_unverified');
    expectError(t, await acme.get('/v1/service/organization/domain'), 404, 'domain_not_claimed');
    expectError(t, await acme.req('PUT', '/v1/service/organization/domain', { domain: 'localhost' }), 400, 'invalid_domain');
    const claim = await acme.req('PUT', '/v1/service/organization/domain', { domain: 'Acme.Example.ORG.' });
    t.match(claim.body, { domain: 'acme.example.org', record_name: '_agent-authz.acme.example.org',
      record_text: /^agent-authz-domain-verification=[A-Za-z0-9_-]{43}$/, state: 'unverified', verified_at: null });
    const v1 = await acme.post('/v1/service/organization/domain/verify');
    expectError(t, v1, 409, 'domain_not_verified', 'no record yet');
    t.match(v1.body.error, { outcome: 'absent', record_name: '_agent-authz.acme.example.org' });

    records[claim.body.record_name] = [['v=spf1 -all'], [claim.body.record_text]];
    await dns.setRecords(records);
    const v2 = await acme.post('/v1/service/organization/domain/verify');
    t.match(v2.body, { state: 'verified', last_outcome: 'verified', lapsed_at: null });
    t.ok(v2.body.verified_at, 'verified now');

    expectError(t, await publish(acme, bare.body.platform_id), 409, 'callback_url_required');
    t.match((await publish(acme, reg.body.platform_id)).body, { platform_id: reg.body.platform_id, publish_state: 'published' });
    expectError(t, await publish(acme, reg.body.platform_id), 409, 'publish_state_invalid', 'already published');
    t.equal((await acme.post(`/v1/service/platforms/${reg.body.platform_id}/unpublish`)).body.publish_state, 'unpublished');
    t.equal((await publish(acme, reg.body.platform_id)).body.publish_state, 'published', 'published again');
    expectError(t, await acme.post(`/v1/service/platforms/${bare.body.platform_id}/unpublish`), 409, 'publish_state_invalid',
      'a draft cannot be unpublished');

    const reader = await onboard(sc, 'reader@example.com');
    const entry = { platform_id: reg.body.platform_id, name: 'Acme Travel', description: 'Books trips.', surface_type: 'agentic_api',
      scopes: ['data:read', 'payments:send'], publisher: { organization_id: acmeId, name: 'Acme', verified_domain: 'acme.example.org' } };
    t.same((await reader.get('/v1/service/directory')).body, { platforms: [entry] }, 'any signed-in person reads the directory');
    expectError(t, await reader.req('PUT', '/v1/service/organization/domain', { domain: 'reader.example.org' }), 403,
      'account_type_not_supported');

    // Connections: the reader connects and removes it; Acme rotates its registration's key; a platform
    // disconnects itself with its API key.
    const conn = await reader.post(`/v1/service/directory/${reg.body.platform_id}/connect`, { allowed_scopes: ['data:read'] });
    t.equal(conn.status, 200);
    const rotated = await acme.post(`/v1/service/connections/${reg.body.connection_id}/rotate-key`);
    t.equal(rotated.status, 200);
    t.equal((await reader.post(`/v1/service/connections/${conn.body.connection_id}/remove`)).body.status, 'removed');
    const bareKey = new Client(sc.url);
    bareKey.apiKey = bare.body.api_key;
    t.equal((await bareKey.post(`/v1/service/connections/${bare.body.connection_id}/disconnect`)).body.status, 'removed');

    // A second organisation proves the same name: taken while Acme holds it.
    const { c: rival } = await orgOwner(sc, 'owner@rival.example.org', 'Rival');
    const rclaim = await rival.req('PUT', '/v1/service/organization/domain', { domain: 'acme.example.org' });
    records[rclaim.body.record_name] = [...records[rclaim.body.record_name]!, [rclaim.body.record_text]];
    await dns.setRecords(records);
    expectError(t, await rival.post('/v1/service/organization/domain/verify'), 409, 'domain_taken');

    // A server that does not answer changes nothing; the record gone lapses the claim and unpublishes.
    const later = sc.clock.now() + 25 * 3600_000;
    await dns.stop();
    t.same([...(await recheckDomains(sc.app.ctx, later))], [[acmeId, 'unchanged']], 'unreachable: no lapse');
    t.equal((await acme.get('/v1/service/organization/domain')).body.state, 'verified');
    await dns.setRecords({ [rclaim.body.record_name]: [[rclaim.body.record_text]] });
    t.same([...(await recheckDomains(sc.app.ctx, later + 25 * 3600_000))], [[acmeId, 'lapsed']], 'mismatch: lapsed');
    t.match((await acme.get('/v1/service/organization/domain')).body, { state: 'lapsed', last_outcome: 'mismatch' });
    t.equal((await acme.get(`/v1/service/platforms/${reg.body.platform_id}`)).body.publish_state, 'unpublished');
    t.same((await reader.get('/v1/service/directory')).body, { platforms: [] }, 'gone from the directory at once');
    t.match((await rival.post('/v1/service/organization/domain/verify')).body, { state: 'verified' }, 'the domain is free now');
    expectError(t, await publish(acme, reg.body.platform_id), 409, 'publisher_domain_unverified');

    // The administrative audit events, in chain order, with who acted and the ids involved.
    const [ownerId, readerId] = [(await acme.get('/v1/auth/session')).body.account_id,
      (await reader.get('/v1/auth/session')).body.account_id];
    const [p1, c1, p2, c2] = [reg.body.platform_id, reg.body.connection_id, bare.body.platform_id, bare.body.connection_id];
    const by = { actor_account_id: ownerId };
    const domain = 'acme.example.org';
    const acmeRows = await adminRows(acme);
    t.same(acmeRows.map((e) => e.event_type), ['organization.created', 'workspace.switched',
      'platform.created', 'connection.created', 'platform.created', 'connection.created', 'domain.claimed',
      'domain.verified', 'platform.published', 'platform.unpublished', 'platform.published', 'connection.created',
      'connection.key_rotated', 'connection.removed', 'connection.removed', 'domain.lapsed', 'platform.unpublished']);
    t.same(acmeRows.slice(2).map((e) => [e.connection_id, e.details]), [
      [null, { ...by, platform_id: p1, name: 'Acme Travel', surface_type: 'agentic_api' }],
      [c1, { ...by, connection_id: c1, platform_id: p1, allowed_scopes: ['data:read', 'payments:send'],
        api_key_prefix: reg.body.api_key_prefix }],
      [null, { ...by, platform_id: p2, name: 'Acme Bare', surface_type: 'agentic_api' }],
      [c2, { ...by, connection_id: c2, platform_id: p2, allowed_scopes: ['data:read'],
        api_key_prefix: bare.body.api_key_prefix }],
      [null, { ...by, domain }],
      [null, { ...by, domain }],
      [null, { ...by, platform_id: p1, from: 'draft' }],
      [null, { ...by, platform_id: p1, from: 'published' }],
      [null, { ...by, platform_id: p1, from: 'unpublished' }],
      [conn.body.connection_id, { actor_workspace_id: readerId, connection_id: conn.body.connection_id, platform_id: p1,
        workspace_id: readerId }],
      [c1, { ...by, connection_id: c1, platform_id: p1, api_key_prefix: rotated.body.api_key_prefix,
        previous_prefix: reg.body.api_key_prefix, previous_key_valid_until: rotated.body.previous_key_valid_until }],
      [conn.body.connection_id, { actor_workspace_id: readerId, connection_id: conn.body.connection_id, platform_id: p1,
        workspace_id: readerId }],
      [c2, { actor: 'platform', connection_id: c2, platform_id: p2, revoked_cert_ids: [], denied_request_ids: [] }],
      [null, { actor: 'system', domain, outcome: 'mismatch' }],
      [null, { actor: 'system', platform_id: p1, cause: 'domain_lapsed', domain }],
    ], 'Acme\'s chain: who acted and the ids involved');
    const readerRows = (await adminRows(reader)).filter((e) => e.event_type.startsWith('connection.'));
    t.same(readerRows.map((e) => [e.event_type, e.connection_id, e.details]), [
      ['connection.created', conn.body.connection_id, { actor_account_id: readerId, connection_id: conn.body.connection_id,
        platform_id: p1, allowed_scopes: ['data:read'], api_key_prefix: readerRows[0]?.details.api_key_prefix }],
      ['connection.removed', conn.body.connection_id, { actor_account_id: readerId, connection_id: conn.body.connection_id,
        platform_id: p1, revoked_cert_ids: [], denied_request_ids: [] }],
    ], 'the reader\'s chain: its connection, by the reader');
    t.match(readerRows[0]?.details.api_key_prefix, /^aak_[0-9a-f]{12}$/, 'the key named by its prefix');
    const filtered = await acme.get('/v1/service/audit/personal?limit=200&event_type=connection.removed');
    t.equal(filtered.body.events.length, 2, 'the new types are audit filters');

    // No secret in any audit row: neither these keys and secrets nor any whole key.
    const text = JSON.stringify([acmeRows, await adminRows(reader)]);
    for (const secret of [reg.body.api_key, reg.body.signing_secret, reg.body.webhook_signing_secret, bare.body.api_key,
      bare.body.signing_secret, rotated.body.api_key]) {
      t.equal(text.includes(secret as string), false, `${(secret as string).slice(0, 6)}… is in no audit row`);
    }
    t.notMatch(text, /aak_[0-9a-f]{12}_|whsec_|"ss_/, 'no whole API key or secret at all');

    // Both chains verify offline.
    await sc.app.close();
    const v = await verifyCli(['--db', path.join(sc.dataDir, DB_FILE_NAME), '--json']);
    t.equal(v.code, 0, `audit verify: ${v.stdout.slice(0, 400)}${v.stderr.slice(0, 400)}`);
    const report = JSON.parse(v.stdout) as { ok: boolean; rows: number };
    t.ok(report.ok && report.rows >= acmeRows.length, `${report.rows} rows verified`);
  });
}
