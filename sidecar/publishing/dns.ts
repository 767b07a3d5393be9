/**
 * The publisher-domain lookup (issue 32): asks the configured DNS servers for
 * the TXT records at `_agent-authz.<domain>` and says whether they prove the
 * organisation's token. The rules (names, record text, matching) are the pure
 * core's, `src/publisher-domain.ts`; this file only asks.
 *
 * A lookup's outcome is one of four, because a re-check must tell "the record
 * is gone" (the claim lapses) from "we could not ask" (it must not):
 * `verified`, `mismatch` (TXT records exist at the name, none proves the
 * token), `absent` (the name has no TXT record: NXDOMAIN or no data), and
 * `unreachable` (timeout, refusal, server failure): try again later.
 */
import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import { domainRecordName, recordsProve } from '../../src/publisher-domain.js';

/** What one lookup found. */
export type DomainCheckOutcome = 'verified' | 'mismatch' | 'absent' | 'unreachable';

/** The result of {@link checkDomain}. */
export interface DomainCheck {
  /** What the lookup found. */
  outcome: DomainCheckOutcome;
  /** The name asked for. */
  name: string;
  /** The resolver's error code for `absent` and `unreachable` (`ENOTFOUND`, `ETIMEOUT`, …). */
  errorCode?: string;
}

/** How to ask. */
export interface DomainResolverOptions {
  /** DNS servers as `ip` or `ip:port` (`[ipv6]:port`); empty: the system's. */
  servers: readonly string[];
  /** Per-try timeout, ms. */
  timeoutMs: number;
  /** Tries per server. */
  tries: number;
}

const ABSENT = new Set(['ENOTFOUND', 'ENODATA']);

/** Whether `server` is an `ip`, `ip:port` or `[ipv6]:port` that a resolver accepts. */
export function isDnsServer(server: string): boolean {
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(server);
  if (bracketed !== null) return net.isIPv6(bracketed[1] as string) && portOk(bracketed[2]);
  if (net.isIP(server) !== 0) return true;
  const hostPort = /^([^:]+):(\d{1,5})$/.exec(server);
  return hostPort !== null && net.isIPv4(hostPort[1] as string) && portOk(hostPort[2]);
}

function portOk(port: string | undefined): boolean {
  return port === undefined || (Number(port) >= 1 && Number(port) <= 65535);
}

/** A resolver for {@link checkDomain}, asking `options.servers`. */
export function domainResolver(options: DomainResolverOptions): Resolver {
  for (const s of options.servers) {
    if (!isDnsServer(s)) throw new TypeError(`domainResolver: not a DNS server address: ${JSON.stringify(s)}`);
  }
  const resolver = new Resolver({ timeout: options.timeoutMs, tries: options.tries });
  if (options.servers.length > 0) resolver.setServers([...options.servers]);
  return resolver;
}

/** Looks up the TXT records that would prove `token` for `domain` (a canonical domain). */
export async function checkDomain(resolver: Resolver, domain: string, token: string): Promise<DomainCheck> {
  const name = domainRecordName(domain);
  try {
    const records = await resolver.resolveTxt(name);
    return { outcome: recordsProve(records, token) ? 'verified' : 'mismatch', name };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const errorCode = typeof code === 'string' ? code : 'EUNKNOWN';
    return { outcome: ABSENT.has(errorCode) ? 'absent' : 'unreachable', name, errorCode };
  }
}
