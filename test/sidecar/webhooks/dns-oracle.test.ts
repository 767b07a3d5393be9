/**
 * No DNS existence oracle, through the real server (issue 20 §4): a sidecar
 * with the SSRF guard on (SIDECAR_WEBHOOK_ALLOW_INSECURE off) and the system
 * resolver (no test seam). Two account holders (one personal platform
 * each) register a platform: one whose callback host name resolves to a
 * loopback/private address (a name from /etc/hosts, e.g. the machine's host
 * name), one whose host name does not resolve (under the reserved `.invalid`
 * TLD). Without such a name here, the test is skipped and says why. Registration accepts both:
 * it checks the URL without resolving it (only literal addresses and
 * `localhost` are refused up front, shown here too). Each registration's
 * `connection.created` delivery then fails, and the account holder's
 * delivery list and detail show the same outcome for both
 * (`destination_not_allowed`, no status, nothing about addresses or DNS
 * codes), while the operator log tells the two apart (the guard's refusal
 * with the resolved address, the failed lookup with its code). The loopback
 * listener the private name points at is never connected to.
 */
import t from 'tap';
import os from 'node:os';
import { Writable } from 'node:stream';
import { lookup } from 'node:dns/promises';
import { randomBytes } from 'node:crypto';
import { onboard, startSidecar, expectError } from '../../helpers/sidecar.js';
import type { Client, Res } from '../../helpers/sidecar.js';
import { DESTINATION_NOT_ALLOWED } from '../../../sidecar/webhooks/deliver.js';
import { blockedAddressReason, validateCallbackUrl } from '../../../sidecar/webhooks/ssrf.js';
import { startReceiver } from './helpers.js';

/** A host name (not localhost) that the system resolver maps only to non-public addresses, or null. */
async function privateName(): Promise<{ name: string; addresses: string[] } | null> {
  for (const name of [os.hostname(), 'runsc', 'vm', 'ip6-localhost', 'ip6-loopback']) {
    if (!validateCallbackUrl(`https://${name}/`, false).ok) continue;
    const found = await lookup(name, { all: true }).catch(() => []);
    if (found.length > 0 && found.every((a) => blockedAddressReason(a.address) !== null)) return { name, addresses: found.map((a) => a.address) };
  }
  return null;
}

/** Polls the account's delivery list (every 50 ms, at most 15 s) until `pred` holds. */
async function deliveriesWhen(user: Client, pred: (d: Record<string, any>[]) => boolean): Promise<Record<string, any>[]> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const end = Date.now() + 15_000;
  let list: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
  while (Date.now() < end) {
    const r = await user.get('/v1/service/webhooks/deliveries');
    if (r.status !== 200) throw new Error(`deliveries: ${r.status} ${r.text}`);
    list = r.body.deliveries;
    if (pred(list)) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  return list;
}

const priv = await privateName();
const nowhere = `no-such-host-${randomBytes(6).toString('hex')}.invalid`;
const nowhereResolves = await lookup(nowhere, { all: true }).then((a) => a.length > 0, () => false);
const skip = !priv ? 'no host name here resolves only to a private or loopback address (e.g. via /etc/hosts)'
  : nowhereResolves ? `${nowhere} resolves here: the resolver rewrites unknown names` : false;

t.test('a private name and a name that does not resolve look the same to the account holder', { skip }, async (t) => {
  if (!priv) return;
  const rx = await startReceiver();
  const log: Record<string, any>[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
  const logStream = new Writable({ write(chunk: Buffer, _enc, cb) { for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) log.push(JSON.parse(l)); cb(); } });
  const sc = await startSidecar({ webhookAllowInsecure: false, logLevel: 'warn' }, { logStream, webhook: { pollIntervalMs: 50, timeoutMs: 3000 } });
  t.teardown(async () => { await sc.close(); await rx.close(); });
  const [ua, ub] = [await onboard(sc, 'oracle-a@example.com'), await onboard(sc, 'oracle-b@example.com')];
  const register = (user: Client, name: string, callback_url: string): Promise<Res> =>
    user.post('/v1/service/platforms/personal', { name, surface_type: 'agentic_api', default_allowed_scopes: ['data:read'], callback_url });

  // Up front, only literal addresses and localhost are refused; host names are not resolved.
  for (const url of [`https://127.0.0.1:${rx.port}/hook`, `https://localhost:${rx.port}/hook`]) {
    const r = await register(ua, 'literal', url);
    expectError(t, r, 400, 'invalid_callback_url', url);
    t.equal(r.body.error.field, 'body.callback_url');
  }
  const a = await register(ua, 'private-name', `https://${priv.name}:${rx.port}/hook`);
  const b = await register(ub, 'no-such-name', `https://${nowhere}:${rx.port}/hook`);
  t.same([a.status, b.status], [200, 200], `both host names are accepted at registration (${priv.name} → ${priv.addresses.join(', ')}; ${nowhere})`);

  // Each account holder reads their own delivery list.
  const attempted = (p: Res) => (ds: Record<string, any>[]) => ds.some((d) => d.platform_id === p.body.platform_id && d.attempts >= 1); // eslint-disable-line @typescript-eslint/no-explicit-any
  const [la, lb] = [await deliveriesWhen(ua, attempted(a)), await deliveriesWhen(ub, attempted(b))];
  const [da, db] = [la.find((d) => d.platform_id === a.body.platform_id)!, lb.find((d) => d.platform_id === b.body.platform_id)!];
  t.ok(da && db, 'each platform has its connection.created delivery, attempted');
  const outcome = (d: Record<string, unknown>) => ({ event: d.event, state: d.state, attempts: d.attempts, last_status: d.last_status, last_error: d.last_error });
  t.same(outcome(da), { event: 'connection.created', state: 'pending', attempts: 1, last_status: null, last_error: DESTINATION_NOT_ALLOWED }, 'the private name: destination_not_allowed');
  t.same(outcome(db), outcome(da), 'the unresolvable name: exactly the same outcome');
  const detail = async (user: Client, d: Record<string, unknown>) => (await user.get(`/v1/service/webhooks/deliveries/${String(d.delivery_id)}`)).body as { attempt_history: { status: unknown; error: unknown }[] };
  const [ha, hb] = [await detail(ua, da), await detail(ub, db)];
  t.same(ha.attempt_history.map((x) => [x.status, x.error]), [[null, DESTINATION_NOT_ALLOWED]], 'the attempt history of the private name');
  t.same(hb.attempt_history.map((x) => [x.status, x.error]), [[null, DESTINATION_NOT_ALLOWED]], 'the same for the unresolvable name');
  const seen = JSON.stringify([da, db, ha, hb]);
  for (const leak of [...priv.addresses, 'ENOTFOUND', 'EAI_AGAIN', 'SSRF', 'getaddrinfo', 'resolve']) t.notOk(seen.includes(leak), `the account holder's view does not say ${JSON.stringify(leak)}`);

  // The operator log tells them apart (warn lines with the delivery id).
  const about = (d: Record<string, unknown>) => log.filter((l) => l.deliveryId === d.delivery_id);
  t.match(about(da), [{ msg: 'webhook target refused by the SSRF guard', platformId: a.body.platform_id, detail: new RegExp(`${priv.name}.*resolves to (${priv.addresses.map((x) => x.replace(/[.:]/g, '\\$&')).join('|')})`) }], 'operators see the guard refused the private name, and its address');
  t.match(about(db), [{ msg: 'webhook target host name does not resolve', platformId: b.body.platform_id, detail: /ENOTFOUND|EAI_AGAIN|EAI_NONAME/ }], 'operators see the other name does not resolve');
  t.equal(rx.connections, 0, 'nothing connected to the loopback listener the private name points at');
});
