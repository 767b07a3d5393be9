/**
 * The scope vocabulary: the one place that says which scope strings exist.
 *
 * A scope is either canonical (`<area>:<action>` from {@link CANONICAL_SCOPES})
 * or custom (`custom:<name>[:<name>...]`, see {@link CUSTOM_SCOPE_RULES}).
 * There are no wildcards: `*`, `data:*` and the like are invalid, so nothing
 * is ever granted implicitly. docs/scopes.md documents the same list.
 */

/**
 * Canonical scopes, with a flag for sensitive ones (money movement, deletion, code execution, admin).
 *
 * ```ts
 * Object.keys(CANONICAL_SCOPES);              // ['data:read', 'data:write', ...]
 * CANONICAL_SCOPES['payments:send'].sensitive; // true
 * ```
 */
export const CANONICAL_SCOPES = {
  'data:read': { sensitive: false, description: 'Read application data.' },
  'data:write': { sensitive: false, description: 'Create or change application data.' },
  'data:delete': { sensitive: true, description: 'Delete application data.' },
  'payments:read': { sensitive: false, description: 'Read payment state.' },
  'payments:send': { sensitive: true, description: 'Send a payment.' },
  'payments:refund': { sensitive: true, description: 'Refund a payment.' },
  'execute:tool': { sensitive: false, description: 'Invoke a tool or function.' },
  'execute:code': { sensitive: true, description: 'Run code supplied by the agent.' },
  'messages:read': { sensitive: false, description: 'Read messages.' },
  'messages:send': { sensitive: false, description: 'Send messages on the holder\'s behalf.' },
  'files:read': { sensitive: false, description: 'Read files.' },
  'files:write': { sensitive: false, description: 'Create or change files.' },
  'calendar:read': { sensitive: false, description: 'Read calendar entries.' },
  'calendar:write': { sensitive: false, description: 'Create or change calendar entries.' },
  'identity:read': { sensitive: false, description: 'Read the holder\'s profile.' },
  'admin:manage': { sensitive: true, description: 'Administrative operations.' },
} as const satisfies Record<string, { sensitive: boolean; description: string }>;

/**
 * A canonical scope string.
 *
 * ```ts
 * const scope: CanonicalScope = 'data:read';
 * ```
 */
export type CanonicalScope = keyof typeof CANONICAL_SCOPES;

/**
 * The rules for custom scopes.
 *
 * ```ts
 * CUSTOM_SCOPE_RULES.segment.test('invoices');   // true: custom:invoices:export is well-formed
 * ```
 */
export const CUSTOM_SCOPE_RULES = {
  prefix: 'custom:',
  /** Each `<name>` segment: lowercase letter or digit first, then letters, digits, `_`, `-`, `.`. */
  segment: /^[a-z0-9][a-z0-9_.-]{0,62}$/,
  maxSegments: 8,
  maxLength: 128,
} as const;

/**
 * Maximum number of scopes in one list (platform ceiling, approval).
 *
 * ```ts
 * if (scopes.length > MAX_SCOPES_PER_LIST) throw new Error('too many scopes');
 * ```
 */
export const MAX_SCOPES_PER_LIST = 64;

/**
 * True when `s` is a canonical scope.
 *
 * ```ts
 * isCanonicalScope('data:read');          // true
 * isCanonicalScope('custom:invoices');    // false (custom)
 * ```
 */
export function isCanonicalScope(s: string): s is CanonicalScope {
  return Object.prototype.hasOwnProperty.call(CANONICAL_SCOPES, s);
}

/**
 * True when `s` is a well-formed custom scope.
 *
 * ```ts
 * isCustomScope('custom:invoices:export');   // true
 * isCustomScope('custom:Invoices');          // false (uppercase)
 * ```
 */
export function isCustomScope(s: string): boolean {
  if (s.length > CUSTOM_SCOPE_RULES.maxLength || !s.startsWith(CUSTOM_SCOPE_RULES.prefix)) return false;
  const segs = s.slice(CUSTOM_SCOPE_RULES.prefix.length).split(':');
  return segs.length >= 1 && segs.length <= CUSTOM_SCOPE_RULES.maxSegments && segs.every((x) => CUSTOM_SCOPE_RULES.segment.test(x));
}

/**
 * True when `s` is a scope of the vocabulary (there are no wildcards).
 *
 * ```ts
 * isValidScope('data:read');   // true
 * isValidScope('data:raed');   // false
 * isValidScope('data:*');      // false
 * ```
 */
export function isValidScope(s: unknown): s is string {
  return typeof s === 'string' && (isCanonicalScope(s) || isCustomScope(s));
}

/**
 * True when a scope is marked sensitive (custom scopes are not).
 *
 * ```ts
 * isSensitiveScope('payments:send');   // true
 * isSensitiveScope('data:read');       // false
 * ```
 */
export function isSensitiveScope(s: string): boolean {
  return isCanonicalScope(s) && CANONICAL_SCOPES[s].sensitive;
}

/** How an untrusted non-string value is named in an error: by its type, never serialized (it may be deeply nested). */
export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return '(array)';
  if (typeof v === 'object') return '(object)';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return `(${typeof v})`;
}

/** The entries of `list` that are not scopes of the vocabulary (strings cut to 140 characters, other values by type). */
export function invalidScopes(list: readonly unknown[]): string[] {
  return list.filter((s) => !isValidScope(s)).map((s) => (typeof s === 'string' ? s.slice(0, 140) : describeValue(s)));
}
