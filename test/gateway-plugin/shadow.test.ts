/**
 * Shadow mode (issue 35; gateway-plugin/shadow.ts): a route set `mode:
 * shadow` is verified as usual and forwarded whatever the decision. Over the
 * verify-outcome table (a real fake sidecar answering each row, as in
 * outcome-matrix.test.ts) and the gateway's own refusals of the proof header,
 * through the standalone gateway and the plugin in an app's own Fastify
 * server: every would-be refusal reaches the real upstream with
 * `X-Service-Decision: shadow` and `X-Service-Shadow-Refusal`, is counted in
 * `agent_authz_gateway_shadow_would_refuse_total` by route and reason, and is
 * logged with its code and reason (plugin mode, whose log stream the test
 * reads); an enforced route beside it still refuses. A route with a sensitive
 * scope in shadow mode is refused at startup, naming the route.
 * (A2A methods do not exist yet; they will need the same mode.)
 */
import t from 'tap';
import { PassThrough } from 'node:stream';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { agentAuthzGateway, createGatewayMetrics, GATEWAY_MAX_HEADER_SIZE } from '../../gateway-plugin/index.js';
import type { RouteEntry } from '../../gateway-plugin/index.js';
import { buildGateway } from '../../gateway-plugin/standalone/server.js';
import { reasonLabel } from '../../gateway-plugin/metrics.js';
import {
  allowAll, gatewayConfig, proofHeader, reply, send, startFakeSidecar, startGateway, startUpstream, sumSamples, TEST_API_KEY, TEST_API_KEY_ENV,
} from './helpers.js';
import type { VerifyBehaviour } from './helpers.js';

t.setTimeout(120_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar();
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});

const json = (status: number, body: unknown, type?: string): VerifyBehaviour => (_c, res) => reply(res, status, body, type);
const deny = (reason: string, extra: Record<string, unknown> = {}): VerifyBehaviour => json(200, { decision: 'deny', decision_reason: reason, ...extra });
const verifyError = (status: number, code: string): VerifyBehaviour => json(status, { error: { code, message: 'x', status } });

interface Row { name: string; behaviour?: VerifyBehaviour; headers?: Record<string, string | string[]>; status: number; code: string; reason: string }
const proof = { 'x-service-proof': proofHeader() };
/** A row whose refusal comes from verify's answer (the request carries a proof). */
const viaVerify = (name: string, behaviour: VerifyBehaviour, status: number, code: string, reason: string): Row =>
  ({ name, behaviour, headers: proof, status, code, reason });
/** Every refusal of the outcome table (spec 4.15) and of the proof header, with the reason it is counted under. */
const ROWS: Row[] = [
  viaVerify('deny not_delegated', deny('not_delegated'), 403, 'not_delegated', 'not_delegated'),
  viaVerify('deny delegation_revoked', deny('delegation_revoked'), 403, 'delegation_revoked', 'delegation_revoked'),
  viaVerify('deny delegation_expired', deny('delegation_expired'), 403, 'delegation_expired', 'delegation_expired'),
  viaVerify('deny constraint_denied', deny('constraint_denied', { constraint: 'max_amount' }), 403, 'constraint_denied', 'constraint_denied'),
  viaVerify('deny other reason', deny('agent_suspended'), 403, 'proof_rejected', 'agent_suspended'),
  viaVerify('indeterminate', json(200, { decision: 'indeterminate', decision_reason: 'store_unavailable' }), 503,
    'decision_indeterminate', 'decision_indeterminate'),
  viaVerify('unknown decision', json(200, { decision: 'maybe' }), 503, 'verify_unavailable', 'verify_unknown_decision'),
  viaVerify('garbage body', json(200, '{"decision":"allow"', 'application/json'), 503, 'verify_unavailable', 'verify_bad_response'),
  viaVerify('allow for another scope', json(200, { decision: 'allow', scope: 'data:write' }), 503, 'verify_unavailable', 'verify_bad_response'),
  viaVerify('400 invalid_signature', verifyError(400, 'invalid_signature'), 403, 'proof_rejected', 'invalid_signature'),
  viaVerify('400 proof_stale', verifyError(400, 'proof_stale'), 403, 'proof_rejected', 'proof_stale'),
  viaVerify('401 bad API key', verifyError(401, 'invalid_api_key'), 503, 'verify_unavailable', 'verify_status_401'),
  viaVerify('500', verifyError(500, 'internal_error'), 503, 'verify_unavailable', 'verify_status_500'),
  viaVerify('connection reset', (_c, res) => { res.socket?.destroy(); }, 503, 'verify_unavailable', 'verify_network'),
  { name: 'missing proof', status: 401, code: 'proof_required', reason: 'proof_required' },
  { name: 'malformed proof header', headers: { 'x-service-proof': '%%%not-base64' }, status: 403, code: 'proof_rejected', reason: 'invalid_proof' },
  {
    name: 'two proof headers', headers: { 'x-service-proof': [proofHeader(), proofHeader()] }, status: 403,
    code: 'duplicate_proof_header', reason: 'duplicate_proof_header',
  },
];

const SHADOW_ROUTES = [
  { method: 'GET', path: '/admin', scope: 'custom:admin' },
  { method: ['GET', 'HEAD'], path: '/v1/items/:id', scope: 'data:read', mode: 'shadow' },
  { method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } },
];

interface Target { url: string; exposition(): Promise<string>; logs: () => string[]; close(): Promise<void> }

async function standalone(): Promise<Target> {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url, { routes: SHADOW_ROUTES, verify_timeout_ms: 1000 }));
  return { url: gw.url, exposition: async () => (await fetch(gw.metricsUrl!)).text(), logs: () => [], close: () => gw.close() };
}

async function plugin(): Promise<Target> {
  const metrics = createGatewayMetrics();
  const stream = new PassThrough();
  const lines: string[] = [];
  stream.setEncoding('utf8').on('data', (d: string) => lines.push(...d.split('\n').filter((l) => l !== '')));
  const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }, logger: { level: 'info', stream } });
  await app.register(agentAuthzGateway, {
    upstream: up.url, sidecarUrl: sidecar.url, apiKey: TEST_API_KEY, metrics, routes: SHADOW_ROUTES as RouteEntry[],
    verifyTimeoutMs: 1000, challengeTimeoutMs: 500,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { url, exposition: () => metrics.exposition(), logs: () => lines, close: () => app.close() };
}

for (const [mode, start] of [['standalone', standalone], ['plugin', plugin]] as const) {
  await t.test(`shadow mode over the outcome table (${mode})`, async (t) => {
    const gw = await start();
    t.teardown(() => gw.close());
    for (const row of ROWS) {
      sidecar.behaviour = row.behaviour ?? allowAll;
      const before = up.received.length;
      const calls = sidecar.verifyCalls.length;
      const res = await send(gw.url, '/v1/items/7', { headers: row.headers ?? {} });
      t.equal(res.status, 200, `${row.name}: forwarded, the upstream's answer`);
      t.equal(up.received.length, before + 1, `${row.name}: the upstream got it`);
      const headers = up.received.at(-1)?.headers ?? {};
      t.equal(headers['x-service-decision'], 'shadow', `${row.name}: marked shadow for the upstream`);
      const expected = row.reason === row.code ? `${row.status} ${row.code}` : `${row.status} ${row.code}; reason=${row.reason}`;
      t.equal(headers['x-service-shadow-refusal'], expected, `${row.name}: the refusal it would have been`);
      t.equal(headers['x-service-proof'], undefined, `${row.name}: the proof is not forwarded`);
      t.equal(sidecar.verifyCalls.length, calls + (row.behaviour === undefined ? 0 : 1), `${row.name}: verify called as usual`);
    }
    sidecar.behaviour = allowAll;
    const allowed = await send(gw.url, '/v1/items/7', { headers: proof });
    t.equal(allowed.status, 200);
    t.equal(up.received.at(-1)?.headers['x-service-decision'], 'allow', 'an allow in shadow mode is an allow');
    t.equal(up.received.at(-1)?.headers['x-service-shadow-refusal'], undefined, 'and carries no shadow refusal');
    sidecar.behaviour = deny('not_delegated');
    const before = up.received.length;
    const enforced = await send(gw.url, '/admin', { headers: proof });
    t.equal(enforced.status, 403, 'the enforced route beside it still refuses');
    t.equal(enforced.json?.error?.code, 'not_delegated');
    t.equal(up.received.length, before, 'and forwards nothing');

    const text = await gw.exposition();
    const byReason = new Map<string, number>();
    // Reasons outside the known set are counted as `other`, as in requests_total.
    for (const row of ROWS) byReason.set(reasonLabel(row.reason), (byReason.get(reasonLabel(row.reason)) ?? 0) + 1);
    for (const [reason, n] of byReason) {
      t.equal(sumSamples(text, 'agent_authz_gateway_shadow_would_refuse_total', { route: '/v1/items/:id', reason }), n, `counted: ${reason} × ${n}`);
    }
    t.equal(sumSamples(text, 'agent_authz_gateway_shadow_would_refuse_total'), ROWS.length, 'every would-be refusal counted once, and nothing else');
    t.equal(sumSamples(text, 'agent_authz_gateway_requests_total', { outcome: 'shadow' }), ROWS.length, 'requests_total outcome="shadow"');
    t.equal(sumSamples(text, 'agent_authz_gateway_fail_open_total'), 0, 'the tripwire stayed 0');
    if (mode === 'plugin') {
      const logged = gw.logs().map((l) => JSON.parse(l) as { msg?: string; shadow?: { route: string; status: number; code: string; reason: string } })
        .filter((l) => l.shadow !== undefined);
      const expected = ROWS.map((r) => ({ route: '/v1/items/:id', status: r.status, code: r.code, reason: r.reason }));
      t.same(logged.map((l) => l.shadow), expected, 'each one logged with its code and reason');
    }
  });
}

await t.test('a sensitive route in shadow mode is refused at startup, naming the route', async (t) => {
  const env = { [TEST_API_KEY_ENV]: TEST_API_KEY };
  const withRoute = (route: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> =>
    gatewayConfig(up.url, sidecar.url, { routes: [{ method: 'GET', path: '/ok', scope: 'data:read', mode: 'shadow' }, route], ...extra });
  await t.rejects(buildGateway(withRoute({ method: 'POST', path: '/v1/payments', scope: 'payments:send', mode: 'shadow' }), env),
    {
      name: 'TypeError',
      message: /^config: routes\[1\]\.mode: route \/v1\/payments cannot be in shadow mode: scope payments:send is sensitive \(payments:\*\)/,
    });
  await t.rejects(buildGateway(withRoute({ method: 'PUT', path: '/v1/items/:id', scope: 'data:write', mode: 'shadow' }), env),
    { name: 'TypeError', message: /routes\[1\]\.mode: route \/v1\/items\/:id cannot be in shadow mode: scope data:write is sensitive/ });
  const crm = withRoute({ method: 'GET', path: '/crm', scope: 'custom:crm:read', mode: 'shadow' }, { shadow_sensitive_scopes: ['custom:crm:*'] });
  await t.rejects(buildGateway(crm, env),
    { name: 'TypeError', message: /routes\[1\]\.mode: route \/crm cannot be in shadow mode: scope custom:crm:read is sensitive \(custom:crm:\*\)/ });
  const mcp = withRoute({ method: 'POST', path: '/mcp', scope: 'execute:tool', mode: 'shadow', mcp: { tools: { pay: 'payments:send' } } });
  await t.rejects(buildGateway(mcp, env),
    { name: 'TypeError', message: /routes\[1\]\.mode: route \/mcp cannot be in shadow mode: tool pay's scope payments:send is sensitive/ });
  await t.rejects(buildGateway(withRoute({ method: 'GET', path: '/s', public: true, mode: 'shadow' }), env),
    { message: /routes\[1\]\.mode: a public route has nothing to shadow/ });
  await t.rejects(buildGateway(withRoute({ method: 'GET', path: '/s', scope: 'data:read', mode: 'dry-run' }), env),
    { message: /routes\[1\]\.mode: must be "enforce" or "shadow"/ });
  await t.rejects(buildGateway(withRoute({ method: 'GET', path: '/s', scope: 'data:read' }, { shadow_sensitive_scopes: ['data:*x'] }), env),
    { message: /^config: shadow_sensitive_scopes\[0\]: / });
  const app = Fastify();
  await t.rejects(async () => {
    await app.register(agentAuthzGateway, {
      upstream: up.url, sidecarUrl: sidecar.url, apiKey: TEST_API_KEY,
      routes: [{ method: 'GET', path: '/v1/refunds/:id', scope: 'custom:refunds', mode: 'shadow' }], shadowSensitiveScopes: ['custom:refunds'],
    });
    await app.ready();
  }, { name: 'TypeError', message: /^gateway options: routes\[0\]\.mode: route \/v1\/refunds\/:id cannot be in shadow mode: scope custom:refunds is/ });
  await app.close();
});
