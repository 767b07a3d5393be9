/**
 * The standalone proxy's health endpoints can be moved, turned off, or
 * served on the metrics listener (issue 20 §5), so that a catch-all route
 * such as `GET /*` can be mapped: over real HTTP, `/healthz` and `/readyz`
 * then reach the route table (and the upstream, with a proof) like any path,
 * and the moved endpoints answer where configured, with `X-Request-Id`
 * (and `Cache-Control: no-store` on a 503).
 */

import t from 'tap';
import { allowAll, gatewayConfig, proofHeader, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});
const CATCH_ALL = [{ method: ['GET', 'HEAD'], path: '/*', scope: 'data:read' }];
const proof = { 'x-service-proof': proofHeader() };

t.test('health: false with GET /* mapped: /healthz and /readyz are ordinary protected paths', async (t) => {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url, { routes: CATCH_ALL, health: false }));
  t.teardown(() => gw.close());
  for (const path of ['/healthz', '/readyz', '/anything/else']) {
    const refused = await send(gw.url, path);
    t.equal(refused.status, 401, `${path} without a proof: 401`);
    t.equal(refused.json?.error?.code, 'proof_required');
    const before = up.received.length;
    const res = await send(gw.url, path, { headers: proof });
    t.equal(res.status, 200, `${path} with a proof: forwarded`);
    t.equal(up.received[before]?.url, path, `${path}: the upstream answered it`);
    t.equal(sidecar.verifyCalls.at(-1)?.body.context.path, path);
  }
});

t.test('health on the metrics listener: probes there, GET /* on the main listener', async (t) => {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url, { routes: CATCH_ALL, health: { listener: 'metrics' } }));
  t.teardown(() => gw.close());
  const metricsBase = new URL(gw.metricsUrl ?? '').origin;
  const live = await send(metricsBase, '/healthz');
  t.equal(live.status, 200);
  t.same(live.json, { status: 'ok' });
  t.match(live.headers['x-request-id'], /^[0-9a-f-]{36}$/);
  t.equal((await send(metricsBase, '/readyz')).status, 200, 'ready while the sidecar is');
  sidecar.ready = false;
  const notReady = await send(metricsBase, '/readyz');
  sidecar.ready = true;
  t.equal(notReady.status, 503);
  t.match(notReady.json?.error, { code: 'verify_unavailable', cause: 'sidecar_not_ready' });
  t.equal(notReady.headers['cache-control'], 'no-store');
  t.match(notReady.headers['x-request-id'], /^[0-9a-f-]{36}$/);
  t.equal((await send(metricsBase, '/metrics')).status, 200, 'metrics still served');
  const before = up.received.length;
  t.equal((await send(gw.url, '/healthz', { headers: proof })).status, 200);
  t.equal(up.received[before]?.url, '/healthz', 'on the main listener, /healthz is the upstream\'s');
});

t.test('moved and partly turned off', async (t) => {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url, {
    routes: [{ method: 'GET', path: '/v1/*', scope: 'data:read' }], health: { liveness_path: '/_gw/live', readiness_path: false },
  }));
  t.teardown(() => gw.close());
  t.equal((await send(gw.url, '/_gw/live')).status, 200, 'the moved liveness path');
  for (const path of ['/healthz', '/readyz']) {
    const res = await send(gw.url, path);
    t.equal(res.status, 403, `${path}: no longer served`);
    t.equal(res.json?.error?.code, 'route_not_mapped');
    t.equal(res.headers['cache-control'], 'no-store');
  }
});

t.test('the default readiness refusal carries the refusal headers', async (t) => {
  const gw = await startGateway(gatewayConfig(up.url, sidecar.url));
  t.teardown(() => gw.close());
  sidecar.ready = false;
  const res = await send(gw.url, '/readyz');
  sidecar.ready = true;
  t.equal(res.status, 503);
  t.equal(res.headers['cache-control'], 'no-store');
  t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/);
});
