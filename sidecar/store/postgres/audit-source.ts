/**
 * A PostgreSQL database as an {@link AuditSource} for the offline verifier
 * (`agent-authz-sidecar audit verify --database-url …`): one connection, one
 * `REPEATABLE READ READ ONLY` transaction for the whole check, so the heads,
 * rows, checkpoints and keys are read from one snapshot while the replicas
 * keep writing (a head read later than its rows would look like rows removed
 * from the end), and nothing is written or migrated. SELECT on the audit
 * tables is all the role needs. The reads are sql/audit-source.ts.
 *
 * Only the verify command opens this (through `store/index.ts`).
 */
import pg from 'pg';
import { clientConfig } from './db.js';
import type { PostgresSettings } from './db.js';
import { AuditSourceError } from '../errors.js';
import { redactDatabaseUrl } from './url.js';
import { compile, drive } from '../sql/core.js';
import { auditSource } from '../sql/audit-source.js';
import type { AuditSource } from '../types.js';

/** The tables the verifier reads. */
const TABLES = ['audit_events', 'audit_chain_heads', 'audit_checkpoints', 'service_keys'];

/**
 * Connects and opens the snapshot. Throws {@link AuditSourceError} when the database cannot be
 * reached or read, or holds no audit chain (not a sidecar database).
 */
export async function openPostgresAuditSource(settings: PostgresSettings): Promise<AuditSource> {
  const where = redactDatabaseUrl(settings.url);
  const config = clientConfig(settings);
  const client = new pg.Client({ ...config, application_name: `${String(config.application_name)} (audit verify)` });
  let lost: Error | undefined;
  client.on('error', (err: Error) => { lost = err; });
  const fail = (what: string, err: unknown): AuditSourceError =>
    new AuditSourceError(`${where}: ${what}: ${lost?.message ?? (err as Error).message}`);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => {});
    throw fail('cannot connect', err);
  }
  const query = async <T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> => {
    try {
      return (await client.query<T>(sql, params)).rows;
    } catch (err) {
      throw fail('cannot read the audit trail', err);
    }
  };
  try {
    await query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const found = await query<{ t: string | null }>('SELECT to_regclass(name)::text AS t FROM unnest($1::text[]) AS name', [TABLES]);
    if (found.some((r) => r.t === null)) {
      throw new AuditSourceError(`${where}: no audit chain in this database (not an agent-authz database, or not migrated yet)`);
    }
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
  return auditSource((work) => drive(work, 'pg', async (op) => {
    const { text, params } = compile(op.stmt, 'pg');
    const rows = await query(text, params);
    return op.kind === 'all' ? rows : rows[0];
  }), async () => {
    await client.query('ROLLBACK').catch(() => {});
    await client.end().catch(() => {});
  });
}
