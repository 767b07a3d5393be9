/**
 * The PostgreSQL settings of the sidecar: `SIDECAR_DATABASE_URL` (libpq URL
 * conventions; see docs/storage.md) and its companions, validated once. Also
 * used alone by `audit verify --database-url`.
 */
import fs from 'node:fs';
import { ConfigError, int } from './env.js';

/** `SIDECAR_DATABASE_URL` and its companions. */
export interface DatabaseConfig {
  /** `postgres://user:password@host:port/db?sslmode=…` (libpq conventions; see docs/storage.md). */
  url: string;
  /** Most pooled connections per sidecar. */
  poolMax: number;
  /** `statement_timeout` of every statement (ms). */
  statementTimeoutMs: number;
  /** Bound on opening a connection or waiting for a pooled one (ms). */
  connectTimeoutMs: number;
}

/** Defaults of the `SIDECAR_DATABASE_*` companions (part of config.ts's `DEFAULTS`). */
export const DATABASE_DEFAULTS = {
  databasePoolMax: 10,
  databaseStatementTimeoutMs: 5_000,
  databaseConnectTimeoutMs: 5_000,
} as const;

/** libpq `sslmode` values node-postgres can honour (it cannot fall back between TLS and plain text). */
const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'];

/**
 * `SIDECAR_DATABASE_URL` (libpq URL conventions) and its companions; null without a URL. The
 * password is never part of an error message. Throws {@link ConfigError}. Also used alone by
 * `audit verify`, which needs no other setting.
 */
export function databaseConfig(env: NodeJS.ProcessEnv): DatabaseConfig | null {
  const raw = env.SIDECAR_DATABASE_URL;
  if (raw === undefined || raw === '') {
    for (const k of ['SIDECAR_DATABASE_POOL_MAX', 'SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS', 'SIDECAR_DATABASE_CONNECT_TIMEOUT_MS']) {
      if (env[k]) throw new ConfigError(`${k}: only used with SIDECAR_DATABASE_URL, which is not set`);
    }
    return null;
  }
  const name = 'SIDECAR_DATABASE_URL';
  let u: URL;
  try { u = new URL(raw); } catch { throw new ConfigError(`${name}: not a URL (expected postgres://user:password@host:5432/database)`); }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new ConfigError(`${name}: scheme must be postgres: or postgresql:, got ${u.protocol}`);
  if (!u.hostname && !u.searchParams.get('host')) throw new ConfigError(`${name}: missing host`);
  if (u.pathname.length <= 1) throw new ConfigError(`${name}: missing database name (postgres://…/database)`);
  const sslmode = u.searchParams.get('sslmode');
  if (sslmode !== null && !SSL_MODES.includes(sslmode)) {
    throw new ConfigError(
      `${name}: sslmode must be one of ${SSL_MODES.join(', ')}, got ${JSON.stringify(sslmode)} `
      + '(prefer and allow would fall back between TLS and plain text, which the driver cannot do)');
  }
  if (sslmode === 'verify-ca' && !u.searchParams.get('sslrootcert')) throw new ConfigError(`${name}: sslmode=verify-ca needs sslrootcert=<CA file>`);
  for (const p of ['sslrootcert', 'sslcert', 'sslkey']) {
    const file = u.searchParams.get(p);
    if (file !== null && !fs.existsSync(file)) throw new ConfigError(`${name}: ${p} file not found: ${file}`);
  }
  return {
    url: raw,
    poolMax: int(env, 'SIDECAR_DATABASE_POOL_MAX', DATABASE_DEFAULTS.databasePoolMax, 1, 500),
    statementTimeoutMs: int(env, 'SIDECAR_DATABASE_STATEMENT_TIMEOUT_MS', DATABASE_DEFAULTS.databaseStatementTimeoutMs, 100, 600_000),
    connectTimeoutMs: int(env, 'SIDECAR_DATABASE_CONNECT_TIMEOUT_MS', DATABASE_DEFAULTS.databaseConnectTimeoutMs, 100, 120_000),
  };
}
