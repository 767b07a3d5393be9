/**
 * The publisher-domain lookup (sidecar/publishing/dns.ts, issue 32) against a real DNS server on
 * loopback (dnsmasq): verified, a mismatch, an absent record, a record that goes away, a long
 * record split into strings, and a server that does not answer.
 */
import t from 'tap';
import { checkDomain, domainResolver, isDnsServer } from '../../../sidecar/publishing/dns.js';
import { domainRecordText } from '../../../src/publisher-domain.js';
import { dnsmasqMissing, startDnsmasq } from '../../helpers/dnsmasq.js';

const TOKEN = 'dG9rZW4tZm9yLXRoZS1wdWJsaXNoZXItZG9tYWluLXRlc3Q';
const OTHER = 'b3RoZXItdG9rZW4tZm9yLXRoZS1wdWJsaXNoZXItZG9tYWlu';

if (dnsmasqMissing()) {
  t.pass('skipped: dnsmasq is not installed (apt-get install dnsmasq; .ci/run installs it)', { skip: true });
} else {
  t.test('a real DNS server answers each outcome', async (t) => {
    const long = domainRecordText(`${TOKEN}${'A'.repeat(80)}`);
    const dns = await startDnsmasq(['example.org'], {
      '_agent-authz.pub.example.org': [['v=spf1 -all'], [domainRecordText(TOKEN)]],
      '_agent-authz.wrong.example.org': [[domainRecordText(OTHER)]],
      '_agent-authz.long.example.org': [[long.slice(0, 60), long.slice(60)]],
    });
    t.teardown(() => dns.close());
    const resolver = domainResolver({ servers: [dns.address], timeoutMs: 1_000, tries: 2 });
    t.same(await checkDomain(resolver, 'pub.example.org', TOKEN), { outcome: 'verified', name: '_agent-authz.pub.example.org' });
    t.same(await checkDomain(resolver, 'wrong.example.org', TOKEN), { outcome: 'mismatch', name: '_agent-authz.wrong.example.org' });
    t.same(await checkDomain(resolver, 'long.example.org', `${TOKEN}${'A'.repeat(80)}`),
      { outcome: 'verified', name: '_agent-authz.long.example.org' }, 'a record in two strings');
    t.same(await checkDomain(resolver, 'none.example.org', TOKEN),
      { outcome: 'absent', name: '_agent-authz.none.example.org', errorCode: 'ENOTFOUND' });

    // The publisher removes the record: the next check says absent, not unreachable.
    await dns.setRecords({ '_agent-authz.pub.example.org': [['v=spf1 -all']] });
    t.same(await checkDomain(resolver, 'pub.example.org', TOKEN), { outcome: 'mismatch', name: '_agent-authz.pub.example.org' });
    await dns.setRecords({});
    t.same(await checkDomain(resolver, 'pub.example.org', TOKEN),
      { outcome: 'absent', name: '_agent-authz.pub.example.org', errorCode: 'ENOTFOUND' });
  });

  t.test('a server that does not answer is unreachable, not absent', async (t) => {
    const dns = await startDnsmasq(['example.org'], {});
    const address = dns.address;
    await dns.close();
    const resolver = domainResolver({ servers: [address], timeoutMs: 200, tries: 1 });
    const got = await checkDomain(resolver, 'pub.example.org', TOKEN);
    t.equal(got.outcome, 'unreachable');
    t.match(got.errorCode, /^E[A-Z]+$/);
    t.not(got.errorCode, 'ENOTFOUND');
  });
}

t.test('server addresses', async (t) => {
  for (const s of ['127.0.0.1', '127.0.0.1:5353', '::1', '[::1]:53', '[2001:db8::1]']) t.ok(isDnsServer(s), s);
  for (const s of ['localhost', 'localhost:53', '127.0.0.1:0', '127.0.0.1:70000', '[::1', '::1:53x', '', '1.2.3.4:']) {
    t.notOk(isDnsServer(s), `${JSON.stringify(s)} refused`);
  }
  t.throws(() => domainResolver({ servers: ['dns.example.org'], timeoutMs: 100, tries: 1 }), TypeError);
});
