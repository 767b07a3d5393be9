/**
 * The compiled route table and its lookup (routes.ts validates and compiles
 * the entries): matching a normalized path against the patterns, and
 * {@link RouteTable.resolve}, which also looks up the spellings an upstream
 * may read as the same path (trailing slash, letter case, the folded reading
 * of src/path.ts) and reports the path as ambiguous when one of them is
 * authorized differently (docs/gateway.md, "Trailing slash, letter case and
 * folded spellings").
 */

import type { McpRoute } from './mcp/config.js';
import type { A2aRoute } from './a2a/config.js';
import type { RouteMode } from './shadow.js';
import type { IdempotencyMode } from './idempotency.js';
import { foldPath, mayFoldBeyondCase } from '../src/path.js';

/** Methods the gateway proxies (a route's `method` must be one of these or `'*'`). */
export const SUPPORTED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const;

/** The result of a successful lookup. */
export interface RouteMatch {
  /** Index of the entry in the configured table. */
  readonly index: number;
  /** The entry's path pattern. */
  readonly pattern: string;
  /** Required scope; `undefined` for a public route. */
  readonly scope: string | undefined;
  /** JSON pointer of the amount in the body, if any. */
  readonly amountPointer: string | undefined;
  /** JSON pointer of the currency in the body, if any. */
  readonly currencyPointer: string | undefined;
  /** The MCP settings of an MCP route (POSTs are JSON-RPC messages), else `undefined`. */
  readonly mcp: McpRoute | undefined;
  /** The A2A settings of an A2A route (POSTs are A2A JSON-RPC requests; a2a/config.ts), else `undefined`. */
  readonly a2a: A2aRoute | undefined;
  /** `shadow`: verified, but forwarded whatever the decision (shadow.ts); `enforce` otherwise. */
  readonly mode: RouteMode;
  /** The idempotency ledger for its keyed methods (idempotency.ts). */
  readonly idempotency: IdempotencyMode;
}

/** A pattern segment: a literal (exact text, ASCII case fold, full fold), `:param` or `*`. */
export type Segment = { kind: 0; text: string; folded: string; loose: string } | { kind: 1 } | { kind: 2 };
/** Which reading of the path a lookup compares: exact, ASCII case-folded, or fully folded (`foldPath`). */
type Reading = 'text' | 'folded' | 'loose';

/** A compiled entry of the table (routes.ts compiles it). */
export interface CompiledRoute extends RouteMatch {
  readonly methods: ReadonlySet<string> | 'any';
  readonly segments: readonly Segment[];
  readonly shape: string;
  readonly foldedShape: string;
  readonly looseShape: string;
}

/** Sort order: segment by segment, literal before `:param` before `*`; then an explicit method before `*`; then table order. */
export function compareRoutes(a: CompiledRoute, b: CompiledRoute): number {
  const n = Math.min(a.segments.length, b.segments.length);
  for (let i = 0; i < n; i += 1) {
    const d = (a.segments[i] as Segment).kind - (b.segments[i] as Segment).kind;
    if (d !== 0) return d;
  }
  const methodRank = (r: CompiledRoute): number => (r.methods === 'any' ? 1 : 0);
  return methodRank(a) - methodRank(b) || a.index - b.index;
}

/** ASCII lower-casing (normalized paths and pattern literals are ASCII; `%XX` folds the same on both sides). */
export function foldCase(text: string): string {
  return text.toLowerCase();
}

/** Matches `parts` (in the given reading) against a route. */
function matches(route: CompiledRoute, parts: readonly string[], reading: Reading): boolean {
  const segs = route.segments;
  for (let i = 0; i < segs.length; i += 1) {
    const seg = segs[i] as Segment;
    if (seg.kind === 2) return parts.length >= segs.length; // "*" takes the rest
    const part = parts[i];
    if (part === undefined) return false;
    if (seg.kind === 0 ? part !== seg[reading] : part === '') return false;
  }
  return parts.length === segs.length;
}

/** True when two lookups lead to the same authorization (both none, or same scope/public and pointers). */
export function sameAuthorization(a: CompiledRoute | undefined, b: CompiledRoute | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  // The mode too: a spelling that reaches a shadow route instead of an enforced one would skip enforcement.
  return a.scope === b.scope && a.amountPointer === b.amountPointer && a.currencyPointer === b.currencyPointer && a.mcp === b.mcp && a.a2a === b.a2a
    && a.mode === b.mode;
}

function toMatch(route: CompiledRoute): RouteMatch {
  const { index, pattern, scope, amountPointer, currencyPointer, mcp, a2a, mode, idempotency } = route;
  return { index, pattern, scope, amountPointer, currencyPointer, mcp, a2a, mode, idempotency };
}

/** What {@link RouteTable.resolve} found for a request. */
export type RouteResolution =
  | { readonly kind: 'match'; readonly route: RouteMatch }
  | { readonly kind: 'none' }
  /** Another spelling an upstream may treat as the same path is authorized differently. */
  | { readonly kind: 'ambiguous'; readonly spelling: 'trailing_slash' | 'case' | 'fold' };

/** A compiled, immutable route table. Build it with `compileRoutes` (routes.ts). */
export class RouteTable {
  readonly #routes: readonly CompiledRoute[];
  /** True when some pattern literal has an uppercase letter (then every path needs the folded lookup). */
  readonly #upperLiterals: boolean;
  /** True when some pattern literal folds beyond ASCII case (then every path needs the full-fold lookup). */
  readonly #looseLiterals: boolean;

  /** @internal use `compileRoutes` (routes.ts). */
  constructor(routes: readonly CompiledRoute[]) {
    this.#routes = [...routes].sort(compareRoutes);
    this.#upperLiterals = routes.some((r) => r.segments.some((s) => s.kind === 0 && s.folded !== s.text));
    this.#looseLiterals = routes.some((r) => r.segments.some((s) => s.kind === 0 && s.loose !== s.folded));
  }

  /** Number of entries. */
  get size(): number {
    return this.#routes.length;
  }

  /** The entries, most specific first. */
  get entries(): readonly CompiledRoute[] {
    return this.#routes;
  }

  #find(method: string, path: string, folded: boolean): CompiledRoute | undefined {
    return this.#findParts(method, (folded ? foldCase(path) : path).slice(1).split('/'), folded ? 'folded' : 'text');
  }

  #findParts(method: string, parts: readonly string[], reading: Reading): CompiledRoute | undefined {
    for (const route of this.#routes) {
      if (route.methods !== 'any' && !route.methods.has(method)) continue;
      if (route.methods === 'any' && !(SUPPORTED_METHODS as readonly string[]).includes(method)) continue;
      if (matches(route, parts, reading)) return route;
    }
    return undefined;
  }

  /**
   * The most specific entry for `method` and a NORMALIZED `path` (exact,
   * case-sensitive match), or `undefined`. Requests use {@link resolve}.
   */
  lookup(method: string, path: string): RouteMatch | undefined {
    const route = this.#find(method, path, false);
    return route === undefined ? undefined : toMatch(route);
  }

  /**
   * Looks up `method` + a NORMALIZED `path` like {@link lookup}, and also the
   * spellings an upstream may treat as the same path: without a trailing `/`
   * (paths other than `/`), ASCII case-folded, fully folded (`foldPath` of
   * src/path.ts, against pattern literals folded the same way), and each of
   * them without the trailing `/`. If any of them is
   * authorized differently from the exact spelling (a different scope, public
   * vs protected, different amount/currency pointers, or matched vs not
   * matched), the result is `ambiguous`. Entries that differ only in the
   * pattern's index but authorize identically (for example `/files` and
   * `/files/*` with the same scope) are not ambiguous.
   */
  resolve(method: string, path: string): RouteResolution {
    const exact = this.#find(method, path, false);
    const slash = path.length > 1 && path.endsWith('/');
    const trimmed = slash ? path.slice(0, -1) : undefined;
    if (trimmed !== undefined && !sameAuthorization(exact, this.#find(method, trimmed, false))) {
      return { kind: 'ambiguous', spelling: 'trailing_slash' };
    }
    if (this.#upperLiterals || foldCase(path) !== path) {
      if (!sameAuthorization(exact, this.#find(method, path, true))) return { kind: 'ambiguous', spelling: 'case' };
      if (trimmed !== undefined && !sameAuthorization(exact, this.#find(method, trimmed, true))) return { kind: 'ambiguous', spelling: 'case' };
    }
    if (this.#looseLiterals || mayFoldBeyondCase(path)) {
      const parts = foldPath(path);
      if (!sameAuthorization(exact, this.#findParts(method, parts, 'loose'))) return { kind: 'ambiguous', spelling: 'fold' };
      if (parts.length > 1 && parts.at(-1) === '' && !sameAuthorization(exact, this.#findParts(method, parts.slice(0, -1), 'loose'))) {
        return { kind: 'ambiguous', spelling: 'fold' };
      }
    }
    return exact === undefined ? { kind: 'none' } : { kind: 'match', route: toMatch(exact) };
  }
}
