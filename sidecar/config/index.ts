/**
 * Sidecar configuration: the `SIDECAR_*` environment variables (a public
 * contract, documented in the README), parsed and validated once at startup.
 *
 * A bad value stops startup with one line naming the variable. Unknown
 * `SIDECAR_*` variables are rejected too, so a typo never silently falls
 * back to a default.
 */
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { AUDIT_ENV_VARS, parseAuditConfig } from '../audit/config.js';
import type { AuditConfig } from '../audit/config.js';
import { MAX_DELEGATION_DEPTH } from '../../src/certificate.js';
import { ConfigError, flag, int } from './env.js';
import { DATABASE_DEFAULTS, databaseConfig } from './database.js';
import { publicUrl } from './public-url.js';
import type { DatabaseConfig } from './database.js';
import { isDnsServer } from '../publishing/dns.js';

export { ConfigError } from './env.js';
export { databaseConfig } from './database.js';
export type { DatabaseConfig } from './database.js';

/**
 * The validated configuration `buildServer` takes (from {@link loadConfig}).
 *
 * ```ts
 * const config: SidecarConfig = loadConfig({ SIDECAR_PORT: '8700', SIDECAR_DATA_DIR: '/var/lib/agent-authz' });
 * ```
 */
export interface SidecarConfig {
  host: string;
  port: number;
  dataDir: string;
  /** SMTP URL; null selects the development log mailer. */
  smtpUrl: string | null;
  mailFrom: string;
  /** 32-byte master key; null means "use or create `<dataDir>/master.key`". */
  masterKey: Uint8Array | null;
  production: boolean;
  /** Omit the `Secure` cookie flag (plain-HTTP development on loopback only). */
  insecureCookies: boolean;
  webhookAllowInsecure: boolean;
  alphaCreditsMicros: number;
  challengeTtlSeconds: number;
  proofFreshnessSeconds: number;
  apiKeyGraceSeconds: number;
  sendCodePerMinute: number;
  /** Login codes sent per minute over all e-mail addresses (`SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE`); more are refused. */
  sendCodeGlobalPerMinute: number;
  logLevel: string;
  bodyLimitBytes: number;
  trustProxy: string[];
  /** DNS servers for publisher-domain checks (`SIDECAR_DNS_SERVERS`, `ip` or `ip:port`); empty: the system's. */
  dnsServers: string[];
  /** Hours between re-checks of a verified publisher domain (`SIDECAR_DOMAIN_RECHECK_HOURS`, 1–720). */
  domainRecheckHours: number;
  /** The base URL clients reach the sidecar at (`SIDECAR_PUBLIC_URL`); null = the request's own. */
  publicUrl: string | null;
  auditRetentionDays: number;
  challengeRetentionHours: number;
  /** How long a recorded idempotent answer is replayed (docs/gateway.md#idempotency), hours. */
  idempotencyRetentionHours: number;
  shutdownTimeoutMs: number;
  /** Worker threads for hybrid signing (present) and proof-signature checks (verify); 0 = on the main thread. */
  cryptoWorkers: number;
  /** A separate listener for `GET /metrics` (then not served on the main port); null = the main port. */
  metricsListen: { host: string; port: number } | null;
  /** Lifetime of a pending approval, and of a granted one from its grant (seconds). */
  approvalTtlSeconds: number;
  /** Every proof must be operation-bound (deny `operation_unbound` otherwise), whatever its certificate says. */
  requireBoundOperation: boolean;
  /**
   * The deepest sub-delegation chain (docs/certificates.md, "Sub-delegation"): a certificate at a
   * greater depth is neither issued nor honoured (`SIDECAR_MAX_DELEGATION_DEPTH`, 1..8, default 8).
   */
  maxDelegationDepth: number;
  /** Serve the account holder's console at `/console/` (`SIDECAR_CONSOLE`, default on; off for verify-only sidecars). */
  consoleEnabled: boolean;
  /** The audit chain, checkpoints, decision log and exports (`SIDECAR_AUDIT_*`, audit/config.ts). */
  audit: AuditConfig;
  /** The shared PostgreSQL database (`SIDECAR_DATABASE_*`); null = SQLite in the data directory. */
  database: DatabaseConfig | null;
  /**
   * SQLite's `synchronous` level (`SIDECAR_SQLITE_SYNCHRONOUS`): `full` syncs the WAL before a commit
   * is acknowledged (nothing answered is lost on power loss), `normal` syncs at checkpoints (a power
   * loss may roll back the last commits). docs/storage.md, "Durability".
   */
  sqliteSynchronous: SqliteSynchronous;
}

/** Values of `SIDECAR_SQLITE_SYNCHRONOUS`. */
export type SqliteSynchronous = 'normal' | 'full';

/** Defaults, as named constants. */
export const DEFAULTS = {
  host: '127.0.0.1',
  port: 8700,
  dataDir: './data',
  mailFrom: 'agent-authz <no-reply@localhost>',
  alphaCreditsDollars: 10,
  challengeTtlSeconds: 300,
  proofFreshnessSeconds: 120,
  apiKeyGraceSeconds: 0,
  sendCodePerMinute: 5,
  sendCodeGlobalPerMinute: 600,
  logLevel: 'info',
  bodyLimitBytes: 64 * 1024,
  auditRetentionDays: 0,
  challengeRetentionHours: 24,
  idempotencyRetentionHours: 24,
  shutdownTimeoutMs: 10_000,
  approvalTtlSeconds: 600,
  maxDelegationDepth: MAX_DELEGATION_DEPTH,
  sqliteSynchronous: 'full',
  ...DATABASE_DEFAULTS,
} as const;

/**
 * Default of `SIDECAR_CRYPTO_WORKERS`: one worker per core, at most two. Chosen for a sidecar
 * that has its cores to itself (its own container or host), where two workers verified about a
 * third more per second than none and were needed for the present target; where it shares two
 * cores with a busy gateway, 0 did better (docs/proofs.md, "The crypto worker pool").
 */
export function defaultCryptoWorkers(): number {
  return Math.min(2, os.availableParallelism());
}

/** Most crypto worker threads `SIDECAR_CRYPTO_WORKERS` accepts. */
export const MAX_CRYPTO_WORKERS = 16;

/** Every environment variable the sidecar reads. */
export const ENV_VARS = [
  'SIDECAR_HOST', 'SIDECAR_PORT', 'SIDECAR_DATA_DIR', 'SIDECAR_SMTP_URL', 'SIDECAR_MAIL_FROM',
  'SIDECAR_MASTER_KEY', 'SIDECAR_INSECURE_COOKIES', 'SIDECAR_WEBHOOK_ALLOW_INSECURE', 'SIDECAR_ALPHA_CREDITS',
  'SIDECAR_CHALLENGE_TTL_SECONDS', 'SIDECAR_PROOF_FRESHNESS_SECONDS', 'SIDECAR_API_KEY_GRACE_SECONDS',
  'SIDECAR_SEND_CODE_PER_MINUTE', 'SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE', 'SIDECAR_LOG_LEVEL', 'SIDECAR_BODY_LIMIT_BYTES', 'SIDECAR_TRUST_PROXY',
  'SIDECAR_AUDIT_RETENTION_DAYS', 'SIDECAR_CHALLENGE_RETENTION_HOURS', 'SIDECAR_IDEMPOTENCY_RETENTION_HOURS',
  'SIDECAR_SHUTDOWN_TIMEOUT_MS',
  'SIDECAR_CRYPTO_WORKERS', 'SIDECAR_METRICS_LISTEN', 'SIDECAR_CONSOLE', 'SIDECAR_APPROVAL_TTL_SECONDS',
  'SIDECAR_REQUIRE_BOUND_OPERATION', 'SIDECAR_MAX_DELEGATION_DEPTH', 'SIDECAR_SQLITE_SYNCHRONOUS', 'SIDECAR_PUBLIC_URL',
  'SIDECAR_DNS_SERVERS', 'SIDECAR_DOMAIN_RECHECK_HOURS',
  'SIDECAR_DATABASE_URL', 'SIDECAR_DATABASE_POOL_MAX', 'SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS', 'SIDECAR_DATABASE_CONNECT_TIMEOUT_MS',
  ...AUDIT_ENV_VARS,
] as const;

/**
 * Variables of earlier versions that no longer exist, with what to do instead: still refused
 * (an unknown setting never passes silently), with a message that says why.
 */
export const REMOVED_ENV_VARS: Readonly<Record<string, string>> = Object.freeze({
  SIDECAR_CRYPTO_INLINE_WHEN_IDLE: 'removed: with workers every signature check runs on them; unset it (SIDECAR_CRYPTO_WORKERS=0 checks on the main thread)',
  SIDECAR_CRYPTO_INLINE_WHEN_SHARED: 'removed: with workers every signature check runs on them; unset it (SIDECAR_CRYPTO_WORKERS=0 checks on the main thread)',
  SIDECAR_SQLITE_BINDING: 'removed: it only served the benchmark; the sidecar uses the better-sqlite3 binding it was installed with',
});

/** Micro-dollars per dollar: money is integer micro-units, never floats. */
export const MICROS_PER_DOLLAR = 1_000_000;

/**
 * One `SIDECAR_TRUST_PROXY` entry: an IPv4/IPv6 address, or one with a prefix
 * length (1-32 for IPv4, 1-128 for IPv6; Fastify's proxy-addr refuses /0).
 * Checked here so that a bad entry (`10.0.0.0/33`) stops startup naming the
 * variable, not later inside Fastify.
 */
function checkTrustProxyEntry(entry: string): void {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const family = net.isIP(address);
  const bad = (why: string): never => {
    throw new ConfigError(`SIDECAR_TRUST_PROXY: ${JSON.stringify(entry)} ${why} (expected addresses or CIDRs like 10.0.0.0/8, separated by commas)`);
  };
  if (family === 0) bad('is not an IP address or CIDR');
  if (slash === -1) return;
  const prefix = entry.slice(slash + 1);
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) < 1 || Number(prefix) > max) bad(`has an invalid prefix length (1 to ${max} for IPv${family})`);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

function webhookAllowInsecure(env: NodeJS.ProcessEnv, production: boolean): boolean {
  const on = flag(env, 'SIDECAR_WEBHOOK_ALLOW_INSECURE');
  if (on && production) throw new ConfigError('SIDECAR_WEBHOOK_ALLOW_INSECURE: not allowed when NODE_ENV=production (it disables the SSRF guard)');
  return on;
}

/** Parses a dollar amount with at most 6 decimals into micro-dollars. */
export function dollarsToMicros(raw: string): number | null {
  const m = /^(\d{1,9})(?:\.(\d{1,6}))?$/.exec(raw);
  if (!m) return null;
  return Number(m[1]) * MICROS_PER_DOLLAR + Number((m[2] ?? '').padEnd(6, '0'));
}

/**
 * Reads and validates the configuration from environment variables.
 * Throws {@link ConfigError} with a one-line message naming the variable.
 *
 * ```ts
 * const config = loadConfig(process.env);   // SIDECAR_* variables; unknown ones are refused
 * ```
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): SidecarConfig {
  for (const k of Object.keys(env)) {
    if (Object.hasOwn(REMOVED_ENV_VARS, k)) throw new ConfigError(`${k}: ${REMOVED_ENV_VARS[k]}`);
    if (k.startsWith('SIDECAR_') && !(ENV_VARS as readonly string[]).includes(k)) {
      throw new ConfigError(`${k}: unknown variable (known: ${ENV_VARS.join(', ')})`);
    }
  }
  const production = env.NODE_ENV === 'production';
  const host = env.SIDECAR_HOST || DEFAULTS.host;
  if (!/^[A-Za-z0-9.:_-]{1,253}$/.test(host)) throw new ConfigError(`SIDECAR_HOST: not a host name or address: ${JSON.stringify(host)}`);

  const smtpUrl = env.SIDECAR_SMTP_URL || null;
  if (smtpUrl !== null) {
    let u: URL;
    try { u = new URL(smtpUrl); } catch { throw new ConfigError('SIDECAR_SMTP_URL: not a URL (expected smtp://user:pass@host:port)'); }
    if (u.protocol !== 'smtp:' && u.protocol !== 'smtps:') throw new ConfigError(`SIDECAR_SMTP_URL: scheme must be smtp: or smtps:, got ${u.protocol}`);
    if (!u.hostname) throw new ConfigError('SIDECAR_SMTP_URL: missing host');
  }

  let masterKey: Uint8Array | null = null;
  if (env.SIDECAR_MASTER_KEY) {
    const raw = env.SIDECAR_MASTER_KEY;
    const buf = Buffer.from(raw, 'base64');
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(raw) || buf.length !== 32) throw new ConfigError('SIDECAR_MASTER_KEY: must '
      + 'be base64 of exactly 32 bytes (e.g. `openssl rand -base64 32`)');
    masterKey = new Uint8Array(buf);
  } else if (production) {
    throw new ConfigError('SIDECAR_MASTER_KEY: required when NODE_ENV=production');
  } else if (env.SIDECAR_DATABASE_URL) {
    throw new ConfigError('SIDECAR_MASTER_KEY: required when SIDECAR_DATABASE_URL is set (every replica must use the same key; no key file is generated)');
  }

  const insecureCookies = flag(env, 'SIDECAR_INSECURE_COOKIES');
  if (insecureCookies && !LOOPBACK.has(host)) throw new ConfigError(
    `SIDECAR_INSECURE_COOKIES: only allowed when SIDECAR_HOST is a loopback address, got ${host}`);
  if (insecureCookies && production) throw new ConfigError('SIDECAR_INSECURE_COOKIES: not allowed when NODE_ENV=production');

  let alphaCreditsMicros = DEFAULTS.alphaCreditsDollars * MICROS_PER_DOLLAR;
  if (env.SIDECAR_ALPHA_CREDITS) {
    const m = dollarsToMicros(env.SIDECAR_ALPHA_CREDITS);
    if (m === null) throw new ConfigError(`SIDECAR_ALPHA_CREDITS: expected dollars like 10 or 0.5, got ${JSON.stringify(env.SIDECAR_ALPHA_CREDITS)}`);
    alphaCreditsMicros = m;
  }

  const logLevel = env.SIDECAR_LOG_LEVEL || DEFAULTS.logLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`SIDECAR_LOG_LEVEL: one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);

  const trustProxy = (env.SIDECAR_TRUST_PROXY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const t of trustProxy) checkTrustProxyEntry(t);
  const dnsServers = (env.SIDECAR_DNS_SERVERS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const d of dnsServers) {
    if (!isDnsServer(d)) {
      throw new ConfigError(`SIDECAR_DNS_SERVERS: ${JSON.stringify(d)} is not an IP address or ip:port (not a name)`);
    }
  }

  const port = int(env, 'SIDECAR_PORT', DEFAULTS.port, 0, 65535);

  return {
    host,
    port,
    dataDir: path.resolve(env.SIDECAR_DATA_DIR || DEFAULTS.dataDir),
    smtpUrl,
    mailFrom: env.SIDECAR_MAIL_FROM || DEFAULTS.mailFrom,
    masterKey,
    production,
    insecureCookies,
    webhookAllowInsecure: webhookAllowInsecure(env, production),
    alphaCreditsMicros,
    challengeTtlSeconds: int(env, 'SIDECAR_CHALLENGE_TTL_SECONDS', DEFAULTS.challengeTtlSeconds, 10, 3600),
    proofFreshnessSeconds: int(env, 'SIDECAR_PROOF_FRESHNESS_SECONDS', DEFAULTS.proofFreshnessSeconds, 5, 3600),
    apiKeyGraceSeconds: int(env, 'SIDECAR_API_KEY_GRACE_SECONDS', DEFAULTS.apiKeyGraceSeconds, 0, 86400),
    sendCodePerMinute: int(env, 'SIDECAR_SEND_CODE_PER_MINUTE', DEFAULTS.sendCodePerMinute, 1, 10000),
    sendCodeGlobalPerMinute: int(env, 'SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE', DEFAULTS.sendCodeGlobalPerMinute, 1, 1_000_000),
    logLevel,
    bodyLimitBytes: int(env, 'SIDECAR_BODY_LIMIT_BYTES', DEFAULTS.bodyLimitBytes, 1024, 16 * 1024 * 1024),
    trustProxy,
    dnsServers,
    domainRecheckHours: int(env, 'SIDECAR_DOMAIN_RECHECK_HOURS', 24, 1, 720),
    publicUrl: publicUrl(env.SIDECAR_PUBLIC_URL),
    auditRetentionDays: int(env, 'SIDECAR_AUDIT_RETENTION_DAYS', DEFAULTS.auditRetentionDays, 0, 36500),
    challengeRetentionHours: int(env, 'SIDECAR_CHALLENGE_RETENTION_HOURS', DEFAULTS.challengeRetentionHours, 1, 8760),
    idempotencyRetentionHours: int(env, 'SIDECAR_IDEMPOTENCY_RETENTION_HOURS', DEFAULTS.idempotencyRetentionHours,
      24, 8760),
    shutdownTimeoutMs: int(env, 'SIDECAR_SHUTDOWN_TIMEOUT_MS', DEFAULTS.shutdownTimeoutMs, 100, 600_000),
    cryptoWorkers: int(env, 'SIDECAR_CRYPTO_WORKERS', defaultCryptoWorkers(), 0, MAX_CRYPTO_WORKERS),
    metricsListen: metricsListen(env.SIDECAR_METRICS_LISTEN, host, port),
    approvalTtlSeconds: int(env, 'SIDECAR_APPROVAL_TTL_SECONDS', DEFAULTS.approvalTtlSeconds, 30, 86_400),
    requireBoundOperation: flag(env, 'SIDECAR_REQUIRE_BOUND_OPERATION'),
    maxDelegationDepth: int(env, 'SIDECAR_MAX_DELEGATION_DEPTH', DEFAULTS.maxDelegationDepth, 1, MAX_DELEGATION_DEPTH),
    consoleEnabled: flag(env, 'SIDECAR_CONSOLE', true),
    audit: parseAuditConfig(env, { int: (name, def, min, max) => int(env, name, def, min, max), fail: (m) => { throw new ConfigError(m); } }),
    database: databaseConfig(env),
    sqliteSynchronous: sqliteSynchronous(env),
  };
}

/** `SIDECAR_SQLITE_SYNCHRONOUS`: `full` (default) or `normal`, in any letter case; refused with PostgreSQL. */
function sqliteSynchronous(env: NodeJS.ProcessEnv): SqliteSynchronous {
  const raw = env.SIDECAR_SQLITE_SYNCHRONOUS;
  if (raw === undefined || raw === '') return DEFAULTS.sqliteSynchronous;
  if (env.SIDECAR_DATABASE_URL) {
    throw new ConfigError('SIDECAR_SQLITE_SYNCHRONOUS: only used with SQLite; SIDECAR_DATABASE_URL is set '
      + '(PostgreSQL commits are durable by its own settings)');
  }
  const value = raw.toLowerCase();
  if (value !== 'normal' && value !== 'full') {
    throw new ConfigError(
      `SIDECAR_SQLITE_SYNCHRONOUS: must be full or normal, got ${JSON.stringify(raw.slice(0, 40))}`,
    );
  }
  return value;
}

/**
 * `SIDECAR_METRICS_LISTEN`: `host:port` (`[v6]:port` for IPv6) of a separate metrics listener,
 * like OPA's diagnostic address, so `/metrics` can stay on a private interface while the API
 * port is reachable by apps. Unset or empty: `/metrics` is served on the main port.
 */
function metricsListen(raw: string | undefined, mainHost: string, mainPort: number): { host: string; port: number } | null {
  if (raw === undefined || raw === '') return null;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]{1,253})):([0-9]{1,5})$/.exec(raw);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new ConfigError(`SIDECAR_METRICS_LISTEN: expected host:port such as 127.0.0.1:9465 or [::1]:9465, got ${JSON.stringify(raw)}`);
  const host = (m[1] ?? m[2])!;
  if (port !== 0 && port === mainPort && host === mainHost) throw new ConfigError(
    `SIDECAR_METRICS_LISTEN: ${raw} is the main listener (SIDECAR_HOST:SIDECAR_PORT); pick another port`);
  return { host, port };
}

/** A complete config for tests and embedding: defaults merged with `overrides`; unknown keys are a TypeError. */
export function configWith(overrides: Partial<SidecarConfig>): SidecarConfig {
  const base = loadConfig({});
  for (const k of Object.keys(overrides)) {
    if (!(k in base)) throw new TypeError(`config.${k}: unknown option`);
  }
  return { ...base, ...overrides };
}
