/**
 * Metrics over real HTTP: the separate metrics listener exports the request
 * counters by outcome/reason, the verify and upstream histograms, process
 * metrics, and agent_authz_gateway_fail_open_total = 0. The exposition keeps
 * `_total` for counters only (the default `*_active_*_total` gauges are
 * dropped) and passes `promtool check metrics` when promtool is installed.
 */

import t from 'tap';
import { request } from 'undici';
import { promtoolAvailable, promtoolCheck } from '../sidecar/ops/helpers.js';
import { allowAll, denyAll, gatewayConfig, metricValue, proofHeader, rawRequest, reply, send, startFakeSidecar, startGateway, startUpstream } from './helpers.js';

t.setTimeout(30_000);

const up = await startUpstream();
const sidecar = await startFakeSidecar(allowAll);
const gw = await startGateway(gatewayConfig(up.url, sidecar.url));
t.teardown(async () => {
  await gw.close();
  await up.close();
  await sidecar.close();
});
const proof = { 'x-service-proof': proofHeader() };

await t.test('counters and histograms move; fail_open_total stays 0', async (t) => {
  const murl = gw.metricsUrl ?? '';
  t.match(murl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  t.equal(await metricValue(murl, 'agent_authz_gateway_fail_open_total'), 0, 'exported as 0 before any request');

  t.equal((await send(gw.url, '/v1/items/1', { headers: proof })).status, 200);
  t.equal((await send(gw.url, '/public/status')).status, 200);
  t.equal((await send(gw.url, '/v1/items/1')).status, 401);
  sidecar.behaviour = denyAll;
  t.equal((await send(gw.url, '/v1/items/1', { headers: proof })).status, 403);
  sidecar.behaviour = (_c, res) => reply(res, 200, { decision: 'deny', decision_reason: 'some_new_reason' });
  t.equal((await send(gw.url, '/v1/items/1', { headers: proof })).status, 403);
  sidecar.behaviour = (_c, res) => reply(res, 500, { error: { code: 'internal_error', message: 'x', status: 500 } });
  t.equal((await send(gw.url, '/v1/items/1', { headers: proof })).status, 503);
  sidecar.behaviour = allowAll;
  t.equal((await rawRequest(gw.port, 'GET /v1/items/%2e%2e HTTP/1.1')).status, 400);
  t.equal((await rawRequest(gw.port, 'GET /v1/items/%zz HTTP/1.1')).status, 400, 'router-level bad URL');
  t.equal((await rawRequest(gw.port, 'GET /v1/items/1 HTTP/1.1', [`X-Service-Proof: a`, 'X-Service-Proof: b'])).status, 403, 'duplicate proof header is 403 (spec 4.15)');
  t.equal((await send(gw.url, '/files/x', { method: 'POST', headers: proof, body: Buffer.alloc(70_000) })).status, 413);
  t.equal((await send(gw.url, '/nope')).status, 403);
  t.equal((await send(gw.url, '/healthz')).status, 200, 'health is not counted');

  const v = (series: string): Promise<number | undefined> => metricValue(murl, series);
  const req = (outcome: string, reason: string): string => `agent_authz_gateway_requests_total{outcome="${outcome}",reason="${reason}"}`;
  t.equal(await v(req('allowed', 'authorized')), 1);
  t.equal(await v(req('public', 'public')), 1);
  t.equal(await v(req('401', 'proof_required')), 1);
  t.equal(await v(req('403', 'not_delegated')), 1);
  t.equal(await v(req('403', 'other')), 1, 'unknown deny reasons are bounded to "other"');
  t.equal(await v(req('503', 'verify_status_500')), 1);
  t.equal(await v(req('400', 'ambiguous_path')), 2);
  t.equal(await v(req('403', 'duplicate_proof_header')), 1);
  t.equal(await v(req('400', 'duplicate_proof_header')), undefined, 'no longer counted as 400');
  t.equal(await v(req('413', 'body_too_large')), 1);
  t.equal(await v(req('403', 'route_not_mapped')), 1);
  t.equal(await v('agent_authz_gateway_verify_duration_seconds_count{result="allow"}'), 1);
  t.equal(await v('agent_authz_gateway_verify_duration_seconds_count{result="deny"}'), 2);
  t.equal(await v('agent_authz_gateway_verify_duration_seconds_count{result="error"}'), 1);
  t.equal(await v('agent_authz_gateway_verify_duration_seconds_bucket{le="0.0001",result="allow"}') !== undefined, true, 'buckets start at 0.0001');
  t.equal(await v('agent_authz_gateway_verify_duration_seconds_bucket{le="1",result="allow"}'), 1, 'buckets reach 1');
  t.equal(await v('agent_authz_gateway_upstream_duration_seconds_count{status_class="2xx"}'), 2);
  t.ok((await v('agent_authz_gateway_process_cpu_user_seconds_total')) !== undefined, 'process metrics exported');
  t.equal(await v('agent_authz_gateway_fail_open_total'), 0, 'fail_open_total is still 0');
});

await t.test('exposition: _total only on counters; promtool check metrics accepts it', async (t) => {
  const res = await request(gw.metricsUrl ?? '');
  const text = await res.body.text();
  t.equal(res.statusCode, 200);
  const types = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1] as string, m[2] as string);
  t.ok(types.has('agent_authz_gateway_nodejs_active_handles'), 'per-type active handles gauge kept');
  for (const dropped of ['agent_authz_gateway_nodejs_active_handles_total', 'agent_authz_gateway_nodejs_active_requests_total', 'agent_authz_gateway_nodejs_active_resources_total']) {
    t.notOk(types.has(dropped), `${dropped} is not exported`);
  }
  t.same([...types].filter(([name, type]) => type !== 'counter' && name.endsWith('_total')).map(([name]) => name), [], 'no non-counter ends in _total');
  t.same([...types].filter(([name, type]) => type === 'counter' && !name.endsWith('_total')).map(([name]) => name), [], 'every counter ends in _total');
  // One assertion, skipped (with the reason) when promtool is not installed.
  const skip = promtoolAvailable() ? false : 'promtool is not installed (not on PATH)';
  const r = skip === false ? promtoolCheck(text) : { status: 0, output: '' };
  t.same({ status: r.status, findings: r.output.trim() }, { status: 0, findings: '' }, 'promtool check metrics accepts the exposition (exit 0, no findings)', { skip });
});
