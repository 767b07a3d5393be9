/**
 * End-to-end acceptance of the gateway against the REAL sidecar (in process,
 * real HTTP on 127.0.0.1, real SMTP receiver, real SQLite): the spec flow
 * (login → onboarding → platform → agent → delegation), then requests through
 * a real gateway in front of a recording upstream.
 *
 * - self-flow: the gateway holds the agent platform's own API key, so the
 *   default `present(flow)` (challenge with that key) builds proofs the
 *   gateway can verify;
 * - cross-platform: a second account's platform is the gateway's key; the
 *   gateway hands out a challenge on 401, the agent's platform presents THAT
 *   challenge, and the retried request passes.
 *
 * Covered: decision headers reach the upstream and the proof does not; 403
 * not_delegated / delegation_revoked / constraint_denied / proof_rejected
 * (spent proof, foreign audience); 401 proof_required with a usable
 * challenge; the amount comes from the body, never a header; the body is
 * forwarded byte for byte; the gateway's request id reaches the sidecar;
 * gateway and sidecar metrics; fail_open_total stays 0.
 */

import t from 'tap';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { delegateAgent, onboard, present, presentChallenge, specFlow, startSidecar } from '../helpers/sidecar.js';
import type { Flow } from '../helpers/sidecar.js';
import { gatewayConfig, metricSum, proofHeader, send, startGatewayWithKey, startUpstream } from './helpers.js';
import type { Recorded } from './helpers.js';

t.setTimeout(40_000);

// ---- the sidecar's JSON log lines, captured (logStream is a BuildOptions member) ----
const logLines: string[] = [];
let partial = '';
const logStream = new Writable({
  write(chunk: Buffer, _encoding, done) {
    partial += chunk.toString('utf8');
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    logLines.push(...parts.filter((l) => l !== ''));
    done();
  },
});
function logRecords(): Record<string, unknown>[] {
  return logLines.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

const sc = await startSidecar({ logLevel: 'info' }, { logStream });
const up = await startUpstream();
t.teardown(async () => {
  await up.close();
  await sc.close();
});

// Account A: platform (its API key is the self-flow gateway's key) + agents.
const reader: Flow = await specFlow(sc, 'owner-a@example.com', { scopes: ['data:read', 'data:write', 'payments:send'], approve: ['data:read'] });
const payer: Flow = await delegateAgent(reader, 'payer', { approve: ['payments:send'], constraints: { max_amount: { amount: '50.00', currency: 'USD' } } });
const doomed: Flow = await delegateAgent(reader, 'doomed', { approve: ['data:read'] });

const ROUTES = [
  { method: 'GET', path: '/v1/items/*', scope: 'data:read' },
  { method: 'POST', path: '/v1/items', scope: 'data:write' },
  // The idempotency ledger (on by default for payments:*) has its own tests (idempotency*.test.ts).
  {
    method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' },
    idempotency: 'off',
  },
  { method: 'GET', path: '/public/status', public: true },
];
const config = gatewayConfig(up.url, sc.url, { routes: ROUTES, verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000 });
const gw = await startGatewayWithKey(config, reader.reg.api_key as string);
t.teardown(() => gw.close());
const metricsUrl = gw.metricsUrl ?? '';

/** What the gateway and sidecar metrics must show at the end (exact counts). */
const tally = { allowed: 0, public: 0, proofRequired: 0, notDelegated: 0, revoked: 0, constraint: 0, invalidChallenge: 0, sidecarAllow: 0 };

/** Asserts a status; the body is shown only when it differs. */
function expectStatus(t: Test, res: { status: number; text: string }, want: number, what: string): void {
  t.equal(res.status, want, `${what}: ${want}`, res.status === want ? {} : { body: res.text.slice(0, 600) });
}

const proofFor = async (f: Flow): Promise<Record<string, string>> => ({ 'x-service-proof': proofHeader(await present(f)) });
const received = (): number => up.received.length;
const last = (): Recorded => up.received[up.received.length - 1] as Recorded;

await t.test('a delegated route reaches the upstream with the decision headers and without the proof', async (t) => {
  const before = received();
  const headers = { ...(await proofFor(reader)), 'x-service-agent-id': 'spoofed-agent', 'x-service-decision': 'allow' };
  const res = await send(gw.url, '/v1/items/abc/def?x=1&y=%20', { headers });
  expectStatus(t, res, 200, 'res');
  t.same(res.json, { ok: true, upstream: true }, 'the upstream answer comes back');
  tally.allowed += 1;
  tally.sidecarAllow += 1;
  t.equal(received(), before + 1, 'upstream called once');
  const r = last();
  t.equal(r.method, 'GET');
  t.equal(r.url, '/v1/items/abc/def?x=1&y=%20', 'path and query as sent');
  t.equal(r.headers['x-service-decision'], 'allow');
  t.equal(r.headers['x-service-scope'], 'data:read');
  t.equal(r.headers['x-service-agent-id'], reader.agentId, 'the verified agent, not the client copy');
  t.equal(r.headers['x-service-cert-id'], reader.certId);
  t.notOk('x-service-proof' in r.headers, 'the proof is not forwarded');
  t.notOk('x-service-api-key' in r.headers, 'no API key is forwarded');
  t.same(Object.keys(r.headers).filter((h) => h.startsWith('x-service-')).sort(), ['x-service-agent-id', 'x-service-cert-id', 'x-service-decision', 'x-service-scope']);
  t.match(r.headers['x-request-id'], /^[0-9a-f-]{36}$/, "the upstream sees the gateway's request id");
});

await t.test('a public route needs no proof', async (t) => {
  const before = received();
  const res = await send(gw.url, '/public/status');
  t.equal(res.status, 200);
  tally.public += 1;
  t.equal(received(), before + 1);
  t.equal(last().headers['x-service-decision'], 'public');
  t.notOk('x-service-scope' in last().headers);
});

await t.test('a route whose scope was not approved is 403 not_delegated; the upstream is not called', async (t) => {
  const before = received();
  const res = await send(gw.url, '/v1/items', { method: 'POST', headers: { ...(await proofFor(reader)), 'content-type': 'application/json' }, body: '{"name":"x"}' });
  expectStatus(t, res, 403, 'res');
  t.equal(res.json?.error?.code, 'not_delegated');
  t.equal(res.headers['cache-control'], 'no-store');
  tally.notDelegated += 1;
  t.equal(received(), before, 'upstream untouched');
});

await t.test('a missing proof is 401 proof_required with a usable challenge; a spent proof is 403 invalid_challenge', async (t) => {
  const before = received();
  const res = await send(gw.url, '/v1/items/1');
  expectStatus(t, res, 401, 'res');
  tally.proofRequired += 1;
  t.equal(res.json?.error?.code, 'proof_required');
  t.equal(res.json?.error?.required_scope, 'data:read');
  const challenge = res.json?.error?.challenge as string;
  t.match(challenge, /^[A-Za-z0-9_-]{43}$/, 'a real sidecar challenge');
  t.equal(res.headers['www-authenticate'], `ServiceProof realm="agent-authz", scope="data:read", challenge="${challenge}"`);
  t.equal(received(), before, 'upstream never called without a proof');

  // The agent's platform presents the gateway's challenge; the retry passes.
  const pr = await presentChallenge(reader, challenge);
  expectStatus(t, pr, 200, 'pr');
  const header = { 'x-service-proof': proofHeader(pr.body.proof_bundle) };
  t.equal(pr.body.proof_header, header['x-service-proof'], "the sidecar's ready-made header is the same base64");
  const ok = await send(gw.url, '/v1/items/1', { headers: header });
  expectStatus(t, ok, 200, 'ok');
  tally.allowed += 1;
  tally.sidecarAllow += 1;
  t.equal(received(), before + 1);

  // The same proof again: its challenge is spent.
  const again = await send(gw.url, '/v1/items/1', { headers: header });
  expectStatus(t, again, 403, 'again');
  t.equal(again.json?.error?.code, 'proof_rejected');
  t.equal(again.json?.error?.reason, 'invalid_challenge');
  tally.invalidChallenge += 1;
  t.equal(received(), before + 1, 'the replay never reached the upstream');

  // Blank proof header counts as missing.
  const blank = await send(gw.url, '/v1/items/1', { headers: { 'x-service-proof': ' ' } });
  t.equal(blank.status, 401);
  tally.proofRequired += 1;
});

await t.test('max_amount: the body amount decides, the body is forwarded byte for byte', async (t) => {
  const json = { 'content-type': 'application/json' };
  const pay = async (body: string, extra: Record<string, string> = {}) =>
    send(gw.url, '/v1/payments', { method: 'POST', headers: { ...(await proofFor(payer)), ...json, ...extra }, body });
  const before = received();

  const over = await pay('{"amount": 75, "currency":"USD"}');
  expectStatus(t, over, 403, 'over');
  t.equal(over.json?.error?.code, 'constraint_denied');
  t.equal(over.json?.error?.constraint, 'max_amount');
  tally.constraint += 1;

  const misleading = await pay('{"amount": 75, "currency":"USD"}', { 'x-amount': '1', 'x-currency': 'USD' });
  t.equal(misleading.status, 403, 'an amount in a header is ignored: the body decides');
  t.equal(misleading.json?.error?.constraint, 'max_amount');
  tally.constraint += 1;

  const otherCurrency = await pay('{"amount": "20.00", "currency":"eur"}');
  t.equal(otherCurrency.status, 403, 'another currency is denied');
  t.equal(otherCurrency.json?.error?.constraint, 'max_amount');
  tally.constraint += 1;

  const noAmount = await pay('{"currency":"USD"}');
  t.equal(noAmount.status, 403, 'a constraint whose context is missing denies');
  t.equal(noAmount.json?.error?.constraint, 'max_amount');
  tally.constraint += 1;
  t.equal(received(), before, 'no denied payment reached the upstream');

  const body = '{ "amount" : "20.00",\n  "currency":"USD", "memo": "caf\u00e9 \u2603" }';
  const under = await pay(body);
  expectStatus(t, under, 200, 'under');
  tally.allowed += 1;
  tally.sidecarAllow += 1;
  t.equal(received(), before + 1);
  t.ok(last().body.equals(Buffer.from(body, 'utf8')), 'the upstream received the body byte for byte');
  t.equal(last().headers['content-type'], 'application/json');
  t.equal(last().headers['x-service-scope'], 'payments:send');
  t.equal(last().headers['x-service-agent-id'], payer.agentId);
  t.equal(last().headers['x-service-cert-id'], payer.certId);

  const limit = await pay('{"amount": 50.000, "currency":"USD"}');
  t.equal(limit.status, 200, 'exactly the limit passes (exact decimal comparison)');
  tally.allowed += 1;
  tally.sidecarAllow += 1;
  const exponent = await pay('{"amount": 5.0001e1, "currency":"USD"}');
  t.equal(exponent.status, 403, '50.001 written with an exponent is over the limit');
  tally.constraint += 1;
  t.equal(received(), before + 2);
});

await t.test('after revoke: a bundle built before the revoke is 403 delegation_revoked; no new proof can be made', async (t) => {
  const before = received();
  const ok = await send(gw.url, '/v1/items/1', { headers: await proofFor(doomed) });
  t.equal(ok.status, 200, 'allowed before the revoke');
  tally.allowed += 1;
  tally.sidecarAllow += 1;
  const early = await proofFor(doomed); // presented, not yet verified

  const rv = await doomed.user.post(`/v1/service/delegations/${doomed.certId}/revoke`, { reason: 'e2e' });
  expectStatus(t, rv, 200, 'rv');
  t.equal(rv.body.status, 'revoked');

  const res = await send(gw.url, '/v1/items/1', { headers: early });
  expectStatus(t, res, 403, 'res');
  t.equal(res.json?.error?.code, 'delegation_revoked');
  tally.revoked += 1;

  // A fresh proof: the gateway's 401 challenge can no longer be presented for this agent.
  const unauth = await send(gw.url, '/v1/items/1');
  t.equal(unauth.status, 401);
  tally.proofRequired += 1;
  const pr = await presentChallenge(doomed, unauth.json?.error?.challenge as string);
  t.equal(pr.status, 404, 'present refuses an agent whose certificate is revoked');
  t.equal(pr.body?.error?.code, 'no_active_delegation');
  t.equal(received(), before + 1, 'only the pre-revoke request reached the upstream');

  // Other agents on the same connection are unaffected.
  const other = await send(gw.url, '/v1/items/1', { headers: await proofFor(reader) });
  t.equal(other.status, 200);
  tally.allowed += 1;
  tally.sidecarAllow += 1;
});

await t.test('request id: the gateway makes its own id and it reaches the sidecar and the upstream', async (t) => {
  const clientId = `e2e-${randomBytes(8).toString('hex')}`;
  const res = await send(gw.url, '/v1/items/rid', { headers: { ...(await proofFor(reader)), 'x-request-id': clientId } });
  expectStatus(t, res, 200, 'res');
  tally.allowed += 1;
  tally.sidecarAllow += 1;
  // Documented in docs/gateway.md "Headers": the gateway ignores and strips the client's
  // X-Request-Id and makes its own; that id goes to verify and to the upstream, and comes back
  // to the client on every answer, forwarded ones included.
  const gatewayId = last().headers['x-request-id'] as string;
  t.match(gatewayId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'the upstream sees a UUID made by the gateway');
  t.not(gatewayId, clientId, 'the client id is not adopted');
  t.equal(res.headers['x-request-id'], gatewayId, 'an allowed answer carries the gateway id, so the client can correlate with sidecar logs');
  t.notOk(logLines.some((l) => l.includes(clientId)), 'the client id never reaches the sidecar');
  const sidecarLines = logRecords().filter((r) => r.request_id === gatewayId);
  t.ok(sidecarLines.some((r) => JSON.stringify(r.req ?? {}).includes('/v1/service/verify')), 'the sidecar logged the verify call under the gateway id');
  t.ok(sidecarLines.some((r) => (r.res as { statusCode?: number } | undefined)?.statusCode === 200), 'and its completion');

  const unauth = await send(gw.url, '/v1/items/rid', { headers: { 'x-request-id': clientId } });
  t.equal(unauth.status, 401);
  tally.proofRequired += 1;
  const unauthId = unauth.headers['x-request-id'] as string;
  t.ok(logRecords().some((r) => r.request_id === unauthId && JSON.stringify(r).includes('/v1/service/challenge')), 'the challenge fetch carries the gateway id too');
  t.notOk(logLines.some((l) => l.includes(reader.reg.api_key as string)), 'the API key is never logged by the sidecar');
});

await t.test('another account\'s gateway: the agent cannot present its challenge and nothing passes', async (t) => {
  const owner = await onboard(sc, 'gateway-owner-b@example.com');
  const reg = await owner.post('/v1/service/platforms/personal', { name: 'Gateway B', surface_type: 'agentic_api', default_allowed_scopes: ['data:read'] });
  expectStatus(t, reg, 200, 'reg');
  const gwB = await startGatewayWithKey(gatewayConfig(up.url, sc.url, { routes: ROUTES, verify_timeout_ms: 10_000, challenge_timeout_ms: 5_000, metrics: false }), reg.body.api_key as string);
  t.teardown(() => gwB.close());
  const before = received();

  const unauth = await send(gwB.url, '/v1/items/x');
  t.equal(unauth.status, 401);
  const challenge = unauth.json?.error?.challenge as string;
  t.match(unauth.headers['www-authenticate'], `challenge="${challenge}"`);
  // A challenge belongs to the connection whose key asked for it: account A's agent cannot present it.
  const pr = await presentChallenge(reader, challenge);
  expectStatus(t, pr, 400, 'present for another account\'s challenge');
  t.equal(pr.body?.error?.code, 'invalid_challenge');
  // A proof built on the agent platform's own challenge (audience A) is refused by gateway B.
  const ownAudience = await send(gwB.url, '/v1/items/x', { headers: await proofFor(reader) });
  t.equal(ownAudience.status, 403);
  t.equal(ownAudience.json?.error?.code, 'proof_rejected');
  t.equal(ownAudience.json?.error?.reason, 'invalid_challenge');
  t.equal(received(), before, 'nothing reached the upstream through gateway B');

  // Unbilled: nothing of B's was spent.
  const usage = await owner.get('/v1/service/usage/personal');
  expectStatus(t, usage, 200, 'usage');
  t.same([usage.body.allows, usage.body.verify_calls], [0, 0], 'no allow and no billed call on the gateway owner\'s account');
});

await t.test('metrics: gateway outcomes by reason, sidecar decision counters, fail_open_total = 0', async (t) => {
  const g = (labels: Record<string, string>) => metricSum(metricsUrl, 'agent_authz_gateway_requests_total', labels);
  t.equal(await g({ outcome: 'allowed', reason: 'authorized' }), tally.allowed, 'allowed');
  t.equal(await g({ outcome: 'public', reason: 'public' }), tally.public, 'public');
  t.equal(await g({ outcome: '401', reason: 'proof_required' }), tally.proofRequired, '401 proof_required');
  t.equal(await g({ outcome: '403', reason: 'not_delegated' }), tally.notDelegated, '403 not_delegated');
  t.equal(await g({ outcome: '403', reason: 'delegation_revoked' }), tally.revoked, '403 delegation_revoked');
  t.equal(await g({ outcome: '403', reason: 'constraint_denied' }), tally.constraint, '403 constraint_denied');
  // the tally counts gateway A's refusals only; gateway B refused one more (see the sidecar below)
  t.equal(await g({ outcome: '403', reason: 'invalid_challenge' }), tally.invalidChallenge, '403 proof_rejected by reason invalid_challenge');
  t.equal(await metricSum(metricsUrl, 'agent_authz_gateway_fail_open_total'), 0, 'fail_open_total is 0');
  t.ok(await metricSum(metricsUrl, 'agent_authz_gateway_verify_duration_seconds_count', { result: 'allow' }) >= tally.allowed, 'verify latency observed');

  const s = `${sc.url}/metrics`;
  const d = (labels: Record<string, string>) => metricSum(s, 'agent_authz_verify_decisions_total', labels);
  t.equal(await d({ decision: 'allow', reason: 'authorized' }), tally.sidecarAllow, 'sidecar allows');
  t.equal(await d({ decision: 'deny', reason: 'not_delegated' }), tally.notDelegated, 'sidecar not_delegated');
  t.equal(await d({ decision: 'deny', reason: 'delegation_revoked' }), tally.revoked, 'sidecar delegation_revoked');
  t.equal(await d({ decision: 'deny', reason: 'constraint_denied' }), tally.constraint, 'sidecar constraint_denied');
  t.equal(await d({ decision: 'indeterminate' }), 0, 'no indeterminate decision');
  t.equal(await metricSum(s, 'agent_authz_verify_errors_total', { code: 'invalid_challenge' }), tally.invalidChallenge + 1, 'sidecar invalid_challenge (both gateways)');
});
