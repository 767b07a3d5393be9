/**
 * Webhooks end to end: a real sidecar on 127.0.0.1 (test/helpers/sidecar.ts,
 * real SMTP receiver), the spec flow driven over HTTP, and a real `node:http`
 * receiver as the platform's callback. Every event kind of spec 6.2 is
 * produced by the routes and checked as it arrived on the wire: headers,
 * the HMAC by hand with node:crypto over the raw body, the 6.2 fields and
 * their types, and `cert_json` verified offline with the account's root key.
 * Then the account operations: the delivery list and detail, a redelivery
 * (same id and bytes, fresh signature), a callback change (later events go to
 * the new receiver) and another account's 404s.
 */
import t from 'tap';
import { onboard, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Client, Flow, TestSidecar } from '../../helpers/sidecar.js';
import { verifyCertificate } from '../../../src/certificate.js';
import { publicKeyFromJson } from '../../../src/crypto/hybrid.js';
import { deliveryId, said, startHookReceiver, transportProblems, waitFor, UUID_RE } from './fixtures/hooks.js';
import type { Hit, HookReceiver } from './fixtures/hooks.js';

type FieldType = 'string' | 'string|null' | 'array' | 'object';
/** Spec 6.2 fields per kind, with the types docs/webhooks.md promises. */
const FIELDS: Record<string, Record<string, FieldType>> = {
  'connection.created': {
    connection_id: 'string', platform_id: 'string', org_id: 'string', org_name: 'string', allowed_scopes: 'array',
    callback_url: 'string|null', api_key: 'string', webhook_signing_secret: 'string',
  },
  'connection.key_rotated': { connection_id: 'string', api_key_prefix: 'string', previous_prefix: 'string' },
  'connection.removed': { connection_id: 'string', org_id: 'string', removed_at: 'string' },
  'delegation.approved': {
    request_id: 'string', connection_id: 'string', org_id: 'string', agent_id: 'string', approved_scope: 'array',
    cert_json: 'object', delegation_key_statement: 'string',
  },
  'delegation.denied': { request_id: 'string', connection_id: 'string', org_id: 'string', agent_id: 'string' },
  'delegation.revoked': { cert_id: 'string', agent_id: 'string', connection_id: 'string', org_id: 'string', reason: 'string' },
};

function fieldProblems(body: Record<string, unknown>): string[] {
  const spec = FIELDS[String(body.event)];
  if (!spec) return [`unknown event ${String(body.event)}`];
  const p: string[] = [];
  for (const [k, type] of Object.entries(spec)) {
    const v = body[k];
    const ok = type === 'string' ? typeof v === 'string'
      : type === 'string|null' ? typeof v === 'string' || v === null
        : type === 'array' ? Array.isArray(v) && v.every((s) => typeof s === 'string')
          : typeof v === 'object' && v !== null && !Array.isArray(v);
    if (!ok) p.push(`${String(body.event)}.${k} is not ${type}: ${JSON.stringify(v)}`);
  }
  return p;
}

const EMAIL = 'webhooks-e2e@example.test';
const WAIT_MS = 15_000;

let sc: TestSidecar;
let rx1: HookReceiver;
let rx2: HookReceiver;
let flow: Flow;
let user: Client;
let secret: string;
let connId: string;
let accountId: string;
let rootKey: unknown;
const ids: Record<string, string> = {};
const results: Record<string, any> = {}; // eslint-disable-line @typescript-eslint/no-explicit-any

t.before(async () => {
  rx1 = await startHookReceiver();
  rx2 = await startHookReceiver();
  sc = await startSidecar({}, { webhook: { pollIntervalMs: 100 } });
  // The harness clock is frozen; keep it on real time so timestamps are "now" (it may be pushed ahead).
  const ticker = setInterval(() => { sc.clock.t = Math.max(sc.clock.t, Date.now()); }, 20);
  ticker.unref();
  t.teardown(async () => {
    clearInterval(ticker);
    await sc.close();
    await rx1.close();
    await rx2.close();
  });
});

/** The hits of one receiver by event kind. */
const byEvent = (rx: HookReceiver, event: string): Hit[] => rx.hits.filter((h) => h.body.event === event);

t.test('the flow emits every event kind to the callback, signed', async (t) => {
  flow = await specFlow(sc, EMAIL, { callbackUrl: rx1.url, approve: ['data:read'] });
  user = flow.user;
  secret = flow.reg.webhook_signing_secret;
  connId = flow.reg.connection_id;
  t.match(secret, /^whsec_/);
  const ident = await user.get('/v1/service/identity');
  t.equal(ident.status, 200);
  accountId = ident.body.account_id;
  rootKey = ident.body.root_public_key;

  // A second request on the same connection (one agent: self-request picks it), denied.
  const sr2 = await user.post('/v1/service/delegations/self-request', { connection_id: connId });
  t.equal(sr2.status, 200, said(sr2, 'second self-request'));
  ids.deniedRequest = sr2.body.request_id;
  const deny = await user.post(`/v1/service/delegations/requests/${ids.deniedRequest}/deny`, { reason: 'not this time' });
  t.equal(deny.status, 200, said(deny, 'deny'));

  // A third request, approved; that certificate stays approved until the connection is removed.
  const sr3 = await user.post('/v1/service/delegations/self-request', { connection_id: connId });
  t.equal(sr3.status, 200, said(sr3, 'third self-request'));
  ids.request3 = sr3.body.request_id;
  const ap3 = await user.post(`/v1/service/delegations/requests/${ids.request3}/approve`, { approved_scope: ['data:read', 'data:write'] });
  t.equal(ap3.status, 200, said(ap3, 'approve the third request'));
  ids.cert3 = ap3.body.cert_id;

  // Revoke the first certificate; rotate the API key.
  const rv = await user.post(`/v1/service/delegations/${flow.certId}/revoke`, { reason: 'e2e revoke' });
  t.equal(rv.status, 200, said(rv, 'revoke'));
  t.equal(rv.body.already_revoked, false);
  const rot = await user.post(`/v1/service/connections/${connId}/rotate-key`);
  t.equal(rot.status, 200, said(rot, 'rotate-key'));
  results.rot = rot.body;

  const expected = ['connection.created', 'delegation.approved', 'delegation.approved', 'delegation.denied', 'delegation.revoked', 'connection.key_rotated'];
  await waitFor(`${expected.length} deliveries at the first receiver`, WAIT_MS, () => rx1.answered().length >= expected.length);
  t.same(rx1.hits.map((h) => String(h.body.event)).sort(), [...expected].sort(), 'each event exactly once, nothing else');
  t.same(rx2.hits, [], 'nothing at the second receiver yet');
  t.equal(new Set(rx1.hits.map(deliveryId)).size, rx1.hits.length, 'distinct delivery ids');

  for (const h of rx1.hits) {
    t.same(transportProblems(h, secret), [], `${String(h.body.event)} ${deliveryId(h)}: headers, timestamp and signature`);
    t.same(fieldProblems(h.body), [], `${String(h.body.event)}: spec 6.2 fields and types`);
    t.equal(h.headers['user-agent'], 'agent-authz-webhooks/1');
    t.equal(h.raw.toString('utf8'), JSON.stringify(h.body), 'compact JSON, not pretty-printed');
  }

  const [created] = byEvent(rx1, 'connection.created');
  t.match(created!.body, {
    connection_id: connId, platform_id: flow.reg.platform_id, org_id: accountId, org_name: 'Test platform',
    allowed_scopes: ['data:read', 'data:write', 'payments:send'], callback_url: rx1.url,
    api_key: flow.reg.api_key, webhook_signing_secret: secret,
  });

  const approved = byEvent(rx1, 'delegation.approved');
  const verifier = publicKeyFromJson(rootKey);
  t.ok(verifier, 'root public key from /v1/service/identity parses');
  for (const [requestId, scope] of [[flow.requestId, ['data:read']], [ids.request3!, ['data:read', 'data:write']]] as const) {
    const h = approved.find((x) => x.body.request_id === requestId);
    t.ok(h, `delegation.approved for ${requestId}`);
    if (!h) continue;
    t.match(h.body, { connection_id: connId, org_id: accountId, agent_id: flow.agentId, approved_scope: scope });
    const cert = h.body.cert_json as { payload: { cert_id: string; scopes: string[] } };
    const check = verifyCertificate(cert, verifier!, Date.now());
    t.ok(check.ok, 'cert_json verifies offline with the root key');
    if (check.ok) t.equal(check.expired, false);
    t.same(cert.payload.scopes, scope);
    const served = await user.get(`/v1/service/delegations/${cert.payload.cert_id}`);
    t.equal(served.status, 200);
    t.same(h.body.cert_json, served.body.cert_json, 'cert_json is the object the API serves');
    t.match(String(h.body.delegation_key_statement), cert.payload.cert_id);
  }
  ids.cert1Approved = deliveryId(approved.find((x) => x.body.request_id === flow.requestId)!);

  const [denied] = byEvent(rx1, 'delegation.denied');
  t.match(denied!.body, { request_id: ids.deniedRequest, connection_id: connId, org_id: accountId, agent_id: flow.agentId, reason: 'not this time' });
  const [revoked] = byEvent(rx1, 'delegation.revoked');
  t.match(revoked!.body, { cert_id: flow.certId, agent_id: flow.agentId, connection_id: connId, org_id: accountId, reason: 'e2e revoke' });
  const [rotated] = byEvent(rx1, 'connection.key_rotated');
  t.match(rotated!.body, { connection_id: connId, api_key_prefix: results.rot.api_key_prefix, previous_prefix: flow.reg.api_key_prefix });
  t.equal(results.rot.previous_prefix, flow.reg.api_key_prefix);
});

t.test('deliveries list and detail show them delivered with their attempts', async (t) => {
  // The attempt is recorded right after the answer: wait for the bookkeeping too.
  const list = await waitFor('all deliveries recorded as delivered', WAIT_MS, async () => {
    const r = await user.get('/v1/service/webhooks/deliveries');
    return r.status === 200 && r.body.deliveries.length === rx1.hits.length
      && r.body.deliveries.every((d: { state: string }) => d.state === 'delivered') ? r : undefined;
  });
  t.equal(list.body.next_cursor, null);
  t.same(list.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id).sort(), rx1.hits.map(deliveryId).sort());
  for (const d of list.body.deliveries) {
    const hit = rx1.hits.find((h) => deliveryId(h) === d.delivery_id)!;
    t.match(d, {
      platform_id: flow.reg.platform_id, connection_id: connId, event: hit.body.event, state: 'delivered', attempts: 1,
      next_attempt_at: null, last_status: 204, last_error: null, delivered_at: String, created_at: String,
    }, `${String(d.event)} listed`);
    t.match(d.delivery_id, UUID_RE);
  }
  const byState = await user.get(`/v1/service/webhooks/deliveries?state=delivered&platform_id=${flow.reg.platform_id}&limit=2`);
  t.equal(byState.status, 200);
  t.equal(byState.body.deliveries.length, 2);
  t.type(byState.body.next_cursor, 'string', 'paged');

  const one = await user.get(`/v1/service/webhooks/deliveries/${ids.cert1Approved}`);
  t.equal(one.status, 200, said(one, 'delivery detail'));
  t.match(one.body, { delivery_id: ids.cert1Approved, event: 'delegation.approved', state: 'delivered', attempts: 1 });
  t.equal(one.body.attempt_history.length, 1);
  t.match(one.body.attempt_history[0], { attempt: 1, attempted_at: String, status: 204, error: null, duration_ms: Number });
});

t.test('redeliver re-sends the same id and bytes with a fresh signature', async (t) => {
  const first = rx1.hits.find((h) => deliveryId(h) === ids.cert1Approved)!;
  const firstTs = Number(first.headers['x-service-timestamp']);
  // Make sure the attempt's timestamp (whole seconds) is a later one.
  sc.clock.t = Math.max(sc.clock.t, (firstTs + 1) * 1000 + 100);
  const before = rx1.hits.length;
  const r = await user.post(`/v1/service/webhooks/deliveries/${ids.cert1Approved}/redeliver`);
  t.equal(r.status, 200, said(r, 'redeliver'));
  t.match(r.body, { delivery_id: ids.cert1Approved, state: 'pending', redelivery_requested_at: String });
  const again = await waitFor('the redelivery', WAIT_MS, () => rx1.hits.slice(before).find((h) => deliveryId(h) === ids.cert1Approved));
  t.ok(again.raw.equals(first.raw), 'the same body bytes');
  t.same(transportProblems(again, secret), [], 'signed by the spec formula');
  t.ok(Number(again.headers['x-service-timestamp']) > firstTs, 'a fresh timestamp');
  t.not(again.headers['x-service-signature'], first.headers['x-service-signature'], 'a fresh signature');
  const one = await waitFor('the second attempt recorded', WAIT_MS, async () => {
    const d = await user.get(`/v1/service/webhooks/deliveries/${ids.cert1Approved}`);
    return d.body?.attempts === 2 ? d : undefined;
  });
  t.match(one.body, { state: 'delivered', attempts: 2, last_status: 204 });
  t.same(one.body.attempt_history.map((a: { attempt: number; status: number }) => [a.attempt, a.status]), [[1, 204], [2, 204]]);
  t.equal(rx1.hits.length, before + 1, 'exactly one more request');
});

t.test('a new callback URL gets the later events: remove connection', async (t) => {
  const before = rx1.hits.length;
  const put = await user.req('PUT', `/v1/service/platforms/${flow.reg.platform_id}/callback`, { callback_url: rx2.url });
  t.equal(put.status, 200, said(put, 'PUT callback'));
  t.match(put.body, { platform_id: flow.reg.platform_id, callback_url: rx2.url, callback_disabled_at: null });

  const rm = await user.post(`/v1/service/connections/${connId}/remove`);
  t.equal(rm.status, 200, said(rm, 'remove connection'));
  t.same(rm.body.revoked_cert_ids, [ids.cert3], 'the still-approved certificate is revoked');

  await waitFor('2 deliveries at the second receiver', WAIT_MS, () => rx2.answered().length >= 2);
  t.same(rx2.hits.map((h) => String(h.body.event)).sort(), ['connection.removed', 'delegation.revoked']);
  for (const h of rx2.hits) {
    t.same(transportProblems(h, secret), [], `${String(h.body.event)}: signed with the same secret`);
    t.same(fieldProblems(h.body), [], `${String(h.body.event)}: spec 6.2 fields and types`);
  }
  const [revoked] = byEvent(rx2, 'delegation.revoked');
  t.match(revoked!.body, { cert_id: ids.cert3, agent_id: flow.agentId, connection_id: connId, org_id: accountId, reason: 'connection_removed' });
  const [removed] = byEvent(rx2, 'connection.removed');
  t.match(removed!.body, { connection_id: connId, org_id: accountId, removed_at: rm.body.removed_at });
  t.ok(Number.isFinite(Date.parse(String(removed!.body.removed_at))) && /Z$/.test(String(removed!.body.removed_at)), 'removed_at is ISO 8601 UTC');
  t.ok(
    Date.parse(String(revoked!.body.occurred_at)) <= Date.parse(String(removed!.body.occurred_at)),
    'revocation happened with (not after) the removal',
  );
  await new Promise((r) => setTimeout(r, 300));
  t.equal(rx1.hits.length, before, 'the old receiver gets nothing more');
  const list = await waitFor('8 deliveries delivered', WAIT_MS, async () => {
    const r = await user.get('/v1/service/webhooks/deliveries?state=delivered');
    return r.body?.deliveries?.length === 8 ? r : undefined;
  });
  t.equal(list.body.deliveries.length, 8);
});

t.test('another account sees none of it', async (t) => {
  const other = await onboard(sc, 'webhooks-e2e-other@example.test');
  const one = await other.get(`/v1/service/webhooks/deliveries/${ids.cert1Approved}`);
  t.equal(one.status, 404);
  t.equal(one.body.error.code, 'delivery_not_found');
  const before = rx1.hits.length + rx2.hits.length;
  const re = await other.post(`/v1/service/webhooks/deliveries/${ids.cert1Approved}/redeliver`);
  t.equal(re.status, 404);
  t.equal(re.body.error.code, 'delivery_not_found');
  const list = await other.get('/v1/service/webhooks/deliveries');
  t.equal(list.status, 200);
  t.same(list.body.deliveries, []);
  const put = await other.req('PUT', `/v1/service/platforms/${flow.reg.platform_id}/callback`, { callback_url: rx1.url });
  t.equal(put.status, 404, 'cannot move someone else\'s callback');
  await new Promise((r) => setTimeout(r, 300));
  t.equal(rx1.hits.length + rx2.hits.length, before, 'no delivery was triggered');
  const missing = await user.get('/v1/service/webhooks/deliveries/00000000-0000-4000-8000-000000000000');
  t.equal(missing.status, 404);
  t.equal(missing.body.error.code, 'delivery_not_found');
});
