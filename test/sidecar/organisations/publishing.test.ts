/**
 * Publishing against a real DNS server on loopback (dnsmasq; issue 32): an organisation claims a
 * publisher domain, proves it with a TXT record, publishes a platform that has a callback and a
 * description, and appears in the directory; a second organisation cannot take the verified
 * domain; the re-check lapses the claim when the record goes, unpublishing at once, but not when
 * the server does not answer; the moves of the publish state and their refusals.
 */
import t from 'tap';
import { expectError, onboard, startSidecar } from '../../helpers/sidecar.js';
import type { Client } from '../../helpers/sidecar.js';
import { dnsmasqMissing, startDnsmasq } from '../../helpers/dnsmasq.js';
import { orgOwner } from '../../helpers/organisations.js';
import type { TxtRecords } from '../../helpers/dnsmasq.js';
import { recheckDomains } from '../../../sidecar/publishing/recheck.js';

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
    expectError(t, await acme.post(`/v1/service/platforms/${bare.body.platform_id}/unpublish`), 409, 'publish_state_invalid',
      'a draft cannot be unpublished');

    const reader = await onboard(sc, 'reader@example.com');
    const entry = { platform_id: reg.body.platform_id, name: 'Acme Travel', description: 'Books trips.', surface_type: 'agentic_api',
      scopes: ['data:read', 'payments:send'], publisher: { organization_id: acmeId, name: 'Acme', verified_domain: 'acme.example.org' } };
    t.same((await reader.get('/v1/service/directory')).body, { platforms: [entry] }, 'any signed-in person reads the directory');
    expectError(t, await reader.req('PUT', '/v1/service/organization/domain', { domain: 'reader.example.org' }), 403,
      'account_type_not_supported');

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
  });
}
