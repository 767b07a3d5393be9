/**
 * `agent-authz/gateway`: what an application needs to put agent-authz in
 * front of an API. Everything else in gateway-plugin/ is internal.
 *
 * - {@link agentAuthzGateway}: the reverse-proxy plugin (docs/gateway.md),
 *   with MCP-aware routes (docs/mcp.md) and A2A-aware routes (docs/a2a.md);
 * - {@link agentAuthzForwardAuth}: the decision endpoint for a proxy you
 *   already run: Envoy ext_authz, NGINX auth_request, Traefik ForwardAuth,
 *   Caddy forward_auth (docs/forward-auth.md);
 * - their option types and defaults; the metrics factory; the server-level
 *   error answers; the names of the decision headers the upstream receives;
 *   the override headers the upstream never receives.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { agentAuthzGateway, GATEWAY_MAX_HEADER_SIZE } from 'agent-authz/gateway';
 *
 * const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE } });
 * await app.register(agentAuthzGateway, {
 *   upstream: 'http://127.0.0.1:8080', sidecarUrl: 'http://127.0.0.1:8700', apiKey: process.env.GATEWAY_API_KEY!,
 *   routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }],
 * });
 * ```
 */

export { agentAuthzGateway, agentAuthzGateway as default } from './plugin.js';
export { agentAuthzForwardAuth } from './forward-auth/plugin.js';
export { DEFAULT_FORWARD_AUTH_PREFIX } from './forward-auth/options.js';
export type { ForwardAuthOptions } from './forward-auth/options.js';
export {
  DEFAULT_BODY_LIMIT_BYTES, DEFAULT_CHALLENGE_TIMEOUT_MS, DEFAULT_SIDECAR_CONNECTIONS, DEFAULT_UPSTREAM_TIMEOUT_MS,
  DEFAULT_VERIFY_TIMEOUT_MS, GATEWAY_MAX_HEADER_SIZE,
} from './options.js';
export type { ContextOptions, GatewayOptions } from './options.js';
export type { RouteEntry } from './routes.js';
export type { McpRouteOptions, McpToolEntry } from './mcp/config.js';
export type { A2aRouteOptions } from './a2a/config.js';
export { createGatewayMetrics } from './metrics.js';
export type { GatewayMetrics } from './metrics.js';
export { gatewayClientErrors, gatewayFrameworkErrors, gatewayNotFound } from './framework-errors.js';
export { DECISION_HEADERS } from './headers.js';
export { OVERRIDE_HEADERS } from './override.js';
export type { OverrideHeaderPolicy } from './override.js';
