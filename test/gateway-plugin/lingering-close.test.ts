/**
 * The gateway's lingering close (issue 35; runtime/linger.ts): requests far
 * over its limits, sent at full speed — 2 MiB bodies over the 64 KiB
 * `body_limit_bytes` (413 `body_too_large`), header blocks over
 * `GATEWAY_MAX_HEADER_SIZE` with a body behind them (431 `headers_too_large`),
 * a request without a proof refused before its body is read (401 `proof_required`)
 * — to the standalone gateway and to the plugin in an app's own Fastify
 * server: every one gets its refusal, read without a reset, and the upstream
 * gets none of them. Node's `fetch` gets its 413 too.
 */
import t from 'tap';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { agentAuthzGateway, createGatewayMetrics, GATEWAY_MAX_HEADER_SIZE, gatewayClientErrors } from '../../gateway-plugin/index.js';
import type { RouteEntry } from '../../gateway-plugin/index.js';
import { gatewayConfig, proofHeader, startFakeSidecar, startGateway, startUpstream, TEST_API_KEY } from './helpers.js';
import { fillerBody, refusedWith, sendOversized, tally } from '../sidecar/ops/oversized.js';

t.setTimeout(300_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar();
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});
const BODY = fillerBody(2 * 1024 * 1024);
const CASES: readonly [string, string][] = [
  [`POST /v1/items/7 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Service-Proof: ${proofHeader()}`, 'body_too_large'],
  ['POST /v1/items/7 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close', 'proof_required'],
  [`POST /v1/items/7 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ${'p'.repeat(GATEWAY_MAX_HEADER_SIZE + 1000)}`, 'headers_too_large'],
];

async function plugin(): Promise<{ port: number; url: string; close(): Promise<void> }> {
  const metrics = createGatewayMetrics();
  const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }, clientErrorHandler: gatewayClientErrors(metrics) });
  const config = gatewayConfig(up.url, sidecar.url);
  await app.register(agentAuthzGateway, {
    upstream: up.url, sidecarUrl: sidecar.url, apiKey: TEST_API_KEY, metrics, routes: config.routes as RouteEntry[], bodyLimit: 65_536,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  return { port, url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

async function standalone(): Promise<{ port: number; url: string; close(): Promise<void> }> {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url));
  return { port: gw.port, url: gw.url, close: () => gw.close() };
}

for (const [mode, start] of [['standalone', standalone], ['plugin', plugin]] as const) {
  await t.test(`oversized requests to the gateway (${mode}): every one refused, 0 resets`, async (t) => {
    const gw = await start();
    t.teardown(() => gw.close());
    const before = up.received.length;
    const counts = await tally(150, 8, async (i) => ({ i: i % CASES.length, r: await sendOversized(gw.port, CASES[i % CASES.length]![0], BODY) }),
      ({ i, r }) => (refusedWith(r, CASES[i]![1]) ? `${r.status} ${r.code}` : `case ${i}: ${r.status} ${r.code ?? '-'} ${r.error ?? ''}`));
    t.comment(`${mode}: ${JSON.stringify(counts)}`);
    t.same(counts, { '413 body_too_large': 50, '401 proof_required': 50, '431 headers_too_large': 50 }, 'each answered with its refusal, no reset');
    const viaFetch = await tally(20, 4, () => fetch(`${gw.url}/v1/items/7`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-service-proof': proofHeader() }, body: BODY,
    })
      .then(async (r) => `${r.status} ${((await r.json()) as { error?: { code?: string } }).error?.code ?? '-'}`,
        (err: Error & { cause?: { code?: string } }) => `failed ${err.cause?.code ?? err.message}`), (k) => k);
    t.same(viaFetch, { '413 body_too_large': 20 }, "Node's fetch gets the 413 every time");
    t.equal(up.received.length, before, 'the upstream received none of them');
  });
}
