/**
 * The standalone gateway's config file: loading (YAML or JSON) and validation.
 *
 * Keys are snake_case; `routes` and `context` use the same shape as the plugin
 * options (see routes.ts / options.ts). The sidecar API key is never in the
 * file: `api_key_env` names the environment variable holding it. Every error
 * is a one-line `TypeError` naming the path, for example
 * `config: routes[2].scope: is required (or set public: true)`.
 * config/gateway.example.yaml documents every key.
 */

import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import {
  DEFAULT_BODY_LIMIT_BYTES, DEFAULT_CHALLENGE_TIMEOUT_MS, DEFAULT_SIDECAR_CONNECTIONS, DEFAULT_UPSTREAM_TIMEOUT_MS,
  DEFAULT_VERIFY_TIMEOUT_MS,
  checkApiKey, checkDecisionApi, checkOverridePolicy, resolveContext,
} from '../options.js';
import { TrustedProxies } from '../context.js';
import { compileRoutes } from '../routes.js';
import { checkSensitiveScopes } from '../shadow.js';
import { checkSessionSecret } from '../mcp/config.js';
import type { GatewayOptions } from '../options.js';
import type { RouteEntry } from '../routes.js';
import { DEFAULT_FORWARD_AUTH_PREFIX } from '../forward-auth/options.js';
import type { ForwardAuthOptions } from '../forward-auth/options.js';
import { at, checkHttpUrl, checkInt, checkObject, checkPathname, checkString, fail } from '../validate.js';

/** Label of config errors. */
export const CONFIG_LABEL = 'config:';
/** Default listen address of the standalone gateway. */
export const DEFAULT_LISTEN_HOST = '127.0.0.1';
/** Default listen port of the standalone gateway. */
export const DEFAULT_LISTEN_PORT = 8080;
/** Default liveness path (200 while the process is up). */
export const DEFAULT_LIVENESS_PATH = '/healthz';
/** Default readiness path (200 only while the sidecar's /readyz answers 200). */
export const DEFAULT_READINESS_PATH = '/readyz';
/** Default metrics listener host. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';
/** Default metrics listener port. */
export const DEFAULT_METRICS_PORT = 9464;
/** Default metrics path on the metrics listener. */
export const DEFAULT_METRICS_PATH = '/metrics';
/** Default log level (pino levels, or `silent`). */
export const DEFAULT_LOG_LEVEL = 'info';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const TOP_KEYS = [
  'mode', 'forward_auth', 'upstream_url', 'sidecar_url', 'api_key_env', 'verify_timeout_ms', 'decision_api',
  'challenge_timeout_ms',
  'upstream_timeout_ms',
  'body_limit_bytes', 'sidecar_connections', 'trusted_proxies', 'context', 'routes', 'listen', 'health', 'metrics',
  'log_level',
  'override_headers', 'shadow_sensitive_scopes', 'mcp_session_secret_env',
] as const;

/** What the standalone process serves: the reverse proxy, or the forward-auth endpoint for a proxy in front. */
export type GatewayMode = 'proxy' | 'forward_auth';

/** A validated standalone configuration. */
export interface GatewayConfig {
  /** `proxy` (default): the reverse proxy; `forward_auth`: the decision endpoints only (docs/forward-auth.md). */
  readonly mode: GatewayMode;
  /** Options for the mode's plugin (validated again, with the `config:` label, at build time). */
  readonly plugin: GatewayOptions | ForwardAuthOptions;
  readonly listen: { readonly host: string; readonly port: number };
  /**
   * The health endpoints: each path, or `undefined` when turned off (`false`), and the listener
   * serving them (`main`, or `metrics` so that the main listener can map a catch-all such as `GET /*`).
   */
  readonly health: {
    readonly livenessPath: string | undefined; readonly readinessPath: string | undefined;
    readonly listener: 'main' | 'metrics';
  };
  /** The metrics listener, or `false` when disabled. */
  readonly metrics: { readonly host: string; readonly port: number; readonly path: string } | false;
  readonly logLevel: string;
}

function checkHost(value: unknown, path: string, fallback: string): string {
  if (value === undefined) return fallback;
  const host = checkString(value, path);
  if (!/^[A-Za-z0-9.:-]+$/.test(host)) fail(path, 'must be a host name or IP address');
  return host;
}

/** Validates `health`: `false` (no health endpoints), or paths (each may be `false`) and the listener. */
function resolveHealth(value: unknown, path: string): GatewayConfig['health'] {
  if (value === false) return { livenessPath: undefined, readinessPath: undefined, listener: 'main' };
  const h = checkObject(value ?? {}, path, ['liveness_path', 'readiness_path', 'listener']);
  const pathOf = (key: 'liveness_path' | 'readiness_path', fallback: string): string | undefined => {
    const value = h[key];
    if (value === false) return undefined;
    if (value !== undefined && typeof value !== 'string') {
      fail(at(path, key), 'must be a path such as /healthz, or false to turn it off');
    }
    return value === undefined ? fallback : checkPathname(value, at(path, key));
  };
  const livenessPath = pathOf('liveness_path', DEFAULT_LIVENESS_PATH);
  const readinessPath = pathOf('readiness_path', DEFAULT_READINESS_PATH);
  if (livenessPath !== undefined && livenessPath === readinessPath) {
    fail(at(path, 'readiness_path'), 'must differ from liveness_path');
  }
  const listener = h.listener ?? 'main';
  if (listener !== 'main' && listener !== 'metrics') fail(at(path, 'listener'), 'must be main or metrics');
  return { livenessPath, readinessPath, listener };
}

/**
 * Validates a parsed config object. `env` supplies the variable named by
 * `api_key_env`. Throws a one-line path-named `TypeError`.
 */
export function resolveConfig(raw: unknown, env: NodeJS.ProcessEnv): GatewayConfig {
  const L = CONFIG_LABEL;
  if (raw !== null && typeof raw === 'object' && 'api_key' in raw) {
    fail(at(L, 'api_key'),
      'the key must not be in the file; put it in an environment variable and name that in api_key_env');
  }
  const c = checkObject(raw, L, TOP_KEYS);
  const mode = c.mode ?? 'proxy';
  if (mode !== 'proxy' && mode !== 'forward_auth') fail(at(L, 'mode'), 'must be proxy or forward_auth');
  const proxy = mode === 'proxy';
  for (const key of ['sidecar_url', 'api_key_env', 'routes'] as const) {
    if (c[key] === undefined) fail(at(L, key), 'is required');
  }
  if (proxy && c.upstream_url === undefined) fail(at(L, 'upstream_url'), 'is required');
  if (proxy && c.forward_auth !== undefined) fail(at(L, 'forward_auth'), 'is only used with mode: forward_auth');
  for (const key of ['upstream_url', 'upstream_timeout_ms', 'override_headers', 'mcp_session_secret_env'] as const) {
    if (!proxy && c[key] !== undefined) {
      fail(at(L, key), 'is not used with mode: forward_auth (the proxy in front forwards)');
    }
  }
  const forwardAuth = checkObject(c.forward_auth ?? {}, at(L, 'forward_auth'), ['path_prefix']);
  const sidecarUrl = checkHttpUrl(c.sidecar_url, at(L, 'sidecar_url'), false).href;
  const envName = checkString(c.api_key_env, at(L, 'api_key_env'));
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(envName)) {
    fail(at(L, 'api_key_env'), 'must be an environment variable NAME such as GATEWAY_API_KEY');
  }
  const keyValue = env[envName];
  if (keyValue === undefined || keyValue === '') {
    fail(at(L, 'api_key_env'), `environment variable ${envName} is not set`);
  }
  const apiKey = checkApiKey(keyValue, `${at(L, 'api_key_env')} (${envName})`);
  const mcpSessionSecret = c.mcp_session_secret_env === undefined
    ? undefined
    : sessionSecretOf(c.mcp_session_secret_env, env, apiKey);

  const listen = checkObject(c.listen ?? {}, at(L, 'listen'), ['host', 'port']);
  const health = resolveHealth(c.health, at(L, 'health'));

  let metrics: GatewayConfig['metrics'] = false;
  if (c.metrics !== false) {
    const m = checkObject(c.metrics ?? {}, at(L, 'metrics'), ['host', 'port', 'path']);
    metrics = {
      host: checkHost(m.host, at(at(L, 'metrics'), 'host'), DEFAULT_METRICS_HOST),
      port: checkInt(m.port, at(at(L, 'metrics'), 'port'), 0, 65_535, DEFAULT_METRICS_PORT),
      path: m.path === undefined ? DEFAULT_METRICS_PATH : checkPathname(m.path, at(at(L, 'metrics'), 'path')),
    };
  }
  if (health.listener === 'metrics') {
    if (metrics === false) {
      fail(at(at(L, 'health'), 'listener'), 'is "metrics" but the metrics listener is disabled (metrics: false)');
    }
    for (const [key, value] of [
      ['liveness_path', health.livenessPath], ['readiness_path', health.readinessPath],
    ] as const) {
      if (value === metrics.path) fail(at(at(L, 'health'), key), `${value} collides with metrics.path`);
    }
  }
  const listenPort = checkInt(listen.port, at(at(L, 'listen'), 'port'), 0, 65_535, DEFAULT_LISTEN_PORT);
  if (metrics !== false && metrics.port !== 0 && metrics.port === listenPort) {
    fail(at(at(L, 'metrics'), 'port'), 'must differ from listen.port');
  }
  const logLevel = c.log_level === undefined ? DEFAULT_LOG_LEVEL : checkString(c.log_level, at(L, 'log_level'));
  if (!LOG_LEVELS.includes(logLevel)) fail(at(L, 'log_level'), `must be one of ${LOG_LEVELS.join(', ')}`);
  // Validate the shared parts here so errors carry config key names.
  const trusted = new TrustedProxies(c.trusted_proxies, at(L, 'trusted_proxies'));
  const sensitive = checkSensitiveScopes(c.shadow_sensitive_scopes, at(L, 'shadow_sensitive_scopes'));
  compileRoutes(c.routes, at(L, 'routes'), resolveContext(c.context, at(L, 'context'), trusted), sensitive);

  const common = {
    sidecarUrl,
    apiKey,
    routes: c.routes as RouteEntry[],
    verifyTimeoutMs: checkInt(c.verify_timeout_ms, at(L, 'verify_timeout_ms'), 1, 120_000, DEFAULT_VERIFY_TIMEOUT_MS),
    decisionApi: checkDecisionApi(c.decision_api, at(L, 'decision_api')),
    challengeTimeoutMs: checkInt(
      c.challenge_timeout_ms, at(L, 'challenge_timeout_ms'), 1, 60_000, DEFAULT_CHALLENGE_TIMEOUT_MS),
    bodyLimit: checkInt(c.body_limit_bytes, at(L, 'body_limit_bytes'), 0, 1_073_741_824, DEFAULT_BODY_LIMIT_BYTES),
    sidecarConnections: checkInt(
      c.sidecar_connections, at(L, 'sidecar_connections'), 1, 4096, DEFAULT_SIDECAR_CONNECTIONS),
    ...(c.trusted_proxies === undefined ? {} : { trustedProxies: c.trusted_proxies as string[] }),
    ...(c.context === undefined ? {} : { context: c.context as GatewayOptions['context'] & object }),
    ...(c.shadow_sensitive_scopes === undefined
      ? {}
      : { shadowSensitiveScopes: c.shadow_sensitive_scopes as string[] }),
  };
  const plugin: GatewayOptions | ForwardAuthOptions = proxy
    ? {
      upstream: checkHttpUrl(c.upstream_url, at(L, 'upstream_url'), true).origin,
      ...common,
      upstreamTimeoutMs: checkInt(
        c.upstream_timeout_ms, at(L, 'upstream_timeout_ms'), 1, 3_600_000, DEFAULT_UPSTREAM_TIMEOUT_MS),
      overrideHeaders: checkOverridePolicy(c.override_headers, at(L, 'override_headers')),
      ...(mcpSessionSecret === undefined ? {} : { mcpSessionSecret }),
    }
    : { ...common,
      prefix: forwardAuth.path_prefix === undefined ? DEFAULT_FORWARD_AUTH_PREFIX : checkPathname(
        forwardAuth.path_prefix, at(at(L, 'forward_auth'), 'path_prefix')) };
  return {
    mode,
    plugin,
    listen: { host: checkHost(listen.host, at(at(L, 'listen'), 'host'), DEFAULT_LISTEN_HOST), port: listenPort },
    health,
    metrics,
    logLevel,
  };
}

/**
 * The MCP session secret from the environment variable `mcp_session_secret_env` names
 * (validated as the plugin option).
 */
function sessionSecretOf(name: unknown, env: NodeJS.ProcessEnv, apiKey: string): string {
  const path = at(CONFIG_LABEL, 'mcp_session_secret_env');
  const envName = checkString(name, path);
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(envName)) {
    fail(path, 'must be an environment variable NAME such as GATEWAY_MCP_SESSION_SECRET');
  }
  const value = env[envName];
  if (value === undefined || value === '') fail(path, `environment variable ${envName} is not set`);
  checkSessionSecret(value, `${path} (${envName})`, apiKey);
  return value;
}

/** Reads and parses a YAML or JSON config file (duplicate keys are refused). */
export async function loadConfigFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    fail(CONFIG_LABEL, `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    return file.endsWith('.json')
      ? JSON.parse(text) as unknown
      : parseYaml(text, { uniqueKeys: true, prettyErrors: false }) as unknown;
  } catch (err) {
    const first = String((err as Error).message).split('\n')[0] ?? 'parse error';
    fail(CONFIG_LABEL, `${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${first}`);
  }
}
