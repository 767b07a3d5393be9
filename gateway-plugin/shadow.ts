/**
 * Shadow mode (issue 35; docs/gateway.md, "Rolling out: shadow mode"): a
 * route set `mode: shadow` is verified as usual, but the request is forwarded
 * whatever the decision. What would have been refused is logged with its
 * reason, counted in `agent_authz_gateway_shadow_would_refuse_total{route,
 * reason}`, and marked for the upstream with `X-Service-Decision: shadow` and
 * `X-Service-Shadow-Refusal: <status> <code>[; reason=<reason>]`
 * (`DECISION_HEADERS.shadowRefusal`, headers.ts). Refusals that come before a route is known or that
 * concern the request's form (a path that is ambiguous or not mapped,
 * override headers, a body over the limit, a header block over the limit)
 * are enforced in shadow mode too.
 *
 * A route whose scope is sensitive cannot be in shadow mode: the route table
 * is refused at startup, naming the route. Sensitive are
 * {@link BUILTIN_SENSITIVE_SCOPES} and every scope (or `area:*` pattern) the
 * operator lists in `shadowSensitiveScopes`. For an MCP route, its scope and
 * every tool's scope count.
 */

import { ServiceError } from '../src/errors.js';
import { at, checkScope, checkString, fail, item } from './validate.js';


/**
 * Scopes no route in shadow mode may require: every `payments:` scope, `data:write`, and the
 * vocabulary's other sensitive scopes (src/scopes.ts). The vocabulary has no scope for the
 * right to delegate; list one in `shadowSensitiveScopes` if your routes use a custom scope for it.
 */
export const BUILTIN_SENSITIVE_SCOPES: readonly string[] = [
  'payments:*', 'data:write', 'data:delete', 'execute:code', 'admin:manage',
];

/** A route's mode: `enforce` (the default) or `shadow`. */
export type RouteMode = 'enforce' | 'shadow';

/** Validates a route's `mode`. */
export function checkRouteMode(value: unknown, path: string): RouteMode {
  if (value === undefined) return 'enforce';
  if (value !== 'enforce' && value !== 'shadow') fail(path, 'must be "enforce" or "shadow"');
  return value;
}

/** Matches scopes against exact scopes and `area:*` patterns. */
export class SensitiveScopes {
  readonly #exact = new Set<string>();
  readonly #prefixes: string[] = [];

  constructor(extra: readonly string[] = []) {
    for (const s of [...BUILTIN_SENSITIVE_SCOPES, ...extra]) {
      if (s.endsWith(':*')) this.#prefixes.push(s.slice(0, -1));
      else this.#exact.add(s);
    }
  }

  /** The entry that makes `scope` sensitive, or `undefined`. */
  match(scope: string): string | undefined {
    if (this.#exact.has(scope)) return scope;
    const prefix = this.#prefixes.find((p) => scope.startsWith(p));
    return prefix === undefined ? undefined : `${prefix}*`;
  }
}

/** Validates the operator's list of sensitive scopes (`data:read`, `custom:crm:*`). */
export function checkSensitiveScopes(value: unknown, path: string): SensitiveScopes {
  if (value === undefined) return new SensitiveScopes();
  if (!Array.isArray(value)) fail(path, 'must be a list of scopes or "area:*" patterns');
  const list = value.map((v: unknown, i) => {
    const text = checkString(v, item(path, i));
    if (text.endsWith(':*')) {
      if (!/^[a-z][a-z0-9._-]*(:[a-z0-9._-]+)*:\*$/.test(text)) {
        fail(item(path, i), `${JSON.stringify(text)} is not a scope pattern such as "custom:crm:*"`);
      }
      return text;
    }
    return checkScope(text, item(path, i));
  });
  return new SensitiveScopes(list);
}

/**
 * Refuses a shadow-mode route that requires a sensitive scope (`scopes`: the route's, and its MCP tools' or
 * A2A methods'). The error names `path` + `member` (the setting that asked for shadow mode).
 */
export function checkShadowRoute(
  path: string, pattern: string, scopes: Iterable<[where: string, scope: string]>, sensitive: SensitiveScopes,
  member = 'mode',
): void {
  for (const [where, scope] of scopes) {
    const hit = sensitive.match(scope);
    if (hit !== undefined) {
      fail(at(path, member),
        `route ${pattern} cannot be in shadow mode: ${where} ${scope} is sensitive (${hit}); enforce it`);
    }
  }
}

/** The `X-Service-Shadow-Refusal` value of a refusal: `<status> <code>[; reason=<reason>]`. */
export function shadowHeaderValue(err: ServiceError, reason: string): string {
  return reason === err.code ? `${err.status} ${err.code}` : `${err.status} ${err.code}; reason=${reason}`;
}

/** What {@link logShadow} needs of a shadow decision. */
interface ShadowFacts {
  readonly refusal: ServiceError;
  readonly reason: string;
  readonly route: string;
}

/** Logs a shadow-mode request that is forwarded although it would have been refused (level `info`). */
export function logShadow(log: { info(obj: object, msg: string): void }, decision: ShadowFacts): void {
  const { refusal, reason, route } = decision;
  log.info(
    { shadow: { route, status: refusal.status, code: refusal.code, reason } },
    'gateway: shadow mode forwarded a request it would refuse',
  );
}
