/**
 * The pure rules of publisher-domain verification (src/publisher-domain.ts, issue 32).
 */
import t from 'tap';
import { DOMAIN_RECORD_PREFIX, canonicalDomain, domainRecordName, domainRecordText, recordsProve } from '../../src/publisher-domain.js';

const TOKEN = 'Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5';

t.test('canonicalDomain', async (t) => {
  const ok: [string, string][] = [
    ['example.org', 'example.org'], ['Pub.Example.ORG', 'pub.example.org'], ['pub.example.org.', 'pub.example.org'],
    [' a-b.co.uk ', 'a-b.co.uk'], ['xn--bcher-kva.de', 'xn--bcher-kva.de'], [`${'a'.repeat(63)}.com`, `${'a'.repeat(63)}.com`],
  ];
  for (const [input, want] of ok) t.equal(canonicalDomain(input), want, `${JSON.stringify(input)} → ${want}`);
  const refused: unknown[] = [
    'org', '', '.', 'a..b', '-a.org', 'a-.org', 'a_b.org', 'bücher.de', '127.0.0.1', '10.0.0.1', 'localhost', 'pub.localhost',
    'x.local', 'x.internal', 'x.invalid', 'x.test', 'x.example', `${'a'.repeat(64)}.com`, `${'a.'.repeat(127)}com`, 'a b.org',
    'a.org/x', 'https://a.org', null, 7, ['a.org'],
  ];
  for (const v of refused) t.equal(canonicalDomain(v), null, `${JSON.stringify(v)} is refused`);
});

t.test('record name and text', async (t) => {
  t.equal(domainRecordName('pub.example.org'), '_agent-authz.pub.example.org');
  t.throws(() => domainRecordName('Pub.Example.org'), TypeError, 'only canonical domains');
  t.equal(domainRecordText(TOKEN), `${DOMAIN_RECORD_PREFIX}${TOKEN}`);
  t.throws(() => domainRecordText('short'), TypeError);
  t.throws(() => domainRecordText(`${TOKEN}=`), TypeError);
});

t.test('recordsProve', async (t) => {
  const text = domainRecordText(TOKEN);
  t.ok(recordsProve([[text]], TOKEN), 'one record');
  t.ok(recordsProve([['v=spf1 -all'], [text]], TOKEN), 'among other records');
  t.ok(recordsProve([[text.slice(0, 20), text.slice(20)]], TOKEN), 'split into character-strings');
  t.notOk(recordsProve([], TOKEN), 'no records');
  t.notOk(recordsProve([[`${text} `]], TOKEN), 'trailing space');
  t.notOk(recordsProve([[text.toUpperCase()]], TOKEN), 'case matters');
  t.notOk(recordsProve([[text.slice(0, 20)], [text.slice(20)]], TOKEN), 'halves in two records');
  t.notOk(recordsProve([[domainRecordText(`${TOKEN}x`)]], TOKEN), 'another token');
});
