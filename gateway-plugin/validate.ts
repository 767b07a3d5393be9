/**
 * Small validation helpers shared by the plugin options (`options.ts`), the
 * route table (`routes.ts`) and the standalone config file (`config.ts`).
 *
 * Every helper throws a `TypeError` whose message starts with the path of the
 * offending value, for example `gateway options: routes[3].scope: ...`.
 * A path is a plain string: the root is a label ending in `:` (for example
 * `gateway options:`), members are appended with {@link at} and {@link item}.
 */

import { isValidScope } from '../src/scopes.js';

/** Throws the path-named `TypeError` for `path`. */
export function fail(path: string, message: string): never {
  throw new TypeError(path.endsWith(':') ? `${path} ${message}` : `${path}: ${message}`);
}

/** The path of member `key` under `path`. */
export function at(path: string, key: string): string {
  return path.endsWith(':') ? `${path} ${key}` : `${path}.${key}`;
}

/** The path of array element `index` under `path`. */
export function item(path: string, index: number): string {
  return `${path}[${index}]`;
}

/** True for a plain (non-null, non-array) object. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Checks that `value` is a plain object whose keys are all in `allowed`. */
export function checkObject(value: unknown, path: string, allowed: readonly string[]): Record<string, unknown> {
  if (!isPlainObject(value)) fail(path, 'must be an object');
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) fail(at(path, key), `unknown key (allowed: ${allowed.join(', ')})`);
  }
  return value;
}

/** Checks that `value` is a non-empty string without control characters. */
export function checkString(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.length === 0) fail(path, 'must be a non-empty string');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) fail(path, 'must not contain control characters');
  return value;
}

/** Checks that `value` is an integer in `[min, max]`; `undefined` gives `fallback`. */
export function checkInt(value: unknown, path: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(path, `must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** Checks that `value` is a boolean; `undefined` gives `fallback`. */
export function checkBoolean(value: unknown, path: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') fail(path, 'must be true or false');
  return value;
}

/**
 * Checks an `http:`/`https:` URL without credentials, query or fragment.
 * With `originOnly` the path must be empty or `/`.
 */
export function checkHttpUrl(value: unknown, path: string, originOnly: boolean): URL {
  const text = checkString(value, path);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    fail(path, 'must be an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail(path, 'must use http:// or https://');
  if (url.username !== '' || url.password !== '') fail(path, 'must not contain credentials');
  if (url.search !== '' || url.hash !== '' || text.includes('?') || text.includes('#')) {
    fail(path, 'must not contain a query or fragment');
  }
  if (originOnly && url.pathname !== '/') fail(path, 'must be an origin without a path (for example http://127.0.0.1:8080)');
  return url;
}

/** Checks a lowercase-able HTTP header name (RFC 9110 token). */
export function checkHeaderName(value: unknown, path: string): string {
  const text = checkString(value, path);
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(text)) fail(path, 'must be an HTTP header name');
  return text.toLowerCase();
}

/** Checks an absolute URL path such as `/healthz` (no query, no dot segments). */
export function checkPathname(value: unknown, path: string): string {
  const text = checkString(value, path);
  if (!/^\/[A-Za-z0-9._~!$&'()*+,=:@/-]*$/.test(text) || /\/\/|\/\.\.?(\/|$)/.test(text)) {
    fail(path, 'must be a plain absolute path such as /healthz');
  }
  return text;
}

/** Checks a JSON pointer (RFC 6901): empty or `/`-separated tokens with `~0`/`~1` escapes. */
export function checkJsonPointer(value: unknown, path: string): string {
  if (typeof value !== 'string') fail(path, 'must be a JSON pointer string such as /amount');
  if (value !== '' && (!value.startsWith('/') || /~(?![01])/.test(value))) {
    fail(path, 'must be a JSON pointer (RFC 6901) such as /amount or /payment/total');
  }
  return value;
}

/**
 * Validates a required scope against the vocabulary of src/scopes.ts (a
 * canonical scope or a well-formed `custom:` scope), so a typo such as
 * `data:raed` is a startup error naming its path instead of a stream of 403s.
 */
export function checkScope(value: unknown, path: string): string {
  const scope = checkString(value, path);
  const shown = JSON.stringify(scope.slice(0, 140));
  if (!isValidScope(scope)) {
    fail(path, `${shown} is not in the scope vocabulary (a canonical scope such as "data:read", or "custom:<name>"; see docs/scopes.md)`);
  }
  return scope;
}
