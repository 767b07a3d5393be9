/**
 * Options of the forward-auth endpoint: the gateway's options without an
 * upstream (the proxy in front forwards), plus the path prefix the decision
 * endpoints are served under. Validated once at registration with
 * path-named `TypeError`s, like the proxy's (options.ts).
 */

import { DECISION_OPTION_KEYS, OPTIONS_LABEL, resolveDecisionOptions } from '../options.js';
import type { GatewayOptions, ResolvedDecisionOptions } from '../options.js';
import { at, checkObject, checkPathname, fail, isPlainObject, item } from '../validate.js';

/**
 * Default path prefix of the decision endpoints (`/forward-auth/nginx`,
 * `/forward-auth/traefik`, `/forward-auth/caddy`, `/forward-auth/envoy/…`).
 *
 * @example
 * ```ts
 * await app.register(agentAuthzForwardAuth, { ...options, prefix: DEFAULT_FORWARD_AUTH_PREFIX });
 * // nginx: proxy_pass http://127.0.0.1:8090/forward-auth/nginx;
 * ```
 */
export const DEFAULT_FORWARD_AUTH_PREFIX = '/forward-auth';

/**
 * Options of {@link agentAuthzForwardAuth}: the gateway's options without
 * `upstream` and `upstreamTimeoutMs`, plus `prefix`.
 *
 * @example
 * ```ts
 * const options: ForwardAuthOptions = {
 *   sidecarUrl: 'http://127.0.0.1:8700',
 *   apiKey: process.env.GATEWAY_API_KEY!,
 *   routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }],
 *   trustedProxies: ['127.0.0.1'],        // the proxy calling the endpoint
 * };
 * await app.register(agentAuthzForwardAuth, options);
 * ```
 */
export interface ForwardAuthOptions extends Omit<GatewayOptions, 'upstream' | 'upstreamTimeoutMs'> {
  /** Path prefix of the decision endpoints (default {@link DEFAULT_FORWARD_AUTH_PREFIX}). */
  prefix?: string;
}

/** Validated forward-auth options. */
export interface ResolvedForwardAuthOptions extends ResolvedDecisionOptions {
  readonly prefix: string;
}

/** Validates forward-auth options and applies defaults. Throws a path-named `TypeError`. */
export function resolveForwardAuthOptions(raw: unknown, label: string = OPTIONS_LABEL): ResolvedForwardAuthOptions {
  const o = checkObject(raw, label, [...DECISION_OPTION_KEYS, 'prefix']);
  const prefix = o.prefix === undefined ? DEFAULT_FORWARD_AUTH_PREFIX : checkPathname(o.prefix, at(label, 'prefix'));
  if (prefix === '/' || prefix.endsWith('/')) fail(at(label, 'prefix'), 'must not end with "/" (for example /forward-auth)');
  const resolved = resolveDecisionOptions(o, label);
  // The endpoint never sees the upstream's answer, so it cannot record one: a route asking for the
  // ledger explicitly is refused rather than silently not protected (docs/gateway.md#idempotency).
  (o.routes as unknown[]).forEach((entry, i) => {
    const mode = isPlainObject(entry) ? entry.idempotency : undefined;
    if (mode === 'required' || mode === 'optional') {
      const where = at(item(at(label, 'routes'), i), 'idempotency');
      fail(where, 'the forward-auth endpoint does not see the upstream\'s answer and cannot use the idempotency '
        + 'ledger; remove the setting, or serve the route through the reverse proxy');
    }
  });
  return { ...resolved, prefix };
}
