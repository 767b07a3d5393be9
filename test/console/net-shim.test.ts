/**
 * The console's browser `isIP` (console/src/shims/net.ts), which the shared
 * constraint validator uses in the page, agrees with Node's `net.isIP` — so
 * the console accepts and refuses exactly the client_ips the API does.
 */
import net from 'node:net';
import t from 'tap';
import fc from 'fast-check';
import { isIP } from '../../console/src/shims/net.js';

const CASES = [
  '1.2.3.4', '255.255.255.255', '256.1.1.1', '01.2.3.4', '1.2.3', '1.2.3.4.5', '0.0.0.0', ' 1.2.3.4', '1.2.3.4 ',
  '::', '::1', '1::', '2001:db8::', '2001:db8::1:2:3:4:5', '2001:0db8:0000:0000:0000:ff00:0042:8329', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9',
  '::ffff:192.0.2.1', '::ffff:192.0.2.256', '64:ff9b::1.2.3.4', 'fe80::1%eth0', 'fe80::1%', ':::', '1::2::3', 'g::1', '12345::',
  '1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:7:1.2.3.4', '', 'localhost', '[::1]', '::1/64',
];

t.test('known cases', async (t) => {
  for (const s of CASES) t.equal(isIP(s), net.isIP(s), JSON.stringify(s));
});

t.test('random addresses and near-addresses', async (t) => {
  const hex = fc.stringMatching(/^[0-9a-fA-F]{0,5}$/);
  const v6 = fc.array(fc.oneof(hex, fc.constant(''), fc.ipV4()), { minLength: 1, maxLength: 10 }).map((p) => p.join(':'));
  const v4ish = fc.array(fc.integer({ min: 0, max: 300 }).map(String), { minLength: 1, maxLength: 5 }).map((p) => p.join('.'));
  const any = fc.oneof(fc.ipV4(), fc.ipV6(), fc.ipV4Extended(), v6, v4ish, fc.string({ maxLength: 20 }));
  fc.assert(fc.property(any, (s) => isIP(s) === net.isIP(s)), { numRuns: 5000, seed: 24 });
  t.pass('5000 inputs agree');
});
