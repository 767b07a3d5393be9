/**
 * Fault matrix: every row of the verify-outcome table (spec 4.15) produced by
 * a real fake sidecar, against a real recording upstream, in EVERY mode the
 * gateway enforces in (modes.ts): the standalone proxy, the plugin in an
 * app's own Fastify server, and the forward-auth endpoint behind real NGINX,
 * real Caddy, and the Envoy and Traefik check-request shapes. For each row
 * the client's status, error code and reason/cause are checked, and the
 * upstream must have received nothing except on allow: 0 fail-opens.
 */

import t from 'tap';
import type { ServerResponse } from 'node:http';
import { ERRORS } from '../../src/errors.js';
import { MAX_SIDECAR_RESPONSE_BYTES } from '../../gateway-plugin/verify-client.js';
import { allowAll, gatewayConfig, proofHeader, reply, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';
import type { VerifyBehaviour } from './helpers.js';
import { MODES, startMode } from './modes.js';

t.setTimeout(120_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar();
const hung: ServerResponse[] = [];
t.teardown(async () => {
  for (const res of hung) res.destroy();
  await up.close();
  await sidecar.close();
});

interface Row {
  name: string;
  behaviour: VerifyBehaviour;
  status: number;
  code?: string;
  reason?: string;
  cause?: string;
  constraint?: string;
}

const json = (status: number, body: unknown, type?: string): VerifyBehaviour => (_c, res) => reply(res, status, body, type);
const deny = (reason: string | undefined, extra: Record<string, unknown> = {}): VerifyBehaviour =>
  json(200, { decision: 'deny', ...(reason === undefined ? {} : { decision_reason: reason }), ...extra });
const verifyError = (status: number, code: string): VerifyBehaviour => json(status, { error: { code, message: 'internal detail: stack at x.ts:1', status } });

const rows: Row[] = [
  { name: 'allow', behaviour: allowAll, status: 200 },
  { name: 'deny not_delegated', behaviour: deny('not_delegated'), status: 403, code: 'not_delegated' },
  { name: 'deny delegation_revoked', behaviour: deny('delegation_revoked'), status: 403, code: 'delegation_revoked' },
  { name: 'deny delegation_expired', behaviour: deny('delegation_expired'), status: 403, code: 'delegation_expired' },
  { name: 'deny constraint_denied', behaviour: deny('constraint_denied', { constraint: 'max_amount' }), status: 403, code: 'constraint_denied', constraint: 'max_amount' },
  { name: 'deny other reason', behaviour: deny('agent_suspended'), status: 403, code: 'proof_rejected', reason: 'agent_suspended' },
  { name: 'deny without reason', behaviour: deny(undefined), status: 403, code: 'proof_rejected', reason: 'unspecified' },
  { name: 'deny with unsafe reason', behaviour: deny('Bad Reason <script>'), status: 403, code: 'proof_rejected', reason: 'unspecified' },
  { name: 'indeterminate', behaviour: json(200, { decision: 'indeterminate', decision_reason: 'store_unavailable' }), status: 503, code: 'decision_indeterminate', reason: 'store_unavailable' },
  { name: 'unknown decision', behaviour: json(200, { decision: 'maybe' }), status: 503, code: 'verify_unavailable', cause: 'verify_unknown_decision' },
  { name: 'decision in wrong case', behaviour: json(200, { decision: 'ALLOW' }), status: 503, code: 'verify_unavailable', cause: 'verify_unknown_decision' },
  { name: 'decision missing', behaviour: json(200, { decision_reason: 'authorized' }), status: 503, code: 'verify_unavailable', cause: 'verify_unknown_decision' },
  { name: 'garbage body', behaviour: json(200, '{"decision":"allow"', 'application/json'), status: 503, code: 'verify_unavailable', cause: 'verify_bad_response' },
  { name: 'empty body', behaviour: json(200, '', 'application/json'), status: 503, code: 'verify_unavailable', cause: 'verify_bad_response' },
  { name: 'wrong content type', behaviour: json(200, { decision: 'allow' }, 'text/plain'), status: 503, code: 'verify_unavailable', cause: 'verify_bad_response' },
  { name: 'JSON array', behaviour: json(200, [{ decision: 'allow' }]), status: 503, code: 'verify_unavailable', cause: 'verify_bad_response' },
  { name: 'allow for another scope', behaviour: json(200, { decision: 'allow', scope: 'data:write' }), status: 503, code: 'verify_unavailable', cause: 'verify_bad_response' },
  { name: 'oversized body', behaviour: json(200, JSON.stringify({ decision: 'allow', pad: 'x'.repeat(MAX_SIDECAR_RESPONSE_BYTES) })), status: 503, code: 'verify_unavailable', cause: 'verify_bad_response' },
  { name: '400 invalid_signature', behaviour: verifyError(400, 'invalid_signature'), status: 403, code: 'proof_rejected', reason: 'invalid_signature' },
  { name: '400 invalid_challenge', behaviour: verifyError(400, 'invalid_challenge'), status: 403, code: 'proof_rejected', reason: 'invalid_challenge' },
  { name: '400 proof_stale', behaviour: verifyError(400, 'proof_stale'), status: 403, code: 'proof_rejected', reason: 'proof_stale' },
  { name: '400 garbage', behaviour: json(400, 'nope', 'text/plain'), status: 403, code: 'proof_rejected', reason: 'unspecified' },
  { name: '401 bad API key', behaviour: verifyError(401, 'invalid_api_key'), status: 503, code: 'verify_unavailable', cause: 'verify_status_401' },
  { name: '402 credits exhausted', behaviour: verifyError(402, 'credits_exhausted'), status: 503, code: 'verify_unavailable', cause: 'verify_status_402' },
  { name: '429 rate limited', behaviour: verifyError(429, 'rate_limited'), status: 503, code: 'verify_unavailable', cause: 'verify_status_429' },
  { name: '500', behaviour: verifyError(500, 'internal_error'), status: 503, code: 'verify_unavailable', cause: 'verify_status_500' },
  { name: '503', behaviour: verifyError(503, 'service_unavailable'), status: 503, code: 'verify_unavailable', cause: 'verify_status_503' },
  { name: '302 redirect', behaviour: (_c, res) => { res.writeHead(302, { location: 'http://127.0.0.1:1/' }); res.end(); }, status: 503, code: 'verify_unavailable', cause: 'verify_status_302' },
  { name: '204 no content', behaviour: (_c, res) => { res.writeHead(204); res.end(); }, status: 503, code: 'verify_unavailable', cause: 'verify_status_204' },
  { name: '200 allow with 201 status', behaviour: json(201, { decision: 'allow' }), status: 503, code: 'verify_unavailable', cause: 'verify_status_201' },
  { name: 'timeout (no answer)', behaviour: (_c, res) => { hung.push(res); }, status: 503, code: 'verify_unavailable', cause: 'verify_timeout' },
  {
    name: 'hung body (headers sent, body never finished)',
    behaviour: (_c, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.write('{"decision":"allow"'); hung.push(res); },
    status: 503, code: 'verify_unavailable', cause: 'verify_timeout',
  },
  { name: 'connection reset mid-answer', behaviour: (_c, res) => { res.socket?.destroy(); }, status: 503, code: 'verify_unavailable', cause: 'verify_network' },
];

/** Requests that reached the upstream although the row is a refusal, over every mode. */
let failOpens = 0;

for (const mode of MODES) {
  await t.test(`mode ${mode}`, async (t) => {
    // 1 s: short enough for the timeout rows, long enough that a loaded CI machine answers the rest in time.
    const gw = await startMode(mode, up.url, sidecar.url, { verify_timeout_ms: 1000 });
    t.teardown(() => gw.close());
    for (const row of rows) {
      await t.test(row.name, async (t) => {
        sidecar.behaviour = row.behaviour;
        const before = up.received.length;
        const calls = sidecar.verifyCalls.length;
        const started = Date.now();
        const res = await send(gw.url, '/v1/items/7', { headers: { 'x-service-proof': proofHeader() } });
        t.ok(Date.now() - started < 3000, 'answered within the verify deadline');
        t.equal(res.status, row.status, 'status');
        t.equal(sidecar.verifyCalls.length, calls + 1, 'verify called once');
        const call = sidecar.verifyCalls.at(-1);
        t.equal(call?.body.required_scope, 'data:read');
        t.equal(call?.headers['content-type'], 'application/json');
        if (row.status === 200) {
          t.equal(up.received.length, before + 1, 'upstream reached on allow');
          t.equal(up.received.at(-1)?.headers['x-request-id'], call?.headers['x-request-id'], 'request id propagated to verify and upstream');
          t.equal(up.received.at(-1)?.headers['x-service-decision'], 'allow', 'the decision reached the upstream');
          t.equal(up.received.at(-1)?.headers['x-service-proof'], undefined, 'the proof did not');
          return;
        }
        failOpens += up.received.length - before;
        t.equal(up.received.length, before, 'upstream received nothing');
        t.equal(res.headers['x-request-id'], call?.headers['x-request-id'], 'request id propagated to verify');
        t.equal(res.headers['cache-control'], 'no-store');
        t.equal(res.json?.error?.code, row.code, 'error code');
        t.equal(res.json?.error?.status, row.status, 'status in body');
        t.equal(res.json?.error?.message, ERRORS[row.code as keyof typeof ERRORS].message, 'table message');
        t.equal(res.json?.error?.reason, row.reason, 'reason');
        t.equal(res.json?.error?.cause, row.cause, 'cause');
        t.equal(res.json?.error?.constraint, row.constraint, 'constraint');
        t.notMatch(res.text, /stack|internal detail|\.ts:/, 'no internal details');
      });
    }
    t.equal(await gw.failOpen(), 0, 'fail_open_total stayed 0');
  });
}

t.equal(failOpens, 0, '0 fail-opens over every mode');

await t.test('refused connection (closed port) is 503 verify_network', async (t) => {
  const closed = await startFakeSidecar();
  const deadUrl = closed.url;
  await closed.close();
  const gw2 = await startGateway(gatewayConfig(up.url, deadUrl, { verify_timeout_ms: 300 }));
  t.teardown(() => gw2.close());
  const before = up.received.length;
  const res = await send(gw2.url, '/v1/items/7', { headers: { 'x-service-proof': proofHeader() } });
  t.equal(res.status, 503);
  t.equal(res.json?.error?.code, 'verify_unavailable');
  t.equal(res.json?.error?.cause, 'verify_network');
  const missing = await send(gw2.url, '/v1/items/7');
  t.equal(missing.status, 401, 'missing proof is still 401 when the challenge cannot be fetched');
  t.equal(missing.json?.error?.challenge, undefined, 'no challenge');
  t.equal(missing.headers['www-authenticate'], 'ServiceProof realm="agent-authz", scope="data:read"');
  t.equal(up.received.length, before, 'upstream received nothing');
});

await t.test('upstream down after allow is 502 upstream_unavailable', async (t) => {
  const deadUp = await startUpstream();
  const url = deadUp.url;
  await deadUp.close();
  sidecar.behaviour = allowAll;
  const gw3 = await startGateway(gatewayConfig(url, sidecar.url));
  t.teardown(() => gw3.close());
  const res = await send(gw3.url, '/v1/items/7', { headers: { 'x-service-proof': proofHeader() } });
  t.equal(res.status, 502);
  t.equal(res.json?.error?.code, 'upstream_unavailable');
  t.notMatch(res.text, /ECONNREFUSED|127\.0\.0\.1/, 'no internal details');
});
