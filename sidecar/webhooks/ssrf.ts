/**
 * SSRF protection for webhook delivery.
 *
 * Two layers:
 * 1. {@link validateCallbackUrl} (synchronous; at registration and before
 *    every attempt): WHATWG URL parse (which canonicalizes odd IPv4 spellings
 *    such as `2130706433`, `0x7f.1`, `017700000001`, `127.1` to `127.0.0.1`),
 *    `https` only, no userinfo, no fragment, length ≤ 2048, and a literal IP
 *    host (or `localhost`) must be a public address.
 * 2. {@link createSafeDispatcher}: an undici `Agent` whose connector checks the
 *    address at connect time — a literal IP host before connecting, every
 *    address a host name resolves to inside the socket's `lookup` (so the
 *    connection goes to the address that was checked: DNS rebinding cannot
 *    swap it afterwards), and the socket's remote address once connected.
 *
 * Refused: everything that is not public unicast — see `blockedAddressReason` (src/callback-url.ts, the
 * pure rules, re-exported here).
 * `allowInsecure` (`SIDECAR_WEBHOOK_ALLOW_INSECURE=1`) lifts the https and
 * address rules; for development and tests only.
 */
import { isIP } from 'node:net';
import {
  blockedAddressReason, isLocalhostName, stripBrackets,
} from '../../src/callback-url.js';
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupAddress, LookupOneOptions, LookupAllOptions } from 'node:dns';
import type { Socket } from 'node:net';
import { Agent, buildConnector } from 'undici';

export {
  MAX_CALLBACK_URL_LENGTH, blockedAddressReason, isPublicAddress, validateCallbackUrl,
} from '../../src/callback-url.js';
export type { UrlCheck } from '../../src/callback-url.js';

/** Resolves a host name to addresses (injectable for tests; default `dns.lookup` with `all: true`). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

/** A connection refused by the SSRF rules. */
export class SsrfBlockedError extends Error {
  readonly code = 'SSRF_BLOCKED';
  constructor(message: string) {
    super(message);
    this.name = 'SsrfBlockedError';
  }
}

// ---------------------------------------------------------------------------
// Connect-time enforcement

/** Options of {@link createSafeDispatcher}. */
export interface SafeDispatcherOptions {
  /** Lift the https and address rules (development and tests only). */
  allowInsecure: boolean;
  /** TCP + TLS connect timeout in milliseconds. */
  connectTimeoutMs?: number;
  /** DNS resolver (tests simulate rebinding with it); default `dns.lookup(all)`. */
  resolve?: Resolver;
  /** Keep-alive time of idle connections in milliseconds (default 4000). */
  keepAliveTimeoutMs?: number;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

const defaultResolve: Resolver = (hostname) => dnsLookup(hostname, { all: true });

/**
 * A `net.connect` `lookup` function: resolves with `resolve`, refuses the
 * host unless every resolved address is public, and hands only checked
 * addresses to the socket (which connects to one of them: the address is
 * pinned for the connection).
 */
export function createSafeLookup(resolve: Resolver, allowInsecure: boolean) {
  return (hostname: string, options: LookupOneOptions | LookupAllOptions | number, callback: LookupCallback): void => {
    const opts = typeof options === 'number' ? { family: options } : options;
    if (!allowInsecure && isLocalhostName(hostname)) {
      callback(new SsrfBlockedError(`refused ${hostname}: localhost`), '');
      return;
    }
    resolve(hostname).then((found) => {
      let addrs = found;
      if (!allowInsecure) {
        for (const a of addrs) {
          const why = blockedAddressReason(a.address);
          if (why !== null) throw new SsrfBlockedError(`refused ${hostname}: resolves to ${a.address} (${why})`);
        }
      }
      const fam = opts.family === 'IPv4' ? 4 : opts.family === 'IPv6' ? 6 : opts.family;
      if (fam === 4 || fam === 6) addrs = addrs.filter((a) => a.family === fam);
      if (addrs.length === 0) {
        const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        err.code = 'ENOTFOUND';
        throw err;
      }
      if (opts.all) callback(null, addrs);
      else callback(null, addrs[0]!.address, addrs[0]!.family);
    }).catch((err: NodeJS.ErrnoException) => callback(err, ''));
  };
}

/**
 * An undici `Agent` that connects only to public addresses over https
 * (unless `allowInsecure`): literal IP hosts are checked before connecting,
 * host names inside the socket's lookup (every resolved address), and the
 * remote address of the established socket once more.
 */
export function createSafeDispatcher(opts: SafeDispatcherOptions): Agent {
  const { allowInsecure } = opts;
  const connector = buildConnector({
    timeout: opts.connectTimeoutMs ?? 10_000,
    lookup: createSafeLookup(opts.resolve ?? defaultResolve, allowInsecure) as never,
  });
  const connect: buildConnector.connector = (options, callback) => {
    if (!allowInsecure) {
      if (options.protocol !== 'https:') {
        callback(new SsrfBlockedError(`refused ${options.protocol}//${options.hostname}: only https is allowed`), null);
        return;
      }
      const host = stripBrackets(options.hostname);
      if (isIP(host) !== 0) {
        const why = blockedAddressReason(host);
        if (why !== null) {
          callback(new SsrfBlockedError(`refused ${host} (${why})`), null);
          return;
        }
      }
    }
    connector(options, (...args) => {
      const [err, socket] = args;
      if (err === null && !allowInsecure) {
        const remote = (socket as Socket).remoteAddress;
        const why = remote === undefined ? 'no remote address' : blockedAddressReason(remote);
        if (why !== null) {
          socket.destroy();
          callback(new SsrfBlockedError(`refused connection to ${remote ?? '?'} (${why})`), null);
          return;
        }
      }
      callback(...args);
    });
  };
  return new Agent({ connect, keepAliveTimeout: opts.keepAliveTimeoutMs ?? 4_000 });
}
