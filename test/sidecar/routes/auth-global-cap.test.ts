/**
 * The global cap on login codes (`SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE`),
 * through the real server with a controlled clock: codes over the cap in one
 * minute are refused with `429 rate_limited` and `Retry-After`, counted in
 * `agent_authz_login_codes_total{result="global_limited"}` and announced by one
 * `warn` line per window; a request the cap refuses does not use up its
 * address's codes, and one the address's limit refuses does not use up the cap.
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { Client, startSidecar } from '../../helpers/sidecar.js';
import type { Res, TestSidecar } from '../../helpers/sidecar.js';
import { expectError } from '../decide/helpers.js';
import { parsePrometheusText, sampleValue } from '../ops/helpers.js';

const CAP = 3;

/** The sidecar's JSON log lines, as parsed records. */
function capture(): { stream: Writable; records(): Record<string, unknown>[] } {
  const lines: string[] = [];
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop() ?? '';
      lines.push(...parts.filter((l) => l !== ''));
      done();
    },
  });
  return { stream, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const RESULTS = ['sent', 'ip_limited', 'address_limited', 'global_limited', 'mail_failed'] as const;

/** `agent_authz_login_codes_total` by result (-1 when a series is missing). */
async function codes(sc: TestSidecar): Promise<Record<typeof RESULTS[number], number>> {
  const m = parsePrometheusText(await (await fetch(`${sc.url}/metrics`)).text());
  const value = (result: string): number => sampleValue(m, 'agent_authz_login_codes_total', 'agent_authz_login_codes_total', { result }) ?? -1;
  return { sent: value('sent'), ip_limited: value('ip_limited'), address_limited: value('address_limited'), global_limited: value('global_limited'), mail_failed: value('mail_failed') };
}

t.test('global cap: bounded, visible, and fair to the addresses', async (t) => {
  const log = capture();
  // N = 5: 5 sends per client IP per minute, 10 codes per address per hour.
  const sc = await startSidecar({ sendCodePerMinute: 5, sendCodeGlobalPerMinute: CAP, trustProxy: ['127.0.0.1'], logLevel: 'warn' }, { logStream: log.stream });
  t.teardown(() => sc.close());
  const c = new Client(sc.url);
  let ip = 0;
  const send = (email: string): Promise<Res> => c.post('/v1/auth/email/send-code', { email }, { headers: { 'x-forwarded-for': `2001:db8:0:${(ip++).toString(16)}::1` } });
  const capLines = (): Record<string, unknown>[] => log.records().filter((r) => r.msg?.toString().startsWith('login-code global cap reached'));
  const mailTo = (email: string): number => sc.mail.messages.filter((m) => m.to === email).length;

  t.same(await codes(sc), { sent: 0, ip_limited: 0, address_limited: 0, global_limited: 0, mail_failed: 0 }, 'every result is exported from the start');
  for (let i = 0; i < CAP; i++) t.equal((await send(`a${i}@example.com`)).status, 200, `code ${i + 1} of the minute`);
  sc.clock.advance(20_000);
  const over = await send('a9@example.com');
  expectError(t, over, 429, 'rate_limited', 'over the cap');
  t.match(over.body.error.message, /Too many sign-in codes are being sent right now/);
  t.equal(over.headers.get('retry-after'), '40', 'Retry-After: the rest of the minute');
  t.equal(over.body.error.retry_after, 40);
  for (let i = 0; i < 12; i++) expectError(t, await send('patient@example.com'), 429, 'rate_limited', `the cap refuses patient@ (${i + 1})`);
  t.equal(mailTo('a9@example.com') + mailTo('patient@example.com'), 0, 'nothing e-mailed over the cap');
  t.same(await codes(sc), { sent: CAP, ip_limited: 0, address_limited: 0, global_limited: 13, mail_failed: 0 }, 'counted');
  t.equal(capLines().length, 1, 'one warn line for the window, not one per refusal');
  t.match(capLines()[0], { level: 40, cap: CAP, window_ends_at: new Date(sc.clock.now() + 40_000).toISOString() });

  sc.clock.advance(40_000);
  t.equal((await send('patient@example.com')).status, 200, 'the next minute: 12 refusals by the cap did not use up the address\'s 10 codes');
  // The other 9 codes of the hour, CAP a minute.
  for (let minute = 0, used = 1; minute < 5 && mailTo('patient@example.com') < 10; minute++, used = 0) {
    for (let i = used; i < CAP && mailTo('patient@example.com') < 10; i++) t.equal((await send('patient@example.com')).status, 200);
    sc.clock.advance(60_000);
  }
  t.equal(mailTo('patient@example.com'), 10, 'the address got its 10 codes of the hour');
  const before = await codes(sc);
  for (let i = 0; i < 5; i++) {
    const r = await send('patient@example.com');
    expectError(t, r, 429, 'rate_limited', `the 11th code in the hour (${i + 1})`);
    t.match(r.body.error.message, /for this address/);
  }
  for (let i = 0; i < CAP; i++) t.equal((await send(`b${i}@example.com`)).status, 200, `the address's refusals did not use up the cap (${i + 1})`);
  expectError(t, await send('b9@example.com'), 429, 'rate_limited', 'the cap of this minute');
  const after = await codes(sc);
  t.same([after.address_limited - before.address_limited, after.sent - before.sent, after.global_limited - before.global_limited], [5, CAP, 1]);
  t.equal(capLines().length, 2, 'a second capped window logs again, once');
});
