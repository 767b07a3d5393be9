/**
 * Constraint-context derivation: what the gateway tells verify about the
 * request it actually received (spec 4.15 step 3), never caller-claimed values.
 *
 * - `client_ip`: the socket peer; `X-Forwarded-For` is honoured only when the
 *   peer is a configured trusted proxy, and then the rightmost address that is
 *   not a trusted proxy is used (a malformed entry on the way drops client_ip).
 * - `tenant`: from a host rule (exact host map or a one-label host suffix) or
 *   from a header that is honoured only when the peer is a trusted proxy.
 * - `amount` / `currency`: JSON pointers into the strictly parsed JSON body.
 * - `body_sha256`: SHA-256 of the exact bytes forwarded to the upstream.
 * - `query_sha256`: SHA-256 of the query string forwarded byte for byte (the
 *   pipeline sends it when the request has a non-empty query).
 */

import { BlockList, isIP } from 'node:net';
import { ServiceError } from '../src/errors.js';
import { at, checkHeaderName, checkObject, checkString, fail, isPlainObject, item } from './validate.js';
import { JsonNumber, JsonSyntaxError, parseStrictJson, resolvePointer } from './json.js';
import type { JsonValue } from './json.js';

/** The decimal-string form verify accepts for `amount`. */
export const AMOUNT_PATTERN = /^(0|[1-9][0-9]{0,14})(\.[0-9]{1,6})?$/;
/** Accepted tenant values (others are dropped, so verify sees no tenant). */
export const TENANT_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** A set of trusted proxy addresses and CIDR ranges (IPv4 and IPv6). */
export class TrustedProxies {
  readonly #list = new BlockList();
  readonly #count: number;

  /** Validates a list such as `["10.0.0.0/8", "127.0.0.1", "::1"]`. */
  constructor(value: unknown, path: string) {
    if (value === undefined) value = [];
    if (!Array.isArray(value)) fail(path, 'must be a list of IP addresses or CIDR ranges');
    value.forEach((entry: unknown, i) => {
      const where = item(path, i);
      const text = checkString(entry, where);
      const [addr = '', bits, extra] = text.split('/');
      const family = isIP(addr);
      if (family === 0 || extra !== undefined) fail(where, 'must be an IP address or CIDR range');
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (bits === undefined) {
        this.#list.addAddress(addr, type);
      } else {
        const n = /^[0-9]{1,3}$/.test(bits) ? Number(bits) : -1;
        if (n < 0 || n > (family === 4 ? 32 : 128)) fail(where, 'has a bad prefix length');
        this.#list.addSubnet(addr, n, type);
      }
    });
    this.#count = value.length;
  }

  /** Number of configured entries. */
  get size(): number {
    return this.#count;
  }

  /** True when the (normalized) address is trusted. */
  has(address: string): boolean {
    if (this.#count === 0) return false; // the common case: no trusted proxies, no BlockList lookup per request
    const family = isIP(address);
    return family !== 0 && this.#list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

/** Normalizes a socket or header address (IPv4-mapped IPv6 becomes IPv4); `undefined` if not an IP. */
export function normalizeIp(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  const text = address.trim();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(text);
  const candidate = mapped?.[1] ?? text;
  return isIP(candidate) === 0 ? undefined : candidate.toLowerCase();
}

/** The client address and whether the socket peer is a trusted proxy. */
export function deriveClientIp(peer: string | undefined, xff: string | string[] | undefined, trusted: TrustedProxies): {
  clientIp: string | undefined; trustedPeer: boolean } {
  const peerIp = normalizeIp(peer);
  if (peerIp === undefined) return { clientIp: undefined, trustedPeer: false };
  if (!trusted.has(peerIp)) return { clientIp: peerIp, trustedPeer: false };
  const hops = (Array.isArray(xff) ? xff.join(',') : (xff ?? '')).split(',').map((s) => s.trim()).filter((s) => s !== '');
  let client = peerIp;
  for (let i = hops.length - 1; i >= 0; i -= 1) {
    const hop = normalizeIp(hops[i]);
    if (hop === undefined) return { clientIp: undefined, trustedPeer: true };
    client = hop;
    if (!trusted.has(hop)) break;
  }
  return { clientIp: client, trustedPeer: true };
}

/** A validated tenant rule. */
export type TenantRule =
  | { readonly kind: 'hosts'; readonly hosts: ReadonlyMap<string, string> }
  | { readonly kind: 'suffix'; readonly suffix: string }
  | { readonly kind: 'header'; readonly header: string };

/** Validates `{hosts: {...}}`, `{suffix: '.example.com'}` or `{header: 'x-tenant-id'}` (exactly one). */
export function validateTenantRule(value: unknown, path: string, hasTrustedProxies: boolean): TenantRule {
  const rule = checkObject(value, path, ['hosts', 'suffix', 'header']);
  const keys = Object.keys(rule);
  if (keys.length !== 1) fail(path, 'must have exactly one of hosts, suffix, header');
  if (rule.hosts !== undefined) {
    if (!isPlainObject(rule.hosts) || Object.keys(rule.hosts).length === 0) fail(at(path, 'hosts'), 'must map host names to tenants');
    const hosts = new Map<string, string>();
    for (const [host, tenant] of Object.entries(rule.hosts)) {
      if (!/^[a-z0-9.-]+$/.test(host)) fail(at(at(path, 'hosts'), host), 'host must be lowercase without a port');
      if (typeof tenant !== 'string' || !TENANT_PATTERN.test(tenant)) fail(at(at(path, 'hosts'), host), 'must be a tenant id');
      hosts.set(host, tenant);
    }
    return { kind: 'hosts', hosts };
  }
  if (rule.suffix !== undefined) {
    const suffix = checkString(rule.suffix, at(path, 'suffix'));
    if (!/^\.[a-z0-9.-]+$/.test(suffix)) fail(at(path, 'suffix'), 'must be a lowercase host suffix starting with "."');
    return { kind: 'suffix', suffix };
  }
  const header = checkHeaderName(rule.header, at(path, 'header'));
  if (!hasTrustedProxies) fail(at(path, 'header'), 'needs trusted proxies (the header is honoured only from them)');
  if (header.startsWith('x-service-') || header === 'host') fail(at(path, 'header'), 'must not be a gateway-controlled header');
  return { kind: 'header', header };
}

/** Derives the tenant, or `undefined`. */
export function deriveTenant(rule: TenantRule | undefined, host: string | undefined,
  headers: Record<string, string | string[] | undefined>, trustedPeer: boolean): string | undefined {
  if (rule === undefined) return undefined;
  let tenant: string | undefined;
  if (rule.kind === 'header') {
    const value = headers[rule.header];
    tenant = trustedPeer && typeof value === 'string' ? value.trim() : undefined;
  } else {
    const name = (host ?? '').toLowerCase().replace(/:[0-9]+$/, '');
    if (rule.kind === 'hosts') tenant = rule.hosts.get(name);
    else if (name.endsWith(rule.suffix)) {
      const label = name.slice(0, -rule.suffix.length);
      tenant = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(label) ? label : undefined;
    }
  }
  return tenant !== undefined && TENANT_PATTERN.test(tenant) ? tenant : undefined;
}

/** Exact decimal form of a JSON number lexeme, or `undefined` if negative or not representable. */
export function amountFromNumber(text: string): string | undefined {
  if (AMOUNT_PATTERN.test(text)) return text;
  const m = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/.exec(text);
  if (m === null) return undefined;
  const frac = m[3] ?? '';
  let digits = ((m[2] ?? '') + frac).replace(/^0+/, '');
  if (digits === '') return '0';
  if (m[1] === '-') return undefined;
  const expText = m[4] ?? '0';
  if (expText.replace(/^[+-]?0*/, '').length > 4) return undefined;
  let exp = Number(expText) - frac.length;
  const trimmed = digits.replace(/0+$/, '');
  exp += digits.length - trimmed.length;
  digits = trimmed;
  if (exp < -6 || digits.length + exp > 15) return undefined;
  let result: string;
  if (exp >= 0) result = digits + '0'.repeat(exp);
  else if (digits.length > -exp) result = `${digits.slice(0, exp)}.${digits.slice(exp)}`;
  else result = `0.${'0'.repeat(-exp - digits.length)}${digits}`;
  return AMOUNT_PATTERN.test(result) ? result : undefined;
}

/** True for `application/json` and `application/<x>+json` (parameters ignored). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(type);
}

/**
 * The amount at `pointer` in a strictly parsed document: a JSON number
 * converted exactly, or a decimal string. `undefined` when the pointer
 * resolves to nothing; 400 `invalid_request` for a value of another shape.
 * `where` names the value in the message (default: the pointer).
 */
export function amountAt(doc: JsonValue, pointer: string, where: string = pointer): string | undefined {
  const v = resolvePointer(doc, pointer);
  if (v === undefined) return undefined;
  const amount = v instanceof JsonNumber ? amountFromNumber(v.text) : typeof v === 'string' && AMOUNT_PATTERN.test(v) ? v : undefined;
  if (amount === undefined) throw new ServiceError('invalid_request', `The amount at ${where} is not a non-negative decimal number.`);
  return amount;
}

/** The currency at `pointer` (3 letters, uppercased), like {@link amountAt}. */
export function currencyAt(doc: JsonValue, pointer: string, where: string = pointer): string | undefined {
  const v = resolvePointer(doc, pointer);
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^[A-Za-z]{3}$/.test(v)) throw new ServiceError('invalid_request', `The currency at ${where} is not a 3-letter code.`);
  return v.toUpperCase();
}

/**
 * Reads amount and currency out of the body with the route's pointers.
 * Throws 400 `invalid_request` for a JSON body that is not strict JSON or a
 * value of the wrong shape. A pointer that resolves to nothing gives nothing.
 */
export function deriveAmountCurrency(body: Buffer, contentType: string | undefined, amountPointer: string | undefined,
  currencyPointer: string | undefined): { amount?: string; currency?: string } {
  if ((amountPointer === undefined && currencyPointer === undefined) || body.length === 0) return {};
  let doc: JsonValue;
  try {
    doc = parseStrictJson(body);
  } catch (err) {
    if (!(err instanceof JsonSyntaxError) || isJsonMediaType(contentType)) {
      throw new ServiceError('invalid_request', 'The JSON request body is not strict JSON (syntax error or duplicate keys).');
    }
    return {};
  }
  const out: { amount?: string; currency?: string } = {};
  const amount = amountPointer === undefined ? undefined : amountAt(doc, amountPointer);
  if (amount !== undefined) out.amount = amount;
  const currency = currencyPointer === undefined ? undefined : currencyAt(doc, currencyPointer);
  if (currency !== undefined) out.currency = currency;
  return out;
}
