/**
 * The PostgreSQL connection pool for the shared store (node-postgres `pg`):
 * a bounded pool with a statement timeout on every connection, TLS and the
 * rest taken from a libpq-style URL, BIGINT read as a JS number, queries as
 * named prepared statements (parsed once per connection), transactions on one
 * pooled client, and errors sorted: an unreachable or timed-out database
 * becomes {@link StoreUnavailableError} (503), anything else propagates.
 *
 * Only files under `sidecar/store/postgres/` import this module.
 */
import crypto from 'node:crypto';
import pg from 'pg';
import { parse as parseUrl } from 'pg-connection-string';
import { StoreUnavailableError } from '../errors.js';
import type { PoolStats, StoreMonitor } from '../types.js';

/** Settings of the PostgreSQL engine (from `SIDECAR_DATABASE_*`, see config.ts). */
export interface PostgresSettings {
  /** `postgres://user:password@host:port/db?sslmode=…` (libpq conventions). */
  url: string;
  /** Most pooled connections. */
  poolMax: number;
  /** Server-side `statement_timeout` of every statement (ms); also bounds lock waits. */
  statementTimeoutMs: number;
  /** Bound on opening a connection, and on waiting for a pooled one (ms). */
  connectTimeoutMs: number;
}

/** A query runner: the pool, or one client inside a transaction. */
export interface Querier {
  /** All rows. */
  all<T>(sql: string, params?: unknown[]): Promise<T[]>;
  /** The first row, or undefined. */
  get<T>(sql: string, params?: unknown[]): Promise<T | undefined>;
  /** The number of rows the statement changed. */
  run(sql: string, params?: unknown[]): Promise<number>;
}

/** SQLSTATE classes and codes that mean "the database is not available now". */
const UNAVAILABLE_SQLSTATE = /^(08|57P0[1-4]|53300|57014|55P03|40P01|40001)/;
/** Node and pg messages of lost, refused or timed-out connections. */
const UNAVAILABLE_MESSAGE = new RegExp([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'Connection terminated',
  'timeout exceeded', 'Query read timeout', 'connection error', 'not queryable', 'Client was closed',
].join('|'), 'i');

/** Whether `err` means the database is unreachable or overloaded (retry later), not a bad statement. */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string' && UNAVAILABLE_SQLSTATE.test(e.code)) return true;
  if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) return true;
  return typeof e?.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message);
}

/** BIGINT (int8, oid 20) as a JS number: every stored integer is far below 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** The pool's client configuration from the settings; `sslmode` follows libpq (see docs/storage.md). */
export function clientConfig(s: PostgresSettings): pg.PoolConfig {
  const parsed = parseUrl(s.url, { useLibpqCompat: true }) as Record<string, unknown>;
  const out: pg.PoolConfig = {
    ...(parsed as pg.PoolConfig),
    max: s.poolMax,
    statement_timeout: s.statementTimeoutMs,
    query_timeout: s.statementTimeoutMs + 5_000,
    connectionTimeoutMillis: s.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: typeof parsed.application_name === 'string' ? parsed.application_name : 'agent-authz-sidecar',
    types: TYPES,
  };
  if (typeof parsed.port === 'string' && parsed.port !== '') out.port = Number(parsed.port);
  return out;
}

/** Statement names by SQL text: each distinct statement is prepared once per connection. */
const names = new Map<string, string>();
function nameOf(sql: string): string {
  let n = names.get(sql);
  if (!n) {
    n = `s${crypto.createHash('sha256').update(sql).digest('hex').slice(0, 16)}`;
    names.set(sql, n);
  }
  return n;
}

/** The pool and its helpers. */
export class PgDb implements Querier {
  readonly pool: pg.Pool;
  private readonly monitor: StoreMonitor | undefined;

  constructor(settings: PostgresSettings, monitor?: StoreMonitor) {
    this.pool = new pg.Pool(clientConfig(settings));
    this.monitor = monitor;
    // An idle client whose server went away emits 'error' on the pool: without a listener the
    // process would crash. The client is discarded; the next query opens a new one.
    this.pool.on('error', () => { this.monitor?.error?.(); });
  }

  /** Counts and sorts an error (see the file header). */
  fail(err: unknown): Error {
    this.monitor?.error?.();
    if (err instanceof StoreUnavailableError) return err;
    if (isUnavailable(err)) return new StoreUnavailableError(`the database is unavailable: ${(err as Error).message}`, { cause: err });
    return err instanceof Error ? err : new Error(String(err));
  }

  private async exec<T extends pg.QueryResultRow>(q: pg.Pool | pg.PoolClient, sql: string, params: unknown[]): Promise<pg.QueryResult<T>> {
    try {
      return await q.query<T>({ name: nameOf(sql), text: sql, values: params });
    } catch (err) {
      throw this.fail(err);
    }
  }

  async all<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return (await this.exec(this.pool, sql, params)).rows as T[];
  }

  async get<T>(sql: string, params: unknown[] = []): Promise<T | undefined> {
    return (await this.exec(this.pool, sql, params)).rows[0] as T | undefined;
  }

  async run(sql: string, params: unknown[] = []): Promise<number> {
    return (await this.exec(this.pool, sql, params)).rowCount ?? 0;
  }

  /**
   * Runs `fn` in one transaction (READ COMMITTED; the operations take the row locks they
   * need) on one pooled client: COMMIT when it resolves, ROLLBACK when it throws. A client
   * whose connection broke is discarded rather than returned to the pool.
   */
  async tx<T>(fn: (q: Querier) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.fail(err);
    }
    const q: Querier = {
      all: async <R>(sql: string, params: unknown[] = []) => (await this.exec(client, sql, params)).rows as R[],
      get: async <R>(sql: string, params: unknown[] = []) => (await this.exec(client, sql, params)).rows[0] as R | undefined,
      run: async (sql: string, params: unknown[] = []) => (await this.exec(client, sql, params)).rowCount ?? 0,
    };
    let broken: Error | undefined;
    // A checked-out client whose connection breaks emits 'error' on itself (the pool only
    // listens to idle ones): without a listener the process would crash.
    const onError = (err: Error): void => { broken = err; this.monitor?.error?.(); };
    client.on('error', onError);
    try {
      await q.run('BEGIN');
      const out = await fn(q);
      await q.run('COMMIT');
      return out;
    } catch (err) {
      try { await client.query('ROLLBACK'); } catch (e) { broken = e as Error; }
      throw err instanceof StoreUnavailableError || !isUnavailable(err) ? err : this.fail(err);
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  /** The pool's connections. */
  stats(): PoolStats {
    const total = this.pool.totalCount;
    const idle = this.pool.idleCount;
    return { inUse: Math.max(0, total - idle), idle, waiting: this.pool.waitingCount };
  }

  /** Closes every pooled connection. */
  async close(): Promise<void> {
    await this.pool.end();
  }
}
