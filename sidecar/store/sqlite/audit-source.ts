/**
 * A SQLite database file as an {@link AuditSource} for the offline verifier:
 * opened read-only (nothing is migrated or written, so a copy under
 * investigation stays as it is), read in position order per account.
 */
import type { Database, Statement } from 'better-sqlite3';
import { openDatabase } from './driver.js';
import type { AuditSource, ChainedAuditEvent } from '../types.js';
import { AuditSourceError } from '../errors.js';
import { sourceCheckpointFromRow, sourceRowFromRow } from '../rows-audit.js';
import type { ChainRow, CheckpointRow } from '../rows-audit.js';

export { AuditSourceError } from '../errors.js';

/**
 * Statements stay referenced for the life of the process (see `Db.stmt`: a collected
 * better-sqlite3 Statement can abort Node >= 24.19).
 */
const KEEP: Statement[] = [];

/** Opens `file` read-only. Throws {@link AuditSourceError} when it is not a sidecar database with the chain. */
export function openSqliteAuditSource(file: string): AuditSource {
  let db: Database;
  try {
    db = openDatabase(file, { readonly: true, fileMustExist: true });
    db.exec('PRAGMA query_only = ON'); // exec(): no Statement to be collected (see KEEP)
  } catch (err) {
    throw new AuditSourceError(`${file}: cannot open the database: ${(err as Error).message}`);
  }
  const prep = (sql: string): Statement => {
    const s = db.prepare(sql);
    KEEP.push(s);
    return s;
  };
  let has: boolean;
  try {
    has = (prep("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN ('audit_chain_heads', 'audit_checkpoints', 'service_keys')").get() as { n: number }).n === 3;
  } catch (err) {
    db.close();
    throw new AuditSourceError(`${file}: not a SQLite database: ${(err as Error).message}`);
  }
  if (!has) {
    db.close();
    throw new AuditSourceError(`${file}: no audit chain in this database (written before migration 4?)`);
  }
  const keys = prep('SELECT id, public_key FROM service_keys ORDER BY created_at, id');
  const accounts = prep(`SELECT account_id FROM audit_chain_heads UNION SELECT account_id FROM audit_events
    UNION SELECT account_id FROM audit_checkpoints ORDER BY 1`);
  const head = prep('SELECT position, hash FROM audit_chain_heads WHERE account_id = ?');
  const cps = prep('SELECT * FROM audit_checkpoints WHERE account_id = ? ORDER BY position, created_at');
  const rows = prep('SELECT * FROM audit_events WHERE account_id = ? AND chain_position IS NOT NULL ORDER BY chain_position');
  const unchained = prep('SELECT COUNT(*) AS n, MIN(id) AS first FROM audit_events WHERE account_id = ? AND (chain_position IS NULL OR hash IS NULL OR prev_hash IS NULL)');
  return {
    async serviceKeys() {
      return (keys.all() as { id: string; public_key: string }[]).map((k) => ({ id: k.id, publicKey: k.public_key }));
    },
    async accounts() {
      return (accounts.all() as { account_id: string }[]).map((r) => r.account_id);
    },
    async head(accountId) {
      return (head.get(accountId) as { position: number; hash: string } | undefined) ?? null;
    },
    async checkpoints(accountId) {
      return (cps.all(accountId) as CheckpointRow[]).map(sourceCheckpointFromRow);
    },
    async *rows(accountId): AsyncIterable<ChainedAuditEvent> {
      for (const r of rows.iterate(accountId)) yield sourceRowFromRow(r as ChainRow);
    },
    async unchained(accountId) {
      const r = unchained.get(accountId) as { n: number; first: string | null };
      return { count: r.n, firstId: r.first };
    },
    async close() {
      db.close();
    },
  };
}
