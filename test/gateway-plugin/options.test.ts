/**
 * Option and config validation: path-named TypeErrors, unknown keys, bad
 * route entries, defaults; route-table matching semantics; the plugin
 * refusing bad options at registration.
 */

import t from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import {
  DEFAULT_BODY_LIMIT_BYTES, DEFAULT_CHALLENGE_TIMEOUT_MS, DEFAULT_UPSTREAM_TIMEOUT_MS, DEFAULT_VERIFY_TIMEOUT_MS, agentAuthzGateway,
} from '../../gateway-plugin/index.js';
import { resolveGatewayOptions } from '../../gateway-plugin/options.js';
import { compileRoutes } from '../../gateway-plugin/routes.js';
import { loadConfigFile, resolveConfig } from '../../gateway-plugin/standalone/config.js';
import { buildGateway } from '../../gateway-plugin/standalone/server.js';

const base = (): Record<string, unknown> => ({
  upstream: 'http://127.0.0.1:8080',
  sidecarUrl: 'http://127.0.0.1:8081',
  apiKey: 'key-0123456789',
  routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }],
});
const withRoutes = (...routes: unknown[]): Record<string, unknown> => ({ ...base(), routes });

t.test('valid options get the documented defaults', async (t) => {
  const o = resolveGatewayOptions(base());
  t.equal(o.upstream, 'http://127.0.0.1:8080');
  t.equal(o.verifyTimeoutMs, DEFAULT_VERIFY_TIMEOUT_MS);
  t.equal(DEFAULT_VERIFY_TIMEOUT_MS, 10_000);
  t.equal(o.challengeTimeoutMs, DEFAULT_CHALLENGE_TIMEOUT_MS);
  t.equal(o.upstreamTimeoutMs, DEFAULT_UPSTREAM_TIMEOUT_MS);
  t.equal(o.bodyLimit, DEFAULT_BODY_LIMIT_BYTES);
  t.equal(o.trustedProxies.size, 0);
  t.equal(o.routes.size, 1);
  t.equal(o.overrideHeaders, 'refuse');
});

t.test('bad options throw path-named TypeErrors', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [null, /^gateway options: must be an object$/],
    [{ ...base(), prefix: '/api' }, /^gateway options: prefix: unknown key \(allowed: upstream, /],
    [{ ...base(), upstream: undefined }, /^gateway options: upstream: is required$/],
    [{ ...base(), upstream: 'http://127.0.0.1:8080/base' }, /^gateway options: upstream: must be an origin/],
    [{ ...base(), upstream: 'ftp://x' }, /^gateway options: upstream: must use http/],
    [{ ...base(), upstream: 'http://u:p@x' }, /^gateway options: upstream: must not contain credentials/],
    [{ ...base(), sidecarUrl: 'http://x/?a=1' }, /^gateway options: sidecarUrl: must not contain a query/],
    [{ ...base(), sidecarUrl: 'nope' }, /^gateway options: sidecarUrl: must be an absolute/],
    [{ ...base(), apiKey: 'short' }, /^gateway options: apiKey: must be 8 to 512/],
    [{ ...base(), apiKey: 'key with space' }, /^gateway options: apiKey: /],
    [{ ...base(), verifyTimeoutMs: 0 }, /^gateway options: verifyTimeoutMs: must be an integer from 1 to/],
    [{ ...base(), verifyTimeoutMs: '10' }, /^gateway options: verifyTimeoutMs: /],
    [{ ...base(), bodyLimit: 1.5 }, /^gateway options: bodyLimit: /],
    [{ ...base(), metrics: {} }, /^gateway options: metrics: must come from createGatewayMetrics\(\)$/],
    [{ ...base(), trustedProxies: '10.0.0.1' }, /^gateway options: trustedProxies: must be a list/],
    [{ ...base(), trustedProxies: ['10.0.0.1', 'x'] }, /^gateway options: trustedProxies\[1\]: must be an IP address or CIDR range$/],
    [{ ...base(), trustedProxies: ['10.0.0.0/33'] }, /^gateway options: trustedProxies\[0\]: has a bad prefix length$/],
    [{ ...base(), context: { tenant: { header: 'x-tenant' } } }, /^gateway options: context\.tenant\.header: needs trusted proxies/],
    [{ ...base(), context: { tenant: { hosts: { 'a.example': 'a' }, suffix: '.example' } } }, /^gateway options: context\.tenant: must have exactly one of/],
    [{ ...base(), context: { tenant: { suffix: 'example.com' } } }, /^gateway options: context\.tenant\.suffix: /],
    [{ ...base(), context: { amount: 'amount' } }, /^gateway options: context\.amount: must be a JSON pointer/],
    [{ ...base(), context: { amout: '/amount' } }, /^gateway options: context\.amout: unknown key/],
    [{ ...base(), routes: [] }, /^gateway options: routes: must be a non-empty list of routes$/],
    [withRoutes('x'), /^gateway options: routes\[0\]: must be an object$/],
    [withRoutes({ path: '/a', scope: 'data:read' }), /^gateway options: routes\[0\]\.method: is required$/],
    [withRoutes({ method: 'get', path: '/a', scope: 'data:read' }), /^gateway options: routes\[0\]\.method: must be one of DELETE, GET/],
    [withRoutes({ method: [], path: '/a', scope: 'data:read' }), /^gateway options: routes\[0\]\.method: must be a method/],
    [withRoutes({ method: ['GET', 'FETCH'], path: '/a', scope: 'data:read' }), /^gateway options: routes\[0\]\.method\[1\]: must be one of/],
    [withRoutes({ method: ['GET', 'GET'], path: '/a', scope: 'data:read' }), /^gateway options: routes\[0\]\.method\[1\]: duplicate method GET$/],
    [withRoutes({ method: 'GET', path: 'a', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: must start with "\/"$/],
    [withRoutes({ method: 'GET', path: '/a/*/b', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: "\*" is only allowed as the last segment$/],
    [withRoutes({ method: 'GET', path: '/a*', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: "\*" must be a whole segment$/],
    [withRoutes({ method: 'GET', path: '/a//b', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: must not contain empty segments/],
    [withRoutes({ method: 'GET', path: '/a/../b', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: is not in normalized form/],
    [withRoutes({ method: 'GET', path: '/%61dmin', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: is not in normalized form/],
    [withRoutes({ method: 'GET', path: '/a;b', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: is not in normalized form/],
    [withRoutes({ method: 'GET', path: '/a/:1x', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: bad parameter name/],
    [withRoutes({ method: 'GET', path: '/a/:x/:x', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: duplicate parameter name "x"$/],
    [withRoutes({ method: 'GET', path: '/a' }), /^gateway options: routes\[0\]\.scope: is required \(or set public: true\)$/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'Data:Read' }), /^gateway options: routes\[0\]\.scope: "Data:Read" is not in the scope vocabulary/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'data' }), /^gateway options: routes\[0\]\.scope: "data" is not in the scope vocabulary/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'data:raed' }), /^gateway options: routes\[0\]\.scope: "data:raed" is not in the scope vocabulary \(a canonical scope/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'data:*' }), /^gateway options: routes\[0\]\.scope: "data:\*" is not in the scope vocabulary/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'custom:' }), /^gateway options: routes\[0\]\.scope: "custom:" is not in the scope vocabulary/],
    [withRoutes({ method: 'GET', path: '/a', scope: 7 }), /^gateway options: routes\[0\]\.scope: must be a non-empty string$/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'data:read', public: true }), /^gateway options: routes\[0\]: a public route must not have a scope$/],
    [withRoutes({ method: 'GET', path: '/a', public: false }), /^gateway options: routes\[0\]\.public: must be true when present$/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'data:read', name: 'x' }), /^gateway options: routes\[0\]\.name: unknown key/],
    [withRoutes({ method: 'GET', path: '/a', scope: 'data:read', context: { amount: 'x' } }), /^gateway options: routes\[0\]\.context\.amount: must be a JSON pointer/],
    [withRoutes({ method: 'GET', path: '/a/:x', scope: 'data:read' }, { method: ['POST', 'GET'], path: '/a/:y', scope: 'data:write' }),
      /^gateway options: routes\[1\]: has the same method and path shape as routes\[0\]$/],
    [withRoutes({ method: '*', path: '/f/*', scope: 'data:read' }, { method: '*', path: '/f/*', public: true }),
      /^gateway options: routes\[1\]: has the same method and path shape as routes\[0\]$/],
    [withRoutes({ method: 'GET', path: '/admin', scope: 'data:read' }, { method: 'GET', path: '/%EF%BD%81dmin', public: true }),
      /^gateway options: routes\[1\]: differs only in a folded spelling \(docs\/gateway\.md\) from routes\[0\] but is authorized differently$/],
    [withRoutes({ method: 'GET', path: '/a/%20/b', scope: 'data:read' }), /^gateway options: routes\[0\]\.path: has a segment of only white space or dots/],
    [{ ...base(), overrideHeaders: 'drop' }, /^gateway options: overrideHeaders: must be "refuse" or "strip"$/],
  ];
  for (const [options, message] of cases) {
    t.throws(() => resolveGatewayOptions(options), { name: 'TypeError', message }, String(message));
  }
});

t.test('route matching semantics', async (t) => {
  const table = compileRoutes([
    { method: '*', path: '/files/*', scope: 'data:read' },
    { method: 'GET', path: '/files/:name', scope: 'custom:one' },
    { method: 'GET', path: '/files/special', public: true },
    { method: 'PUT', path: '/files/*', scope: 'data:write' },
    { method: 'GET', path: '/', public: true },
    { method: 'GET', path: '/pay', scope: 'payments:send', context: { amount: '/a' } },
  ], 'test:', { amountPointer: '/amount', currencyPointer: '/cur' });
  const scope = (m: string, p: string): string | undefined | null => {
    const hit = table.lookup(m, p);
    return hit === undefined ? null : hit.scope;
  };
  t.equal(scope('GET', '/files/special'), undefined, 'literal beats param (public)');
  t.equal(scope('GET', '/files/x'), 'custom:one', 'param beats wildcard');
  t.equal(scope('GET', '/files/x/y'), 'data:read', 'wildcard takes the rest');
  t.equal(scope('GET', '/files/'), 'data:read', 'wildcard may be empty');
  t.equal(scope('GET', '/files'), null, 'no segment for the wildcard');
  t.equal(scope('PUT', '/files/x'), 'data:write', 'explicit method beats "*"');
  t.equal(scope('DELETE', '/files/x'), 'data:read');
  t.equal(scope('HEAD', '/pay'), null, 'HEAD is not implied by GET');
  t.equal(scope('GET', '/'), undefined);
  t.equal(scope('TRACE', '/files/x'), null, '"*" covers only supported methods');
  t.equal(table.lookup('GET', '/pay')?.amountPointer, '/a', 'route pointer overrides');
  t.equal(table.lookup('GET', '/pay')?.currencyPointer, '/cur', 'global pointer inherited');
});

t.test('the plugin refuses bad options at registration', async (t) => {
  const app = Fastify();
  void app.register(agentAuthzGateway, { ...base(), routes: [{ method: 'GET', path: '/a' }] } as never);
  await t.rejects(async () => { await app.ready(); }, { name: 'TypeError', message: /^gateway options: routes\[0\]\.scope: is required/ });
});

const cfg = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  upstream_url: 'http://127.0.0.1:8080',
  sidecar_url: 'http://127.0.0.1:8081',
  api_key_env: 'GW_KEY',
  routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }],
  ...extra,
});
const env = { GW_KEY: 'key-0123456789' };

t.test('config validation: path-named one-line errors', async (t) => {
  const ok = resolveConfig(cfg(), env);
  t.equal(ok.listen.port, 8080);
  t.equal(ok.listen.host, '127.0.0.1');
  t.same(ok.health, { livenessPath: '/healthz', readinessPath: '/readyz', listener: 'main' });
  t.same(ok.metrics, { host: '127.0.0.1', port: 9464, path: '/metrics' });
  t.equal(resolveConfig(cfg({ metrics: false }), env).metrics, false);
  const cases: Array<[unknown, Record<string, string>, RegExp]> = [
    [cfg({ api_key: 'secret' }), env, /^config: api_key: the key must not be in the file/],
    [cfg(), {}, /^config: api_key_env: environment variable GW_KEY is not set$/],
    [cfg({ api_key_env: 'lower-case!' }), env, /^config: api_key_env: must be an environment variable NAME/],
    [cfg(), { GW_KEY: 'short' }, /^config: api_key_env \(GW_KEY\): must be 8 to 512/],
    [cfg({ upstream: 'x' }), env, /^config: upstream: unknown key/],
    [{ ...cfg(), routes: undefined }, env, /^config: routes: is required$/],
    [cfg({ routes: [{ method: 'GET', path: '/a', scope: 'nope' }] }), env, /^config: routes\[0\]\.scope: "nope" is not in the scope vocabulary/],
    [cfg({ trusted_proxies: ['nope'] }), env, /^config: trusted_proxies\[0\]: must be an IP address/],
    [cfg({ context: { tenant: { header: 'x-t' } } }), env, /^config: context\.tenant\.header: needs trusted proxies/],
    [cfg({ listen: { port: 70000 } }), env, /^config: listen\.port: must be an integer from 0 to 65535$/],
    [cfg({ listen: { port: 9000 }, metrics: { port: 9000 } }), env, /^config: metrics\.port: must differ from listen\.port$/],
    [cfg({ metrics: { path: 'metrics' } }), env, /^config: metrics\.path: must be a plain absolute path/],
    [cfg({ health: { liveness_path: '/a', readiness_path: '/a' } }), env, /^config: health\.readiness_path: must differ/],
    [cfg({ health: { listener: 'side' } }), env, /^config: health\.listener: must be main or metrics$/],
    [cfg({ health: { listener: 'metrics' }, metrics: false }), env, /^config: health\.listener: is "metrics" but the metrics listener is disabled/],
    [cfg({ health: { listener: 'metrics', readiness_path: '/metrics' } }), env, /^config: health\.readiness_path: \/metrics collides with metrics\.path$/],
    [cfg({ health: { liveness_path: true } }), env, /^config: health\.liveness_path: must be a path such as \/healthz, or false to turn it off$/],
    [cfg({ health: true }), env, /^config: health: must be an object/],
    [cfg({ override_headers: 'drop' }), env, /^config: override_headers: must be "refuse" or "strip"$/],
    [{ ...cfg({ mode: 'forward_auth', override_headers: 'strip' }), upstream_url: undefined }, env, /^config: override_headers: is not used with mode: forward_auth/],
    [cfg({ log_level: 'loud' }), env, /^config: log_level: must be one of/],
    [cfg({ verify_timeout_ms: -1 }), env, /^config: verify_timeout_ms: must be an integer/],
  ];
  for (const [raw, e, message] of cases) t.throws(() => resolveConfig(raw, e), { name: 'TypeError', message }, String(message));
  await t.rejects(buildGateway(cfg({ routes: [{ method: 'GET', path: '/healthz', scope: 'data:read' }] }), env),
    { name: 'TypeError', message: /^config: health\.liveness_path: \/healthz collides with routes\[0\]$/ });
  // A catch-all route needs the health endpoints off the main listener: turned off, or on the metrics listener.
  const catchAll = { routes: [{ method: 'GET', path: '/*', scope: 'data:read' }] };
  await t.rejects(buildGateway(cfg(catchAll), env), { name: 'TypeError', message: /^config: health\.liveness_path: \/healthz collides with routes\[0\]$/ });
  t.same(resolveConfig(cfg({ ...catchAll, health: false }), env).health, { livenessPath: undefined, readinessPath: undefined, listener: 'main' });
  t.same(resolveConfig(cfg({ health: { liveness_path: false, readiness_path: '/ready' } }), env).health, { livenessPath: undefined, readinessPath: '/ready', listener: 'main' });
  for (const health of [false, { listener: 'metrics' }, { liveness_path: '/up', readiness_path: false, listener: 'main' }]) {
    const config = health === false || (health as { listener?: string }).listener === 'metrics' ? cfg({ ...catchAll, health })
      : cfg({ routes: [{ method: 'GET', path: '/v1/*', scope: 'data:read' }], health });
    await (await buildGateway(config, env)).close();
  }
  t.equal(resolveConfig(cfg(), env).plugin.overrideHeaders, 'refuse', 'override headers are refused by default');
  t.equal(resolveConfig(cfg({ override_headers: 'strip' }), env).plugin.overrideHeaders, 'strip');
});

t.test('config files: YAML or JSON, duplicate keys refused', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'gw-cfg-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'a.yaml'), 'upstream_url: http://127.0.0.1:1\nroutes:\n  - { method: GET, path: /a, scope: "data:read" }\n');
  t.same(await loadConfigFile(join(dir, 'a.yaml')), { upstream_url: 'http://127.0.0.1:1', routes: [{ method: 'GET', path: '/a', scope: 'data:read' }] });
  await writeFile(join(dir, 'b.json'), '{"upstream_url": "http://127.0.0.1:1"}');
  t.same(await loadConfigFile(join(dir, 'b.json')), { upstream_url: 'http://127.0.0.1:1' });
  await writeFile(join(dir, 'dup.yaml'), 'a: 1\na: 2\n');
  await t.rejects(loadConfigFile(join(dir, 'dup.yaml')), { name: 'TypeError', message: /^config: .*dup\.yaml is not valid YAML: / });
  await writeFile(join(dir, 'bad.json'), '{');
  await t.rejects(loadConfigFile(join(dir, 'bad.json')), { name: 'TypeError', message: /^config: .*bad\.json is not valid JSON: / });
  await t.rejects(loadConfigFile(join(dir, 'missing.yaml')), { name: 'TypeError', message: /^config: cannot read .*missing\.yaml \(ENOENT\)$/ });
});

t.test('config/gateway.example.yaml is a valid config', async (t) => {
  const raw = await loadConfigFile(join(import.meta.dirname, '../../config/gateway.example.yaml'));
  const config = resolveConfig(raw, { GATEWAY_API_KEY: 'key-0123456789' });
  t.equal(config.listen.port, 8443);
  t.equal(config.plugin.verifyTimeoutMs, 10_000);
  t.ok(resolveGatewayOptions(config.plugin).routes.lookup('POST', '/v1/payments'));
});
