/**
 * SSRF rules: the registration-time URL check, the address classifier, and
 * the connect-time checks of the dispatcher and the worker against a real
 * listener on 127.0.0.1 that must never see a connection unless the insecure
 * flag is set.
 */
import t from 'tap';
import { DESTINATION_NOT_ALLOWED } from '../../../sidecar/webhooks/deliver.js';
import { request } from 'undici';
import type { LookupAddress } from 'node:dns';
import {
  MAX_CALLBACK_URL_LENGTH, SsrfBlockedError, blockedAddressReason, createSafeDispatcher, createSafeLookup, isPublicAddress,
  validateCallbackUrl,
} from '../../../sidecar/webhooks/ssrf.js';
import { WebhookWorker } from '../../../sidecar/webhooks/worker.js';
import { addPlatform, enqueue, memoryLogger, openFixture, row, startReceiver } from './helpers.js';

t.test('validateCallbackUrl refuses private, odd and malformed targets', async (t) => {
  const refused = [
    'https://127.0.0.1/hook',
    'https://127.0.0.1:8443/hook',
    'https://10.0.0.1/',
    'https://172.16.5.4/',
    'https://192.168.1.1/',
    'https://100.64.0.1/',
    'https://169.254.169.254/latest/meta-data/',
    'https://0.0.0.0/',
    'https://0/',
    'https://224.0.0.1/',
    'https://255.255.255.255/',
    'https://[::1]/',
    'https://[::]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[::ffff:10.1.2.3]/',
    'https://[::ffff:7f00:1]/',
    'https://[::127.0.0.1]/',
    'https://[fc00::1]/',
    'https://[fd12:3456::1]/',
    'https://[fe80::1]/',
    'https://[ff02::1]/',
    'https://[64:ff9b::127.0.0.1]/',
    'https://[64:ff9b::a9fe:a9fe]/',
    'https://[2002:7f00:1::]/',
    'https://[2002:c0a8:101::1]/',
    'https://[2001:db8::1]/',
    'https://2130706433/',
    'https://0x7f.1/',
    'https://0x7f000001/',
    'https://017700000001/',
    'https://127.1/',
    'https://0177.0.0.1/',
    'https://localhost/',
    'https://LOCALHOST./',
    'https://api.localhost/',
    'http://example.com/hook',
    'ftp://example.com/',
    'file:///etc/passwd',
    'https://user:pass@example.com/',
    'https://user@example.com/',
    'https://example.com/hook#frag',
    'https://example.com/hook#',
    'not a url',
    '',
    `https://example.com/${'a'.repeat(MAX_CALLBACK_URL_LENGTH)}`,
  ];
  for (const url of refused) {
    const r = validateCallbackUrl(url, false);
    t.equal(r.ok, false, `refused: ${url.slice(0, 60)}`);
    if (!r.ok) t.type(r.reason, 'string');
  }
  const accepted = [
    'https://example.com/hook',
    'https://hooks.example.com:8443/a/b?c=d',
    'https://93.184.216.34/hook',
    'https://[2606:4700:4700::1111]/hook',
    'https://[64:ff9b::808:808]/',
    'https://[::ffff:8.8.8.8]/',
    `https://example.com/${'a'.repeat(MAX_CALLBACK_URL_LENGTH - 'https://example.com/'.length)}`,
  ];
  for (const url of accepted) t.same(validateCallbackUrl(url, false), { ok: true }, `accepted: ${url.slice(0, 60)}`);
});

t.test('allowInsecure lifts the scheme and address rules only', async (t) => {
  t.same(validateCallbackUrl('http://127.0.0.1:8080/hook', true), { ok: true });
  t.same(validateCallbackUrl('https://localhost/', true), { ok: true });
  t.same(validateCallbackUrl('http://10.0.0.1/', true), { ok: true });
  t.equal(validateCallbackUrl('ftp://127.0.0.1/', true).ok, false);
  t.equal(validateCallbackUrl('http://u:p@127.0.0.1/', true).ok, false);
  t.equal(validateCallbackUrl('http://127.0.0.1/#x', true).ok, false);
});

t.test('address classifier', async (t) => {
  const blocked = [
    '0.1.2.3', '10.255.255.255', '100.127.255.255', '127.255.0.1', '169.254.0.1', '172.31.255.255', '192.0.0.8', '192.0.2.1',
    '192.168.0.1', '198.18.0.1', '198.19.255.255', '198.51.100.7', '203.0.113.9', '224.0.0.251', '239.255.255.250', '240.0.0.1',
    '::', '::1', '[::1]', '::ffff:127.0.0.1', '::ffff:169.254.169.254', '::ffff:0.0.0.0', '64:ff9b::10.0.0.1', '64:ff9b:1::1',
    '2002:0a00:0001::', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:db8::', '3fff::1', 'fc00::', 'fdff:ffff::1', 'fe80::1',
    'febf::1', 'fec0::1', 'ff00::', '100::1', '::ffff:0:7f00:1', 'fe80::1%eth0', 'example.com', '1.2.3', '256.1.1.1',
  ];
  for (const a of blocked) t.not(blockedAddressReason(a), null, `blocked: ${a} (${blockedAddressReason(a)})`);
  const allowed = ['1.1.1.1', '8.8.8.8', '93.184.216.34', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0',
    '192.169.0.1', '2606:4700:4700::1111', '2a00:1450:4001:81b::200e', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::1'];
  for (const a of allowed) t.ok(isPublicAddress(a), `public: ${a}`);
});

/** A resolver that maps every name to fixed addresses (simulates DNS; a rebinding name answers loopback at connect time). */
const fixedResolver = (map: Record<string, LookupAddress[]>) => async (hostname: string): Promise<LookupAddress[]> => {
  const r = map[hostname];
  if (!r) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return r;
};

t.test('safe lookup: every resolved address is checked; results filtered by family', async (t) => {
  const resolve = fixedResolver({
    'mixed.test': [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }],
    'public.test': [{ address: '93.184.216.34', family: 4 }, { address: '2606:4700:4700::1111', family: 6 }],
    'rebind.test': [{ address: '127.0.0.1', family: 4 }],
  });
  const lookup = createSafeLookup(resolve, false);
  const call = (host: string, opts: Parameters<typeof lookup>[1]) =>
    new Promise<{ err: Error | null; addr: unknown; fam: unknown }>((res) => lookup(host, opts, (err, addr, fam) => res({ err, addr, fam })));
  t.type((await call('mixed.test', { all: true })).err, SsrfBlockedError, 'one private address refuses the host');
  t.type((await call('rebind.test', {})).err, SsrfBlockedError);
  t.type((await call('localhost', { all: true })).err, Error);
  t.same(await call('public.test', { all: true }), { err: null, addr: [{ address: '93.184.216.34', family: 4 }, { address: '2606:4700:4700::1111', family: 6 }], fam: undefined });
  t.same(await call('public.test', { family: 6 }), { err: null, addr: '2606:4700:4700::1111', fam: 6 });
  t.same(await call('public.test', 4), { err: null, addr: '93.184.216.34', fam: 4 });
  t.match((await call('nowhere.test', {})).err, { code: 'ENOTFOUND' });
  // Insecure: no checks, still the given resolver.
  const open = createSafeLookup(resolve, true);
  const r = await new Promise<unknown>((res) => open('rebind.test', {}, (_e, a) => res(a)));
  t.equal(r, '127.0.0.1');
});

t.test('the dispatcher refuses private targets at connect time; the listener sees no connection', async (t) => {
  const rx = await startReceiver();
  t.teardown(() => rx.close());
  const resolve = fixedResolver({ 'rebind.test': [{ address: '127.0.0.1', family: 4 }] });
  const agent = createSafeDispatcher({ allowInsecure: false, connectTimeoutMs: 2_000, resolve });
  t.teardown(() => agent.close());
  const p = rx.port;
  const targets = [
    `https://127.0.0.1:${p}/`,
    `https://[::1]:${p}/`,
    `https://[::ffff:127.0.0.1]:${p}/`,
    `https://2130706433:${p}/`,
    `https://0x7f.1:${p}/`,
    `https://10.0.0.1:${p}/`,
    `https://169.254.169.254:${p}/`,
    `https://localhost:${p}/`,
    `https://rebind.test:${p}/`,
    `http://127.0.0.1:${p}/`,
    `http://rebind.test:${p}/`,
  ];
  for (const url of targets) {
    const err = await request(url, { method: 'POST', body: '{}', dispatcher: agent }).then(() => null, (e: unknown) => e);
    t.type(err, SsrfBlockedError, `refused: ${url}`);
  }
  // The system resolver: a name that resolves to loopback.
  const system = createSafeDispatcher({ allowInsecure: false, connectTimeoutMs: 2_000 });
  t.teardown(() => system.close());
  for (const url of [`https://localhost:${p}/`, `https://localhost.:${p}/`]) {
    const err = await request(url, { method: 'POST', body: '{}', dispatcher: system }).then(() => null, (e: unknown) => e);
    t.type(err, SsrfBlockedError, `refused with the system resolver: ${url}`);
  }
  t.equal(rx.connections, 0, 'nothing reached the listener');
});

t.test('with allowInsecure the dispatcher reaches a loopback http receiver (through the given resolver)', async (t) => {
  const rx = await startReceiver();
  t.teardown(() => rx.close());
  const agent = createSafeDispatcher({ allowInsecure: true, resolve: fixedResolver({ 'rebind.test': [{ address: '127.0.0.1', family: 4 }] }) });
  t.teardown(() => agent.close());
  const res = await request(`http://rebind.test:${rx.port}/hook`, { method: 'POST', body: '{}', dispatcher: agent });
  await res.body.dump();
  t.equal(res.statusCode, 204);
  t.equal(rx.requests.length, 1);
});

t.test('the worker never reaches private targets without the insecure flag', async (t) => {
  const rx = await startReceiver();
  const f = openFixture();
  const logger = memoryLogger();
  const resolve = fixedResolver({ 'rebind.test': [{ address: '127.0.0.1', family: 4 }], 'public.test': [{ address: '127.0.0.1', family: 4 }] });
  const worker = new WebhookWorker({ store: f.outbox, platforms: undefined, box: f.box, allowInsecure: false, logger, resolve, timeoutMs: 2_000 });
  t.teardown(async () => { await worker.stop(); await rx.close(); f.close(); });
  const p = rx.port;
  const targets = [
    `https://127.0.0.1:${p}/hook`,
    `https://10.0.0.1:${p}/hook`,
    `https://169.254.169.254:${p}/latest/meta-data/`,
    `https://[::1]:${p}/hook`,
    `https://[::ffff:127.0.0.1]:${p}/hook`,
    `https://2130706433:${p}/hook`,
    `https://0x7f.1:${p}/hook`,
    `https://localhost:${p}/hook`,
    `https://rebind.test:${p}/hook`,
    `https://nowhere.test:${p}/hook`,
    `http://127.0.0.1:${p}/hook`,
  ];
  const ids = new Map<string, string>();
  for (const url of targets) {
    const pid = addPlatform(f, url, 'secret');
    ids.set(enqueue(f, pid, Date.now()).id, url);
  }
  let outcomes: Awaited<ReturnType<WebhookWorker['tick']>> = [];
  for (let i = 0; i < 5 && outcomes.length < targets.length; i++) outcomes = outcomes.concat(await worker.tick());
  t.equal(outcomes.length, targets.length);
  for (const o of outcomes) {
    t.equal(o.result, 'failed', `failed: ${ids.get(o.deliveryId)}`);
    t.equal(o.status, null);
    t.match(o.error, /^(callback URL refused|destination_not_allowed)/, `refusal recorded: ${o.error}`);
    t.equal(row(f, o.deliveryId).state, 'pending', 'retried on the schedule like any failure');
  }
  const rebind = outcomes.find((o) => ids.get(o.deliveryId)!.includes('rebind.test'))!;
  t.same(validateCallbackUrl(ids.get(rebind.deliveryId)!, false), { ok: true }, 'the rebinding name passes the URL check…');
  t.equal(rebind.error, DESTINATION_NOT_ALLOWED, '…and is refused at connect time');
  t.notMatch(rebind.error, /127\.0\.0\.1/, 'the stored error does not reveal what the name resolved to');
  // No DNS existence oracle: a name that resolves to a private address and a name that does not
  // resolve at all are recorded the same way; the log tells operators which it was.
  const nowhere = outcomes.find((o) => ids.get(o.deliveryId)!.includes('nowhere.test'))!;
  t.equal(nowhere.error, rebind.error, 'an unresolvable name is recorded exactly like a private one');
  t.ok(logger.lines.some((l) => l.msg === 'webhook target host name does not resolve'), 'the operator log says the name does not resolve');
  t.ok(logger.lines.some((l) => l.msg === 'webhook target refused by the SSRF guard'), 'and that the other was refused by the guard');
  t.equal(rx.connections, 0, 'the loopback listener received nothing');
});

t.test('the worker with allowInsecure reaches a loopback http receiver', async (t) => {
  const rx = await startReceiver();
  const f = openFixture();
  const worker = new WebhookWorker({ store: f.outbox, platforms: undefined, box: f.box, allowInsecure: true, logger: memoryLogger() });
  t.teardown(async () => { await worker.stop(); await rx.close(); f.close(); });
  const pid = addPlatform(f, rx.url, 'secret');
  const ev = enqueue(f, pid, Date.now());
  t.same((await worker.tick()).map((o) => o.result), ['delivered']);
  t.equal(rx.requests[0]!.headers['x-service-delivery-id'], ev.id);
});
