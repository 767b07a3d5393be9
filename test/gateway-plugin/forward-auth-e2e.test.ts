/**
 * Forward-auth end to end with real processes only: REAL NGINX
 * (`auth_request`) and REAL Caddy (`forward_auth`) in front of a recording
 * upstream, the standalone gateway in `mode: forward_auth` deciding, and the
 * REAL sidecar (in process, SQLite, real signatures) verifying proofs made by
 * the spec flow.
 *
 * Through each proxy: a real proof passes and the upstream sees the agent
 * and scope (never the proof, never a client's forged decision header); the
 * same proof replayed is 403 proof_rejected (invalid_challenge); an
 * undelegated route is 403 not_delegated; a request without a proof is 401
 * with a challenge that, presented, makes the retried request pass.
 */

import t from 'tap';
import { present, presentChallenge, specFlow, startSidecar } from '../helpers/sidecar.js';
import { gatewayConfig, proofHeader, send, startGatewayWithKey, startUpstream } from './helpers.js';
import { startCaddy, startNginx } from './proxies.js';

t.setTimeout(60_000);

const sc = await startSidecar();
const up = await startUpstream();
t.teardown(async () => {
  await up.close();
  await sc.close();
});
const flow = await specFlow(sc, 'fa-owner@example.com', { scopes: ['data:read', 'data:write'], approve: ['data:read'] });

const config = gatewayConfig(up.url, sc.url, {
  routes: [
    { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
    { method: 'DELETE', path: '/v1/items/:id', scope: 'data:write' },
  ],
  verify_timeout_ms: 10_000,
  challenge_timeout_ms: 5_000,
});
const { upstream_url: _unused, ...rest } = config;
const authz = await startGatewayWithKey({ ...rest, mode: 'forward_auth', trusted_proxies: ['127.0.0.1'] }, flow.reg.api_key as string);
t.teardown(() => authz.close());
const hostPort = (url: string): string => new URL(url).host;

for (const [name, start] of [['nginx', startNginx], ['caddy', startCaddy]] as const) {
  await t.test(`through real ${name}`, async (t) => {
    const front = await start(hostPort(authz.url), hostPort(up.url));
    t.teardown(() => front.close());
    const header = proofHeader(await present(flow));
    const before = up.received.length;
    const ok = await send(front.url, '/v1/items/42?full=1', { headers: { 'x-service-proof': header, 'x-service-agent-id': 'forged-agent' } });
    t.equal(ok.status, 200, `allowed: ${ok.text}`);
    const got = up.received.at(-1);
    t.equal(up.received.length, before + 1);
    t.equal(got?.url, '/v1/items/42?full=1');
    t.equal(got?.headers['x-service-decision'], 'allow');
    t.equal(got?.headers['x-service-scope'], 'data:read');
    t.equal(got?.headers['x-service-agent-id'], flow.agentId, 'the verified agent, not the forged one');
    t.equal(got?.headers['x-service-cert-id'], flow.certId);
    t.equal(got?.headers['x-service-proof'], undefined, 'the proof is not forwarded');

    const replay = await send(front.url, '/v1/items/42', { headers: { 'x-service-proof': header } });
    t.equal(replay.status, 403);
    t.equal(replay.json?.error?.code, 'proof_rejected');
    t.equal(replay.json?.error?.reason, 'invalid_challenge', 'a spent challenge');

    const denied = await send(front.url, '/v1/items/42', { method: 'DELETE', headers: { 'x-service-proof': proofHeader(await present(flow)) } });
    t.equal(denied.status, 403);
    t.equal(denied.json?.error?.code, 'not_delegated');

    const missing = await send(front.url, '/v1/items/43');
    t.equal(missing.status, 401);
    const challenge = missing.json?.error?.challenge as string;
    t.match(missing.headers['www-authenticate'], new RegExp(`^ServiceProof realm="agent-authz", scope="data:read", challenge="${challenge}"$`));
    const presented = await presentChallenge(flow, challenge);
    t.equal(presented.status, 200);
    const retried = await send(front.url, '/v1/items/43', { headers: { 'x-service-proof': presented.body.proof_header as string } });
    t.equal(retried.status, 200, 'the 401 challenge, presented, passes');
    t.equal(up.received.length, before + 2, 'only the two allowed requests reached the upstream');
  });
}
