/**
 * Shadow mode per MCP tool (`mcp.tools.<name>.mode: shadow`, docs/gateway.md
 * "Rolling out: shadow mode"): on an enforcing MCP route, a call of a tool in
 * shadow mode is verified and forwarded whatever the decision, marked for the
 * upstream and counted; every other tool of the route is still enforced; a
 * tool with a sensitive scope cannot be shadowed (startup error naming it).
 * The real standalone gateway, a recording upstream, a fake sidecar that denies.
 */

import t from 'tap';
import { buildGateway } from '../../gateway-plugin/standalone/server.js';
import {
  denyAll, gatewayConfig, metricSum, proofHeader, send, startFakeSidecar, startGateway, startUpstream, TEST_API_KEY,
  TEST_API_KEY_ENV,
} from './helpers.js';

t.setTimeout(60_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar(denyAll);
t.teardown(async () => {
  await up.close();
  await sidecar.close();
});
const route = (tools: Record<string, unknown>) => ({ method: 'POST', path: '/mcp', scope: 'execute:tool', mcp: { tools } });
const gw = await startGateway(gatewayConfig(up.url, sidecar.url, {
  routes: [route({ get_weather: { scope: 'data:read', mode: 'shadow' }, read_file: 'files:read' })],
}));
t.teardown(() => gw.close());

const call = (tool: string, headers: Record<string, string> = { 'x-service-proof': proofHeader() }) => send(gw.url, '/mcp', {
  method: 'POST', headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: {} } }),
});

t.test('a shadowed tool is forwarded whatever verify says; the others are enforced', async (t) => {
  const before = up.received.length;
  const shadowed = await call('get_weather');
  t.equal(shadowed.status, 200, 'forwarded');
  const got = up.received.at(-1)!;
  t.same([got.headers['x-service-decision'], got.headers['x-service-shadow-refusal']], ['shadow', '403 not_delegated']);
  const noProof = await call('get_weather', {});
  t.equal(noProof.status, 200, 'a missing proof too');
  t.equal(up.received.at(-1)!.headers['x-service-shadow-refusal'], '401 proof_required');
  t.equal(up.received.length, before + 2);
  const enforced = await call('read_file');
  t.equal(enforced.status, 403);
  t.equal((enforced.json as { error: { data: { code: string } } }).error.data.code, 'not_delegated');
  const unmapped = await call('admin_shell');
  t.equal(unmapped.status, 403, 'an unmapped tool stays refused');
  t.equal(up.received.length, before + 2, 'neither reached the upstream');
  t.equal(await metricSum(gw.metricsUrl ?? '', 'agent_authz_gateway_shadow_would_refuse_total', { route: '/mcp' }), 2);
});

t.test('a tool with a sensitive scope cannot be shadowed', async (t) => {
  const config = gatewayConfig(up.url, sidecar.url, { routes: [route({ pay: { scope: 'payments:send', mode: 'shadow' } })] });
  await t.rejects(buildGateway(config, { [TEST_API_KEY_ENV]: TEST_API_KEY }), {
    name: 'TypeError',
    message: /routes\[0\]\.mcp\.tools\.pay\.mode: route \/mcp cannot be in shadow mode: tool pay's scope payments:send is sensitive/,
  });
  const bad = gatewayConfig(up.url, sidecar.url, { routes: [route({ x: { scope: 'data:read', mode: 'audit' } })] });
  await t.rejects(buildGateway(bad, { [TEST_API_KEY_ENV]: TEST_API_KEY }), { name: 'TypeError', message: /mcp\.tools\.x\.mode/ });
});
