/**
 * Copies a SQLite store into an EMPTY PostgreSQL database (the
 * `copy-to-postgres` command, sidecar/copy.ts), so a deployment that started
 * on one host can move to several replicas without losing anything.
 *
 * - The source is read in one read transaction: a consistent snapshot, even
 *   if a sidecar still runs on it (whatever it writes later is not copied, so
 *   stop it first). It is migrated to the newest schema first.
 * - The target is migrated, must hold no row in any table, and receives every
 *   row in one transaction (all or nothing): the same ids, sealed bytes, JSON
 *   text and sequence numbers (audit and outbox cursors stay valid); each
 *   identity sequence is moved past the copied values.
 * - Then every table is verified: same row count and the same SHA-256 over
 *   all rows in primary-key order, read back from both databases.
 */
import crypto from 'node:crypto';
import { Db } from './sqlite/db.js';
import { openPostgresStore } from './postgres/store.js';
import type { PostgresSettings } from './postgres/store.js';
import type { Querier } from './postgres/db.js';

/**
 * The tables in foreign-key order: the key columns the verification orders by (text columns in
 * the `"C"` collation on PostgreSQL, SQLite's byte order; `numeric` ones as numbers), and the
 * identity column to advance past the copy.
 */
export const COPY_TABLES: readonly { name: string; key: string[]; numeric?: boolean; identity?: string }[] = [
  { name: 'accounts', key: ['id'] }, { name: 'login_codes', key: ['id'] }, { name: 'sessions', key: ['id'] },
  { name: 'platforms', key: ['id'] }, { name: 'connections', key: ['id'] }, { name: 'api_keys', key: ['id'] },
  { name: 'agents', key: ['id'] }, { name: 'delegation_requests', key: ['id'] }, { name: 'certificates', key: ['id'] },
  { name: 'challenges', key: ['id'] }, { name: 'audit_events', key: ['seq'], numeric: true, identity: 'seq' },
  { name: 'outbox', key: ['id'], identity: 'seq' }, { name: 'delivery_attempts', key: ['id'], numeric: true, identity: 'id' },
  { name: 'store_meta', key: ['key'] }, { name: 'rate_limits', key: ['key'] },
  { name: 'approvals', key: ['seq'], numeric: true, identity: 'seq' }, { name: 'usage_counters', key: ['cert_id', 'kind', 'window_start'] },
  { name: 'audit_chain_heads', key: ['account_id'] }, { name: 'audit_checkpoints', key: ['id'] },
  { name: 'audit_export_cursors', key: ['sink', 'account_id'] }, { name: 'service_keys', key: ['id'] },
  { name: 'decision_explanations', key: ['id'] },
  { name: 'idempotency_records', key: ['connection_id', 'agent_id', 'idem_key'] },
  { name: 'memberships', key: ['org_id', 'account_id'] }, { name: 'invitations', key: ['id'] },
  { name: 'publisher_domains', key: ['org_id'] },
];

/** Rows per INSERT statement. */
const BATCH = 500;

/** Per table: rows copied (and verified). */
export type CopyCounts = Record<string, number>;

/** The target already holds data. */
export class TargetNotEmptyError extends Error {
  override name = 'TargetNotEmptyError';
}

type Row = Record<string, unknown>;

/** A value in the digest's canonical form: bytes as hex, numbers and text as they are. */
const canon = (v: unknown): unknown => (Buffer.isBuffer(v) ? `\\x${v.toString('hex')}` : v instanceof Uint8Array ? `\\x${Buffer.from(v).toString('hex')}` : v);

/** SHA-256 over rows (columns in `cols` order). */
function digest(rows: Row[], cols: string[], h = crypto.createHash('sha256')): crypto.Hash {
  for (const r of rows) h.update(JSON.stringify(cols.map((c) => canon(r[c] ?? null))) + '\n');
  return h;
}

/**
 * Copies the SQLite file `sqliteFile` into the database of `target`; resolves to the
 * per-table counts after verifying them. Throws {@link TargetNotEmptyError} when the
 * target holds rows, and an Error naming the table when a verification fails.
 */
export async function copySqliteToPostgres(sqliteFile: string, target: PostgresSettings): Promise<CopyCounts> {
  const src = new Db({ file: sqliteFile });
  const store = await openPostgresStore({ ...target, changes: false }).catch((err: unknown) => { src.close(); throw err; });
  const counts: CopyCounts = {};
  try {
    src.migrate();
    for (const t of COPY_TABLES) {
      const n = (await store.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${t.name}`))!.n;
      if (n > 0) throw new TargetNotEmptyError(`the target database is not empty (${t.name} has ${n} rows): copy only into a new, empty database`);
    }
    const cols = new Map<string, string[]>();
    src.raw.exec('BEGIN');
    try {
      await store.db.tx(async (q) => {
        for (const t of COPY_TABLES) {
          const names = (src.raw.pragma(`table_info(${t.name})`) as { name: string }[]).map((c) => c.name);
          cols.set(t.name, names);
          counts[t.name] = await copyTable(src, q, t.name, names);
          if (t.identity) {
            await q.run(`SELECT setval(pg_get_serial_sequence('${t.name}', '${t.identity}'),
              GREATEST((SELECT MAX(${t.identity}) FROM ${t.name}), 1), (SELECT COUNT(*) > 0 FROM ${t.name}))`);
          }
        }
      });
    } finally {
      src.raw.exec('COMMIT');
    }
    for (const t of COPY_TABLES) await verifyTable(src, store.db, t, cols.get(t.name)!, counts[t.name]!);
    return counts;
  } finally {
    src.close();
    await store.close();
  }
}

/** Copies one table in rowid order (so the identity `seq` of PostgreSQL keeps SQLite's order). */
async function copyTable(src: Db, q: Querier, table: string, names: string[]): Promise<number> {
  const stmt = src.stmt(`SELECT ${names.join(', ')} FROM ${table} ORDER BY rowid`);
  let batch: Row[] = [];
  let n = 0;
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    const params: unknown[] = [];
    const tuples = batch.map((r) => `(${names.map((c) => { params.push(r[c] ?? null); return `$${params.length}`; }).join(', ')})`);
    await q.run(`INSERT INTO ${table} (${names.join(', ')}) VALUES ${tuples.join(', ')}`, params);
    n += batch.length;
    batch = [];
  };
  for (const r of stmt.iterate() as IterableIterator<Row>) {
    batch.push(r);
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  return n;
}

/** Compares count and digest of one table on both sides, in key order. */
async function verifyTable(src: Db, dst: Querier, t: (typeof COPY_TABLES)[number], names: string[], copied: number): Promise<void> {
  const table = t.name;
  const a = src.all<Row>(`SELECT ${names.join(', ')} FROM ${table} ORDER BY ${t.key.join(', ')}`);
  const pgKey = t.key.map((k) => (t.numeric || k === 'window_start' ? k : `${k} COLLATE "C"`)).join(', ');
  const b = await dst.all<Row>(`SELECT ${names.join(', ')} FROM ${table} ORDER BY ${pgKey}`);
  if (a.length !== copied || b.length !== copied) {
    throw new Error(`copy verification failed for ${table}: ${a.length} rows in SQLite, ${b.length} in PostgreSQL, ${copied} copied`);
  }
  const ha = digest(a, names).digest('hex');
  const hb = digest(b, names).digest('hex');
  if (ha !== hb) throw new Error(`copy verification failed for ${table}: the rows differ (SHA-256 ${ha.slice(0, 12)} ≠ ${hb.slice(0, 12)})`);
}
