/**
 * A PostgreSQL database as an {@link AuditSource} for the offline verifier
 * (`agent-authz-sidecar audit verify --database-url …`): one connection, one
 * `REPEATABLE READ READ ONLY` transaction for the whole check, so the heads,
 * rows, checkpoints and keys are read from one snapshot while the replicas
 * keep writing (a head read later than its rows would look like rows removed
 * from the end), and nothing is written or migrated. SELECT on the audit
 * tables is all the role needs. Rows are read in pages in (position, seq)
 * order, so a large trail is never held in memory at once, and a position
 * that repeats (the unique index dropped) still reaches the checker.
 *
 * Only the verify command opens this (through `store/index.ts`).
 */
import pg from 'pg';
import { clientConfig } from './db.js';
import type { PostgresSettings } from './db.js';
import { AuditSourceError } from '../errors.js';
import { redactDatabaseUrl } from './url.js';
import { sourceCheckpointFromRow, sourceRowFromRow } from '../rows-audit.js';
import type { ChainRow, CheckpointRow } from '../rows-audit.js';
import type { AuditSource, ChainedAuditEvent } from '../types.js';

/** Rows per page of one account's chain. */
const PAGE = 2000;
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
    if (found.some((r) => r.t === null)) throw new AuditSourceError(`${where}: no audit chain in this database (not an agent-authz database, or not migrated yet)`);
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
  return {
    async serviceKeys() {
      return (await query<{ id: string; public_key: string }>('SELECT id, public_key FROM service_keys ORDER BY created_at, id COLLATE "C"'))
        .map((k) => ({ id: k.id, publicKey: k.public_key }));
    },
    async accounts() {
      return (await query<{ account_id: string }>(`SELECT account_id FROM (SELECT account_id FROM audit_chain_heads UNION SELECT account_id FROM audit_events
        UNION SELECT account_id FROM audit_checkpoints) a ORDER BY account_id COLLATE "C"`)).map((r) => r.account_id);
    },
    async head(accountId) {
      return (await query<{ position: number; hash: string }>('SELECT position, hash FROM audit_chain_heads WHERE account_id = $1', [accountId]))[0] ?? null;
    },
    async checkpoints(accountId) {
      return (await query<CheckpointRow>('SELECT * FROM audit_checkpoints WHERE account_id = $1 ORDER BY position, created_at, id COLLATE "C"', [accountId]))
        .map(sourceCheckpointFromRow);
    },
    async *rows(accountId): AsyncIterable<ChainedAuditEvent> {
      let after = { position: -1, seq: -1 };
      for (;;) {
        const page = await query<ChainRow & { seq: number }>(
          `SELECT * FROM audit_events WHERE account_id = $1 AND chain_position IS NOT NULL AND (chain_position, seq) > ($2, $3)
            ORDER BY chain_position, seq LIMIT ${PAGE}`, [accountId, after.position, after.seq]);
        for (const r of page) yield sourceRowFromRow(r);
        if (page.length < PAGE) return;
        const last = page[page.length - 1]!;
        after = { position: last.chain_position, seq: last.seq };
      }
    },
    async unchained(accountId) {
      const r = (await query<{ n: number; first: string | null }>(
        `SELECT COUNT(*)::int AS n, MIN(id COLLATE "C") AS first FROM audit_events
          WHERE account_id = $1 AND (chain_position IS NULL OR hash IS NULL OR prev_hash IS NULL)`, [accountId]))[0]!;
      return { count: r.n, firstId: r.first };
    },
    async close() {
      await client.query('ROLLBACK').catch(() => {});
      await client.end().catch(() => {});
    },
  };
}
