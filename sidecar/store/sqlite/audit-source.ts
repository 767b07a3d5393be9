/**
 * A SQLite database file as an {@link AuditSource} for the offline verifier:
 * opened read-only (nothing is migrated or written, so a copy under
 * investigation stays as it is), answering the shared reads of sql/audit-source.ts.
 */
import type { Database, Statement } from 'better-sqlite3';
import { openDatabase } from './driver.js';
import type { AuditSource } from '../types.js';
import { AuditSourceError } from '../errors.js';
import { compile, driveSync } from '../sql/core.js';
import { auditSource } from '../sql/audit-source.js';

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
  const stmts = new Map<string, Statement>();
  const prep = (sql: string): Statement => {
    const s = db.prepare(sql);
    KEEP.push(s);
    return s;
  };
  let has: boolean;
  try {
    has = (prep(`SELECT COUNT(*) AS n FROM sqlite_master
      WHERE type = 'table' AND name IN ('audit_chain_heads', 'audit_checkpoints', 'service_keys')`).get() as { n: number }).n === 3;
  } catch (err) {
    db.close();
    throw new AuditSourceError(`${file}: not a SQLite database: ${(err as Error).message}`);
  }
  if (!has) {
    db.close();
    throw new AuditSourceError(`${file}: no audit chain in this database (written before migration 4?)`);
  }
  return auditSource(async (work) => driveSync(work, 'sqlite', (op) => {
    const { text, params } = compile(op.stmt, 'sqlite');
    const s = stmts.get(text) ?? stmts.set(text, prep(text)).get(text)!;
    return op.kind === 'all' ? s.all(...params) : s.get(...params);
  }), async () => { db.close(); });
}
