/**
 * The pure rules for callback URLs the service will call: webhook callbacks
 * (sidecar/webhooks) and A2A push-notification URLs the gateway lets through
 * (gateway-plugin/a2a). No I/O: the connect-time check (DNS, the socket's
 * address) stays in sidecar/webhooks/ssrf.ts.
 *
 * {@link validateCallbackUrl}: WHATWG URL parse (which canonicalizes odd IPv4
 * spellings such as `2130706433`, `0x7f.1`, `017700000001`, `127.1` to
 * `127.0.0.1`), `https` only, no userinfo, no fragment, length at most 2048,
 * and a literal IP host (or `localhost`) must be a public address
 * ({@link blockedAddressReason}: everything that is not public unicast).
 */
import { isIP } from 'node:net';

/** Longest callback URL accepted. */
export const MAX_CALLBACK_URL_LENGTH = 2048;

// ---------------------------------------------------------------------------
// Address parsing and ranges

/** Parses a canonical dotted-quad IPv4 address to a 32-bit number. */
function parseIPv4(s: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return null;
  let n = 0;
  for (let i = 1; i <= 4; i++) {
    const part = Number(m[i]);
    if (part > 255) return null;
    n = n * 256 + part;
  }
  return n;
}

/** Parses an IPv6 address (no zone id) to a 128-bit bigint. */
function parseIPv6(s: string): bigint | null {
  if (s.includes('%') || isIP(s) !== 6) return null;
  let str = s.toLowerCase();
  if (str.includes('.')) {
    const cut = str.lastIndexOf(':');
    const v4 = parseIPv4(str.slice(cut + 1));
    if (v4 === null) return null;
    str = `${str.slice(0, cut + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  let groups: string[];
  const halves = str.split('::');
  if (halves.length === 2) {
    const head = halves[0] ? halves[0].split(':') : [];
    const tail = halves[1] ? halves[1].split(':') : [];
    groups = [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail];
  } else {
    groups = str.split(':');
  }
  if (groups.length !== 8) return null;
  let n = 0n;
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/.test(g)) return null;
    n = (n << 16n) | BigInt(parseInt(g, 16));
  }
  return n;
}

type V4Rule = readonly [base: string, prefix: number, name: string];

/** IPv4 ranges that are not public unicast (IANA special-purpose registry). */
const V4_BLOCKED: readonly V4Rule[] = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4 relay anycast'],
  ['192.168.0.0', 16, 'private (RFC 1918)'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

const V4_RANGES = V4_BLOCKED.map(([base, prefix, name]) => {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { net: (parseIPv4(base)! & mask) >>> 0, mask, name };
});

function v4Reason(n: number): string | null {
  for (const r of V4_RANGES) if (((n & r.mask) >>> 0) === r.net) return r.name;
  return null;
}

type V6Rule = readonly [base: string, prefix: number, name: string];

/** IPv6 ranges inside 2000::/3 (global unicast) that are still not public. */
const V6_BLOCKED_IN_GLOBAL: readonly V6Rule[] = [
  ['2001::', 23, 'IETF protocol assignments (incl. Teredo)'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
];

const mask6 = (prefix: number): bigint => (
  prefix === 0 ? 0n : ((1n << 128n) - 1n) ^ ((1n << BigInt(128 - prefix)) - 1n)
);
const inNet6 = (n: bigint, base: string, prefix: number): boolean => (
  (n & mask6(prefix)) === (parseIPv6(base)! & mask6(prefix))
);

function v6Reason(n: bigint): string | null {
  if (n === 0n) return 'unspecified (::)';
  if (n === 1n) return 'loopback (::1)';
  // Forms that embed an IPv4 address: judge by the embedded address.
  if (inNet6(n, '::ffff:0:0', 96)) return embedded(Number(n & 0xffffffffn), 'IPv4-mapped');
  if (inNet6(n, '64:ff9b::', 96)) return embedded(Number(n & 0xffffffffn), 'NAT64');
  if (inNet6(n, '2002::', 16)) return embedded(Number((n >> 80n) & 0xffffffffn), '6to4');
  if (inNet6(n, '::', 96)) return 'IPv4-compatible (deprecated)';
  if (inNet6(n, 'fc00::', 7)) return 'unique local';
  if (inNet6(n, 'fe80::', 10)) return 'link-local';
  if (inNet6(n, 'fec0::', 10)) return 'site-local (deprecated)';
  if (inNet6(n, 'ff00::', 8)) return 'multicast';
  // Only 2000::/3 is allocated for global unicast; everything else is reserved.
  if (!inNet6(n, '2000::', 3)) return 'reserved';
  for (const [base, prefix, name] of V6_BLOCKED_IN_GLOBAL) if (inNet6(n, base, prefix)) return name;
  return null;
}

function embedded(v4: number, form: string): string | null {
  const r = v4Reason(v4 >>> 0);
  return r === null ? null : `${form} ${r}`;
}

/**
 * Why `address` (an IP literal, IPv6 with or without brackets) may not be
 * contacted, or null when it is public unicast. Anything unparsable is refused.
 */
export function blockedAddressReason(address: string): string | null {
  let a = address;
  if (a.startsWith('[') && a.endsWith(']')) a = a.slice(1, -1);
  if (a.includes('%')) return 'scoped IPv6 address';
  const v4 = parseIPv4(a);
  if (v4 !== null) return v4Reason(v4);
  const v6 = parseIPv6(a);
  if (v6 !== null) return v6Reason(v6);
  return 'not an IP address';
}

/** True when `address` is public unicast. */
export function isPublicAddress(address: string): boolean {
  return blockedAddressReason(address) === null;
}

/** `localhost` and `*.localhost` (RFC 6761) always mean this machine. */
export function isLocalhostName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

/** `h` without the brackets of an IPv6 literal host (`[::1]` → `::1`). */
export const stripBrackets = (h: string): string => (h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h);

// ---------------------------------------------------------------------------
// URL validation

/** Result of {@link validateCallbackUrl}. */
export type UrlCheck = { ok: true } | { ok: false; reason: string };

/**
 * Registration-time (and pre-attempt) check of a callback URL. Synchronous;
 * does not resolve DNS (the connect-time check does). Rules: length ≤ 2048;
 * WHATWG-parsable; `https:` (or `http:` with `allowInsecure`); no userinfo; no
 * fragment; a host; a literal IP host or `localhost` is refused unless public
 * (or `allowInsecure`).
 */
export function validateCallbackUrl(url: string, allowInsecure: boolean): UrlCheck {
  if (typeof url !== 'string' || url.length === 0) return { ok: false, reason: 'the URL is empty' };
  if (url.length > MAX_CALLBACK_URL_LENGTH) {
    return { ok: false, reason: `the URL is longer than ${MAX_CALLBACK_URL_LENGTH} characters` };
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { ok: false, reason: 'the URL does not parse' };
  }
  const schemes = allowInsecure ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(u.protocol)) {
    return { ok: false, reason: allowInsecure ? 'the URL must be http or https' : 'the URL must use https' };
  }
  if (u.username !== '' || u.password !== '') return { ok: false, reason: 'the URL must not contain credentials' };
  if (url.includes('#')) return { ok: false, reason: 'the URL must not contain a fragment' };
  if (u.hostname === '') return { ok: false, reason: 'the URL has no host' };
  if (allowInsecure) return { ok: true };
  const host = stripBrackets(u.hostname);
  if (isLocalhostName(host)) return { ok: false, reason: 'the host is localhost' };
  if (isIP(host) !== 0 || /^[0-9.]+$/.test(host)) {
    const why = blockedAddressReason(host);
    if (why !== null) return { ok: false, reason: `the host is a non-public address (${why})` };
  }
  return { ok: true };
}
