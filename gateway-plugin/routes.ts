/**
 * The route → scope table of the gateway: entries, their validation and
 * compilation (the compiled table and its lookup are in route-table.ts).
 *
 * An entry maps HTTP methods plus a path pattern to exactly one required
 * scope, or marks the route `public: true` (passes without a proof); an
 * `mcp` member makes it an MCP endpoint (mcp/config.ts). Patterns
 * are absolute, in normalized form (see `path.ts`), and made of segments:
 *
 * - a literal segment matches itself exactly (case-sensitive);
 * - `:name` matches exactly one non-empty segment;
 * - `*` (only as the last segment) matches the rest of the path, possibly empty.
 *
 * When several entries match, the most specific wins: segment by segment,
 * literal beats `:param` beats `*`; then an explicit method beats `'*'`.
 * Two entries with the same method and path shape are a startup error.
 * Any request that matches no entry is refused (403 `route_not_mapped`).
 *
 * Many upstreams (Express by default, IIS, case-insensitive file systems) read
 * `/app/admin/` and `/app/Admin` as `/app/admin`; lenient ones also read
 * `/app/admin./`, `/app/admin%20`, `/app/adm%C4%B1n` or fullwidth letters as
 * `/app/admin`. {@link RouteTable.resolve} therefore also looks up the
 * spellings such an upstream could mean: without the trailing slash,
 * case-folded (ASCII letters of the path AND of the pattern literals compared
 * lower-cased), folded (`foldPath` of src/path.ts: NFKC, Unicode case, accents,
 * trailing dots and spaces, merged slashes; pattern literals folded the same
 * way), and each of them without the trailing slash. When one of them leads
 * to a different authorization (another scope, public vs protected, other
 * amount/currency pointers, or matched vs unmatched), the path is ambiguous
 * (400 `ambiguous_path`); the gateway never guesses which one the upstream uses.
 */

import { at, checkJsonPointer, checkObject, checkScope, checkString, fail, isPlainObject, item } from './validate.js';
import { compileMcp } from './mcp/config.js';
import type { McpRoute, McpRouteOptions } from './mcp/config.js';
import { a2aScopes, compileA2a } from './a2a/config.js';
import type { A2aRoute, A2aRouteOptions } from './a2a/config.js';
import { MAX_PATH_LENGTH, foldSegment, isNormalizedPath } from '../src/path.js';
import { RouteTable, SUPPORTED_METHODS, foldCase, sameAuthorization } from './route-table.js';
import type { CompiledRoute, Segment } from './route-table.js';
import { SensitiveScopes, checkRouteMode, checkShadowRoute } from './shadow.js';
import type { RouteMode } from './shadow.js';
import { checkIdempotencyMode } from './idempotency.js';
import type { IdempotencyMode } from './idempotency.js';

export { RouteTable, SUPPORTED_METHODS } from './route-table.js';
export type { RouteMatch, RouteResolution } from './route-table.js';

/**
 * One entry of the route table as written in options or the config file.
 *
 * @example
 * ```ts
 * const routes: RouteEntry[] = [
 *   { method: ['GET', 'HEAD'], path: '/v1/items/:id', scope: 'data:read' },
 *   {
 *     method: 'POST', path: '/v1/payments', scope: 'payments:send',
 *     context: { amount: '/amount', currency: '/currency' },
 *   },
 *   { method: 'GET', path: '/status', public: true },
 *   { method: 'POST', path: '/mcp', scope: 'execute:tool', mcp: { tools: { get_weather: 'data:read' } } },
 * ];
 * ```
 */
export interface RouteEntry {
  /** An HTTP method, a list of them, or `'*'` for all {@link SUPPORTED_METHODS}. HEAD is not implied by GET. */
  method: string | readonly string[];
  /** Path pattern such as `/v1/items/:id` or `/files/*`. */
  path: string;
  /** The one scope the route requires (omit only with `public: true`). */
  scope?: string;
  /** `true`: the route passes without a proof (and without verify). */
  public?: boolean;
  /** Per-route JSON pointers overriding the global `context.amount` / `context.currency`. */
  context?: { amount?: string; currency?: string };
  /** Marks the route as an MCP endpoint: POSTed JSON-RPC tool calls map to scopes (see mcp/config.ts, docs/mcp.md). */
  mcp?: McpRouteOptions;
  /** Marks the route as an A2A server's JSON-RPC endpoint: each A2A method maps to a scope (docs/a2a.md). */
  a2a?: A2aRouteOptions;
  /**
   * `'shadow'`: verify runs, but the request is forwarded whatever the decision; would-be refusals
   * are logged and counted (shadow.ts). Refused for a route with a sensitive scope. Default `'enforce'`.
   */
  mode?: RouteMode;
  /**
   * The idempotency ledger for the route's POST, PUT, PATCH and DELETE requests (idempotency.ts,
   * docs/gateway.md#idempotency): `'required'` (400 without an `Idempotency-Key`), `'optional'` or
   * `'off'`. Default `'required'` for a `payments:*` scope, else `'off'`.
   */
  idempotency?: IdempotencyMode;
}

/** Global context pointers that route entries inherit. */
export interface RouteDefaults {
  amountPointer?: string | undefined;
  currencyPointer?: string | undefined;
}

const ROUTE_KEYS = ['method', 'path', 'scope', 'public', 'context', 'mcp', 'a2a', 'mode', 'idempotency'] as const;

function compileMethods(value: unknown, path: string): ReadonlySet<string> | 'any' {
  if (value === '*') return 'any';
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0) fail(path, `must be a method, a non-empty list of methods, or "*"`);
  const set = new Set<string>();
  list.forEach((method: unknown, i) => {
    const where = typeof value === 'string' ? path : item(path, i);
    if (typeof method !== 'string' || !(SUPPORTED_METHODS as readonly string[]).includes(method)) {
      fail(where, `must be one of ${SUPPORTED_METHODS.join(', ')} (uppercase) or "*"`);
    }
    if (set.has(method)) fail(where, `duplicate method ${method}`);
    set.add(method);
  });
  return set;
}

function compilePattern(value: unknown, path: string): Segment[] {
  const text = checkString(value, path);
  if (!text.startsWith('/')) fail(path, 'must start with "/"');
  if (text.length > MAX_PATH_LENGTH) {
    fail(path, `must be at most ${MAX_PATH_LENGTH} characters (longer request paths are refused)`);
  }
  const parts = text.slice(1).split('/');
  const names = new Set<string>();
  const segments = parts.map((part, i): Segment => {
    if (part === '*') {
      if (i !== parts.length - 1) fail(path, '"*" is only allowed as the last segment');
      return { kind: 2 };
    }
    if (part.startsWith(':')) {
      const name = part.slice(1);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) fail(path, `bad parameter name in segment "${part}"`);
      if (names.has(name)) fail(path, `duplicate parameter name "${name}"`);
      names.add(name);
      return { kind: 1 };
    }
    if (part.includes('*')) fail(path, '"*" must be a whole segment');
    if (part === '' && i !== parts.length - 1) fail(path, 'must not contain empty segments ("//")');
    return { kind: 0, text: part, folded: foldCase(part), loose: part === '' ? '' : foldSegment(part) };
  });
  const probe = '/' + segments.map((s) => (s.kind === 0 ? s.text : 'x')).join('/');
  if (!isNormalizedPath(probe)) {
    fail(path, 'is not in normalized form '
      + '(no dot segments, ";", "%2F", controls; decode unreserved %XX; uppercase hex)');
  }
  if (segments.some((s) => s.kind === 0 && s.text !== '' && s.loose === '')) {
    fail(path, 'has a segment of only white space or dots (servers read it as an empty segment)');
  }
  return segments;
}

function compileEntry(value: unknown, path: string, index: number, defaults: RouteDefaults): CompiledRoute {
  const entry = checkObject(value, path, ROUTE_KEYS);
  if (entry.method === undefined) fail(at(path, 'method'), 'is required');
  const methods = compileMethods(entry.method, at(path, 'method'));
  const segments = compilePattern(entry.path, at(path, 'path'));
  const isPublic = entry.public;
  if (isPublic !== undefined && isPublic !== true) fail(at(path, 'public'), 'must be true when present');
  const mode = checkRouteMode(entry.mode, at(path, 'mode'));
  if (mode === 'shadow' && isPublic === true) fail(at(path, 'mode'), 'a public route has nothing to shadow');
  let scope: string | undefined;
  if (isPublic === true) {
    if (entry.scope !== undefined) fail(path, 'a public route must not have a scope');
  } else {
    if (entry.scope === undefined) fail(at(path, 'scope'), 'is required (or set public: true)');
    scope = checkScope(entry.scope, at(path, 'scope'));
  }
  let mcp: McpRoute | undefined;
  if (entry.mcp !== undefined) {
    if (isPublic === true) fail(path, 'an MCP route must not be public (list public JSON-RPC methods in mcp.public)');
    if (methods !== 'any' && !methods.has('POST')) fail(at(path, 'method'), 'an MCP route must accept POST');
    if (entry.context !== undefined) {
      fail(at(path, 'context'), 'an MCP route takes its context from tool arguments (mcp.tools.<name>.context)');
    }
    mcp = compileMcp(entry.mcp, at(path, 'mcp'));
  }
  let a2a: A2aRoute | undefined;
  if (entry.a2a !== undefined) {
    if (mcp !== undefined) fail(path, 'a route is an MCP route or an A2A route, not both');
    if (isPublic === true || scope === undefined) fail(path, 'an A2A route must not be public (it needs a scope)');
    if (methods !== 'any' && !methods.has('POST')) fail(at(path, 'method'), 'an A2A route must accept POST');
    if (entry.context !== undefined) fail(at(path, 'context'), 'an A2A route takes no context pointers');
    a2a = compileA2a(entry.a2a, at(path, 'a2a'), scope);
  }
  // MCP and A2A bodies are JSON-RPC messages: the global body pointers do not apply to them.
  const rpc = mcp !== undefined || a2a !== undefined;
  let amountPointer = rpc ? undefined : defaults.amountPointer;
  let currencyPointer = rpc ? undefined : defaults.currencyPointer;
  if (entry.context !== undefined) {
    const ctx = checkObject(entry.context, at(path, 'context'), ['amount', 'currency']);
    if (ctx.amount !== undefined) amountPointer = checkJsonPointer(ctx.amount, at(at(path, 'context'), 'amount'));
    if (ctx.currency !== undefined) {
      currencyPointer = checkJsonPointer(ctx.currency, at(at(path, 'context'), 'currency'));
    }
  }
  const idempotency = checkIdempotencyMode(entry.idempotency, at(path, 'idempotency'),
    { scope, rpc, shadow: mode === 'shadow' });
  const shape = segments.map((s) => (s.kind === 0 ? `=${s.text}` : s.kind === 1 ? ':' : '*')).join('/');
  const looseShape = segments.map((s) => (s.kind === 0 ? `=${s.loose}` : s.kind === 1 ? ':' : '*')).join('/');
  return {
    index, pattern: entry.path as string, scope, amountPointer, currencyPointer, mcp, a2a, mode, idempotency, methods,
    segments, shape, foldedShape: foldCase(shape), looseShape,
  };
}

/**
 * Validates and compiles a route table. Throws a path-named `TypeError`
 * (for example `gateway options: routes[3].scope: ...`) on any bad entry,
 * and for a shadow-mode route with a scope in `sensitive` (shadow.ts).
 */
export function compileRoutes(
  value: unknown, path: string, defaults: RouteDefaults = {}, sensitive = new SensitiveScopes(),
): RouteTable {
  if (!Array.isArray(value) || value.length === 0) fail(path, 'must be a non-empty list of routes');
  const compiled = value.map((entry: unknown, i) => {
    if (!isPlainObject(entry)) fail(item(path, i), 'must be an object');
    const route = compileEntry(entry, item(path, i), i, defaults);
    if (route.mode === 'shadow') {
      const scopes: [string, string][] = route.scope === undefined ? [] : [['scope', route.scope]];
      for (const [name, tool] of route.mcp?.tools ?? []) scopes.push([`tool ${name}'s scope`, tool.scope]);
      if (route.a2a !== undefined) scopes.push(...a2aScopes(route.a2a));
      checkShadowRoute(item(path, i), route.pattern, scopes, sensitive);
    }
    if (route.a2a !== undefined && route.a2a.shadowMethods.size > 0) {
      checkShadowRoute(at(item(path, i), 'a2a'), route.pattern, a2aScopes(route.a2a, true), sensitive, 'shadow');
    }
    for (const [name, tool] of route.mcp?.tools ?? []) {
      if (tool.mode !== 'shadow') continue;
      checkShadowRoute(at(at(at(item(path, i), 'mcp'), 'tools'), name), route.pattern,
        [[`tool ${name}'s scope`, tool.scope]], sensitive);
    }
    return route;
  });
  for (const b of compiled) {
    for (const a of compiled) {
      if (a.index >= b.index || a.looseShape !== b.looseShape) continue;
      const overlap = a.methods === 'any' || b.methods === 'any'
        ? a.methods === b.methods
        : [...a.methods].some((m) => (b.methods as ReadonlySet<string>).has(m));
      if (!overlap) continue;
      const other = item(path, a.index).replace(/^.*?: /, '');
      if (a.shape === b.shape) fail(item(path, b.index), `has the same method and path shape as ${other}`);
      // Patterns differing only in letter case (or in a folded spelling): every request to one of them
      // would be refused as ambiguous.
      if (!sameAuthorization(a, b)) {
        const how = a.foldedShape === b.foldedShape
          ? 'only in letter case'
          : 'only in a folded spelling (docs/gateway.md)';
        fail(item(path, b.index), `differs ${how} from ${other} but is authorized differently`);
      }
    }
  }
  for (const mcp of compiled) {
    if (mcp.mcp === undefined) continue;
    for (const other of compiled) {
      if (other.mcp !== undefined || !pathsOverlap(mcp.segments, other.segments)) continue;
      const name = item(path, mcp.index).replace(/^.*?: /, '');
      fail(item(path, other.index), `its path ${other.pattern} overlaps MCP route ${name} (${mcp.pattern}): `
        + 'requests to an MCP endpoint '
        + 'must all go through its MCP route (list every method there), or they would skip its session binding');
    }
  }
  return new RouteTable(compiled);
}

/** True when some request path matches both patterns (literals compared in their fully folded reading). */
function pathsOverlap(a: readonly Segment[], b: readonly Segment[]): boolean {
  for (let i = 0; ; i += 1) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined) return x === y;
    if (x.kind === 2 || y.kind === 2) return true;
    if (x.kind === 0 && y.kind === 0 && x.loose !== y.loose) return false;
    if ((x.kind === 0 && x.text === '' && y.kind === 1) || (y.kind === 0 && y.text === '' && x.kind === 1)) {
      return false;
    }
  }
}
