/**
 * The standalone server's two modes (config `mode`): `proxy` registers the
 * gateway plugin in front of `upstream_url`; `forward_auth` registers the
 * decision endpoints for a proxy in front (docs/forward-auth.md). Both
 * validate their options here, with the `config:` label, and check that the
 * health paths do not collide with what the mode serves.
 */

import type { FastifyInstance } from 'fastify';
import { agentAuthzForwardAuth } from '../forward-auth/plugin.js';
import { resolveForwardAuthOptions } from '../forward-auth/options.js';
import type { ForwardAuthOptions } from '../forward-auth/options.js';
import type { GatewayMetrics } from '../metrics.js';
import { resolveGatewayOptions } from '../options.js';
import type { GatewayOptions, ResolvedDecisionOptions } from '../options.js';
import { agentAuthzGateway } from '../plugin.js';
import { fail } from '../validate.js';
import type { GatewayConfig } from './config.js';

/** A resolved mode of the standalone server. */
export interface StandaloneMode {
  /** The validated options shared by both modes (sidecar, routes, limits). */
  readonly resolved: ResolvedDecisionOptions;
  /** The code of the answer to a path nothing serves: `route_not_mapped` (proxy) or `route_not_found` (forward_auth). */
  readonly notFound: 'route_not_mapped' | 'route_not_found';
  /** Registers the mode's plugin. */
  register(app: FastifyInstance): Promise<void>;
}

/** Validates the mode's plugin options (with `metrics`) and the health paths. Throws a path-named `TypeError`. */
export function resolveMode(config: GatewayConfig, metrics: GatewayMetrics): StandaloneMode {
  // Health endpoints on the metrics listener (or turned off) cannot collide with the main listener's paths.
  const health: Array<[string, string]> = [];
  if (config.health.listener === 'main') {
    if (config.health.livenessPath !== undefined) health.push(['liveness_path', config.health.livenessPath]);
    if (config.health.readinessPath !== undefined) health.push(['readiness_path', config.health.readinessPath]);
  }
  if (config.mode === 'forward_auth') {
    const options: ForwardAuthOptions = { ...(config.plugin as ForwardAuthOptions), metrics };
    const resolved = resolveForwardAuthOptions(options, 'config:');
    for (const [key, path] of health) {
      if (path === resolved.prefix || path.startsWith(`${resolved.prefix}/`)) fail(`config: health.${key}`, `${path} collides with forward_auth.path_prefix`);
    }
    return { resolved, notFound: 'route_not_found', register: async (app) => { await app.register(agentAuthzForwardAuth, options); } };
  }
  const options: GatewayOptions = { ...(config.plugin as GatewayOptions), metrics };
  const resolved = resolveGatewayOptions(options, 'config:');
  for (const [key, path] of health) {
    const hit = resolved.routes.lookup('GET', path);
    if (hit !== undefined) fail(`config: health.${key}`, `${path} collides with routes[${hit.index}]`);
  }
  return { resolved, notFound: 'route_not_mapped', register: async (app) => { await app.register(agentAuthzGateway, options); } };
}
