/**
 * `SIDECAR_PUBLIC_URL`: the sidecar's base URL as its clients reach it (a
 * reverse proxy, a path prefix), used where the sidecar names its own URLs:
 * the AuthZEN metadata document (docs/authzen.md). An http(s) URL with no
 * query, fragment or credentials; a trailing slash is dropped. Unset (null):
 * the URL the request was sent to.
 */
import { ConfigError } from './env.js';

/** The validated public base URL, or null when unset. */
export function publicUrl(raw: string | undefined): string | null {
  if (raw === undefined || raw === '') return null;
  const name = 'SIDECAR_PUBLIC_URL';
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`${name}: not a URL (expected https://host[:port][/prefix])`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') {
    throw new ConfigError(`${name}: scheme must be https: or http:, got ${u.protocol}`);
  }
  if (u.username !== '' || u.password !== '' || raw.includes('?') || raw.includes('#')) {
    throw new ConfigError(`${name}: no query, fragment or credentials`);
  }
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
}
