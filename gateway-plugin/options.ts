/**
 * Options of the gateway plugin: types, defaults and validation.
 *
 * {@link resolveGatewayOptions} runs once at registration. Misuse throws a
 * `TypeError` naming the path (`gateway options: routes[3].scope: ...`);
 * unknown keys are rejected. The standalone config (`config.ts`) reuses the
 * same validators with the label `config:`.
 */

import { TrustedProxies, validateTenantRule } from './context.js';
import type { TenantRule } from './context.js';
import { compileRoutes } from './routes.js';
import { checkSensitiveScopes } from './shadow.js';
import type { RouteEntry, RouteTable } from './routes.js';
import { createGatewayMetrics, isGatewayMetrics } from './metrics.js';
import type { GatewayMetrics } from './metrics.js';
import { at, checkHttpUrl, checkInt, checkJsonPointer, checkObject, checkString, fail, item } from './validate.js';
import type { OverrideHeaderPolicy } from './override.js';
import { checkSessionSecret } from './mcp/config.js';

/**
 * Default deadline of a verify call (ms); the spec's sample value.
 *
 * @example
 * ```ts
 * await app.register(agentAuthzGateway, { ...options, verifyTimeoutMs: DEFAULT_VERIFY_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_VERIFY_TIMEOUT_MS = 10_000;
/**
 * Default deadline of a challenge fetch (for the 401 answer) and of readiness probes (ms).
 *
 * @example
 * ```ts
 * await app.register(agentAuthzGateway, { ...options, challengeTimeoutMs: DEFAULT_CHALLENGE_TIMEOUT_MS });
 * ```
 */
export const DEFAULT_CHALLENGE_TIMEOUT_MS = 2_000;
/**
 * Default deadline for the upstream's response headers and between body chunks (ms).
 *
 * @example
 * ```ts
 * await app.register(agentAuthzGateway, { ...options, upstreamTimeoutMs: 2 * DEFAULT_UPSTREAM_TIMEOUT_MS });
 * ```
 */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000;
/**
 * Default largest request body accepted and hashed (bytes, 1 MiB); larger is 413 `body_too_large`.
 *
 * @example
 * ```ts
 * await app.register(agentAuthzGateway, { ...options, bodyLimit: 4 * DEFAULT_BODY_LIMIT_BYTES });
 * ```
 */
export const DEFAULT_BODY_LIMIT_BYTES = 1_048_576;
/**
 * Default maximum concurrent keep-alive connections to the sidecar.
 *
 * @example
 * ```ts
 * await app.register(agentAuthzGateway, { ...options, sidecarConnections: DEFAULT_SIDECAR_CONNECTIONS * 2 });
 * ```
 */
export const DEFAULT_SIDECAR_CONNECTIONS = 64;
/**
 * Node `maxHeaderSize` a gateway server needs so real proof bundles (~6–7 KiB of base64) fit (32 KiB).
 *
 * @example
 * ```ts
 * const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE } });
 * ```
 */
export const GATEWAY_MAX_HEADER_SIZE = 32_768;
/** The default label of option errors. */
export const OPTIONS_LABEL = 'gateway options:';

/**
 * Context-derivation rules (see `context.ts` and docs/gateway.md#context-derivation).
 *
 * @example
 * ```ts
 * const context: ContextOptions = { tenant: { suffix: '.tenants.example.com' }, amount: '/amount', currency: '/currency' };
 * await app.register(agentAuthzGateway, { ...options, context });
 * ```
 */
export interface ContextOptions {
  /** Tenant rule: exactly one of `hosts` (host → tenant), `suffix` (one host label), `header` (trusted proxies only). */
  tenant?: { hosts?: Record<string, string>; suffix?: string; header?: string };
  /** JSON pointer of the amount in the JSON body (route entries may override). */
  amount?: string;
  /** JSON pointer of the currency in the JSON body (route entries may override). */
  currency?: string;
}

/**
 * Options of the gateway plugin (validated at registration; unknown keys are refused).
 *
 * @example
 * ```ts
 * const options: GatewayOptions = {
 *   upstream: 'http://127.0.0.1:8080',
 *   sidecarUrl: 'http://127.0.0.1:8700',
 *   apiKey: process.env.GATEWAY_API_KEY!,
 *   routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }],
 *   trustedProxies: ['10.0.0.0/8'],
 * };
 * await app.register(agentAuthzGateway, options);
 * ```
 */
export interface GatewayOptions {
  /** Upstream origin, for example `http://127.0.0.1:8080` (no path). */
  upstream: string;
  /** Sidecar base URL, for example `http://127.0.0.1:8700` (the sidecar's default port). */
  sidecarUrl: string;
  /** The gateway's own sidecar API key (`X-Service-API-Key`). */
  apiKey: string;
  /** The route → scope table (see `routes.ts`). */
  routes: RouteEntry[];
  /** Verify deadline in ms (default {@link DEFAULT_VERIFY_TIMEOUT_MS}). */
  verifyTimeoutMs?: number;
  /**
   * The sidecar API each decision goes to: `verify` (default) or `authzen` (the same proof
   * verification through `POST /access/v1/evaluation`, docs/authzen.md; the same outcomes).
   */
  decisionApi?: 'verify' | 'authzen';
  /** Challenge/readiness deadline in ms (default {@link DEFAULT_CHALLENGE_TIMEOUT_MS}). */
  challengeTimeoutMs?: number;
  /** Upstream deadline in ms (default {@link DEFAULT_UPSTREAM_TIMEOUT_MS}). */
  upstreamTimeoutMs?: number;
  /** Largest request body in bytes (default {@link DEFAULT_BODY_LIMIT_BYTES}); larger is 413. */
  bodyLimit?: number;
  /** Proxy addresses/CIDRs whose `X-Forwarded-For` (and tenant header) is honoured. */
  trustedProxies?: string[];
  /** Context-derivation rules. */
  context?: ContextOptions;
  /** Where to record metrics (default: a private registry from `createGatewayMetrics()`). */
  metrics?: GatewayMetrics;
  /** Maximum connections to the sidecar (default {@link DEFAULT_SIDECAR_CONNECTIONS}). */
  sidecarConnections?: number;
  /**
   * Requests with a method or URL override header (`X-HTTP-Method-Override`, `X-HTTP-Method`,
   * `X-Method-Override`, `X-Original-URL`, `X-Rewrite-URL`): `'refuse'` (default, 400
   * `override_header_refused`) or `'strip'` (removed, the request forwarded as received).
   */
  overrideHeaders?: OverrideHeaderPolicy;
  /**
   * Scopes (or `area:*` patterns) no route in shadow mode may require, besides the built-in
   * `payments:*`, `data:write`, `data:delete`, `execute:code`, `admin:manage` (shadow.ts).
   */
  shadowSensitiveScopes?: string[];
  /**
   * The secret MCP session tokens and session keys are derived from (at least 32 bytes; docs/mcp.md#sessions).
   * Only the gateway holds it: never the sidecar API key. Default: random per process (sessions end with it).
   */
  mcpSessionSecret?: string;
}

/** Resolved context rules. */
export interface ResolvedContext {
  readonly tenant: TenantRule | undefined;
  readonly amountPointer: string | undefined;
  readonly currencyPointer: string | undefined;
}

/** Validated options every mode shares (the proxy adds its upstream; see forward-auth/options.ts). */
export interface ResolvedDecisionOptions {
  readonly sidecarUrl: URL;
  readonly apiKey: string;
  readonly routes: RouteTable;
  readonly verifyTimeoutMs: number;
  /** `verify` or `authzen`. */
  readonly decisionApi: 'verify' | 'authzen';
  readonly challengeTimeoutMs: number;
  readonly bodyLimit: number;
  readonly trustedProxies: TrustedProxies;
  readonly context: ResolvedContext;
  readonly metrics: GatewayMetrics;
  readonly sidecarConnections: number;
  /** What to do with override headers (forward-auth: always `refuse`). */
  readonly overrideHeaders: OverrideHeaderPolicy;
}

/** Validated proxy options with defaults applied. */
export interface ResolvedGatewayOptions extends ResolvedDecisionOptions {
  readonly upstream: string;
  readonly upstreamTimeoutMs: number;
  /** The configured MCP session secret; `undefined`: a random one per process. */
  readonly mcpSessionSecret: Buffer | undefined;
}

/** Option keys every mode shares. */
export const DECISION_OPTION_KEYS = ['sidecarUrl', 'apiKey', 'routes', 'verifyTimeoutMs', 'decisionApi',
  'challengeTimeoutMs',
  'bodyLimit', 'trustedProxies', 'context', 'metrics', 'sidecarConnections', 'shadowSensitiveScopes'] as const;
const OPTION_KEYS = [
  'upstream', 'sidecarUrl', 'apiKey', 'routes', 'verifyTimeoutMs', 'decisionApi', 'challengeTimeoutMs', 'upstreamTimeoutMs',
  'bodyLimit', 'trustedProxies',
  'context', 'metrics', 'sidecarConnections', 'overrideHeaders', 'shadowSensitiveScopes', 'mcpSessionSecret',
] as const;

/**
 * The AuthZEN evaluation carries no idempotency block (docs/authzen.md): with `decisionApi: 'authzen'`,
 * a route that keys requests in the idempotency ledger (the default for money-moving methods) is a
 * startup error naming it, instead of a 503 on each of its requests.
 */
function checkLedgerless(routes: RouteTable, path: string): void {
  const keyed = routes.entries.find((r) => r.idempotency !== 'off');
  if (keyed === undefined) return;
  fail(at(item(path, keyed.index), 'idempotency'), `route ${keyed.pattern} uses the idempotency ledger, which `
    + 'decisionApi "authzen" does not carry; set idempotency: off on it, or use decisionApi "verify"');
}

/** Validates `decisionApi`: `verify` (the default) or `authzen`. */
export function checkDecisionApi(value: unknown, path: string): 'verify' | 'authzen' {
  if (value === undefined) return 'verify';
  if (value !== 'verify' && value !== 'authzen') fail(path, 'must be "verify" or "authzen"');
  return value as 'verify' | 'authzen';
}

/** Validates an API key value (visible ASCII, as it goes into a header). */
export function checkApiKey(value: unknown, path: string): string {
  const key = checkString(value, path);
  if (!/^[\x21-\x7e]{8,512}$/.test(key)) fail(path, 'must be 8 to 512 visible ASCII characters');
  return key;
}

/** Validates the `context` rules. */
export function resolveContext(value: unknown, path: string, trusted: TrustedProxies): ResolvedContext {
  if (value === undefined) return { tenant: undefined, amountPointer: undefined, currencyPointer: undefined };
  const ctx = checkObject(value, path, ['tenant', 'amount', 'currency']);
  return {
    tenant: ctx.tenant === undefined ? undefined : validateTenantRule(ctx.tenant, at(path, 'tenant'), trusted.size > 0),
    amountPointer: ctx.amount === undefined ? undefined : checkJsonPointer(ctx.amount, at(path, 'amount')),
    currencyPointer: ctx.currency === undefined ? undefined : checkJsonPointer(ctx.currency, at(path, 'currency')),
  };
}

/**
 * Validates the options every mode shares (`o` is already checked for
 * unknown keys by the caller). Throws a path-named `TypeError`.
 */
export function resolveDecisionOptions(o: Record<string, unknown>, label: string): ResolvedDecisionOptions {
  for (const key of ['sidecarUrl', 'apiKey', 'routes'] as const) {
    if (o[key] === undefined) fail(at(label, key), 'is required');
  }
  const sidecarUrl = checkHttpUrl(o.sidecarUrl, at(label, 'sidecarUrl'), false);
  const apiKey = checkApiKey(o.apiKey, at(label, 'apiKey'));
  const trustedProxies = new TrustedProxies(o.trustedProxies, at(label, 'trustedProxies'));
  const context = resolveContext(o.context, at(label, 'context'), trustedProxies);
  const sensitive = checkSensitiveScopes(o.shadowSensitiveScopes, at(label, 'shadowSensitiveScopes'));
  const routes = compileRoutes(o.routes, at(label, 'routes'), context, sensitive);
  if (o.metrics !== undefined && !isGatewayMetrics(o.metrics)) fail(at(label, 'metrics'), 'must come from createGatewayMetrics()');
  const decisionApi = checkDecisionApi(o.decisionApi, at(label, 'decisionApi'));
  if (decisionApi === 'authzen') checkLedgerless(routes, at(label, 'routes'));
  return {
    sidecarUrl,
    apiKey,
    routes,
    verifyTimeoutMs: checkInt(o.verifyTimeoutMs, at(label, 'verifyTimeoutMs'), 1, 120_000, DEFAULT_VERIFY_TIMEOUT_MS),
    decisionApi,
    challengeTimeoutMs: checkInt(o.challengeTimeoutMs, at(label, 'challengeTimeoutMs'), 1, 60_000, DEFAULT_CHALLENGE_TIMEOUT_MS),
    bodyLimit: checkInt(o.bodyLimit, at(label, 'bodyLimit'), 0, 1_073_741_824, DEFAULT_BODY_LIMIT_BYTES),
    trustedProxies,
    context,
    metrics: (o.metrics as GatewayMetrics | undefined) ?? createGatewayMetrics(),
    sidecarConnections: checkInt(o.sidecarConnections, at(label, 'sidecarConnections'), 1, 4096, DEFAULT_SIDECAR_CONNECTIONS),
    overrideHeaders: 'refuse',
  };
}

/** Validates an override-header policy (`refuse`, the default, or `strip`). */
export function checkOverridePolicy(value: unknown, path: string): OverrideHeaderPolicy {
  if (value === undefined) return 'refuse';
  if (value !== 'refuse' && value !== 'strip') fail(path, 'must be "refuse" or "strip"');
  return value;
}

/** Validates plugin options and applies defaults. Throws a path-named `TypeError`. */
export function resolveGatewayOptions(raw: unknown, label: string = OPTIONS_LABEL): ResolvedGatewayOptions {
  const o = checkObject(raw, label, OPTION_KEYS);
  if (o.upstream === undefined) fail(at(label, 'upstream'), 'is required');
  const upstream = checkHttpUrl(o.upstream, at(label, 'upstream'), true).origin;
  const decision = resolveDecisionOptions(o, label);
  return {
    upstream,
    ...decision,
    upstreamTimeoutMs: checkInt(o.upstreamTimeoutMs, at(label, 'upstreamTimeoutMs'), 1, 3_600_000, DEFAULT_UPSTREAM_TIMEOUT_MS),
    overrideHeaders: checkOverridePolicy(o.overrideHeaders, at(label, 'overrideHeaders')),
    mcpSessionSecret: o.mcpSessionSecret === undefined
      ? undefined
      : checkSessionSecret(o.mcpSessionSecret, at(label, 'mcpSessionSecret'), decision.apiKey),
  };
}
