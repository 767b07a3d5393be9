/**
 * PostgreSQL implementation of {@link AuditStore}: chain heads, signed
 * checkpoints, retention that leaves a signed anchor, chain-ordered reads for
 * exports, the push-export cursors and the service signing keys. Several
 * replicas run the checkpoint and export jobs at once: a checkpoint is stored
 * once per position and kind (unique index), and export claims lock cursor
 * rows with `FOR UPDATE SKIP LOCKED`, so each account's rows go to one
 * exporter per lease. The rows' links are written by audit-append.ts.
 */
import type { PgDb, Querier } from './db.js';
import type {
  AuditChainHead, AuditCheckpointRecord, AuditStore, ChainedAuditEvent, ExportClaim, PrunePoint, ServiceKeyRecord,
} from '../types.js';
import { chainedFromRow, checkpointFromRow, headFromRow, serviceKeyFromRow } from '../rows-audit.js';
import type { ChainRow, CheckpointRow, HeadRow, ServiceKeyRow } from '../rows-audit.js';

/** Stores a checkpoint inside an open transaction (see {@link AuditStore.insertCheckpoint}). */
async function insertCheckpointTx(q: Querier, c: AuditCheckpointRecord): Promise<boolean> {
  const row = await q.get<{ hash: string | null }>('SELECT hash FROM audit_events WHERE account_id = $1 AND chain_position = $2', [c.accountId, c.position]);
  if (row?.hash !== c.head) return false;
  const stored = (await q.run(
    `INSERT INTO audit_checkpoints (id, account_id, position, head, kind, key_id, signature, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (account_id, position, kind) DO NOTHING`,
    [c.id, c.accountId, c.position, c.head, c.kind, c.keyId, JSON.stringify(c.signature), c.createdAt])) === 1;
  if (stored) {
    await q.run('UPDATE audit_chain_heads SET checkpoint_position = GREATEST(checkpoint_position, $1), checkpoint_at = GREATEST(checkpoint_at, $2) WHERE account_id = $3',
      [c.position, c.createdAt, c.accountId]);
  }
  return stored;
}

/** Audit evidence on PostgreSQL. */
export class PgAuditStore implements AuditStore {
  private readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  async ensureServiceKey(c: ServiceKeyRecord): Promise<ServiceKeyRecord> {
    await this.db.run('INSERT INTO service_keys (id, purpose, public_key, secret_enc, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (purpose) DO NOTHING',
      [c.id, c.purpose, c.publicKey, Buffer.from(c.secretEnc), c.createdAt]);
    return serviceKeyFromRow((await this.db.get<ServiceKeyRow>('SELECT * FROM service_keys WHERE purpose = $1', [c.purpose]))!);
  }

  async serviceKeys(): Promise<ServiceKeyRecord[]> {
    return (await this.db.all<ServiceKeyRow>('SELECT * FROM service_keys ORDER BY created_at, id')).map(serviceKeyFromRow);
  }

  async getHead(accountId: string): Promise<AuditChainHead | undefined> {
    const r = await this.db.get<HeadRow>('SELECT * FROM audit_chain_heads WHERE account_id = $1 AND position > 0', [accountId]);
    return r && headFromRow(r);
  }

  async headsDue(q: { rows: number; olderThan: number; limit: number }): Promise<AuditChainHead[]> {
    return (await this.db.all<HeadRow>(
      `SELECT * FROM audit_chain_heads WHERE position > checkpoint_position AND (position - checkpoint_position >= $1 OR checkpoint_at <= $2)
        ORDER BY checkpoint_at LIMIT $3`, [q.rows, q.olderThan, q.limit])).map(headFromRow);
  }

  async insertCheckpoint(c: AuditCheckpointRecord): Promise<boolean> {
    return this.db.tx((q) => insertCheckpointTx(q, c));
  }

  async listCheckpoints(q: { accountId: string; fromPosition?: number; toPosition?: number }): Promise<AuditCheckpointRecord[]> {
    return (await this.db.all<CheckpointRow>(
      'SELECT * FROM audit_checkpoints WHERE account_id = $1 AND position >= $2 AND position <= $3 ORDER BY position, created_at',
      [q.accountId, q.fromPosition ?? 0, q.toPosition ?? Number.MAX_SAFE_INTEGER])).map(checkpointFromRow);
  }

  async prunePoints(olderThan: number, limit: number): Promise<PrunePoint[]> {
    return (await this.db.all<{ account_id: string; position: number; hash: string }>(
      `SELECT e.account_id, e.chain_position AS position, e.hash FROM (
         SELECT a.account_id, COALESCE((SELECT MIN(n.chain_position) - 1 FROM audit_events n
                  WHERE n.account_id = a.account_id AND n.chain_position IS NOT NULL AND n.created_at >= $1), MAX(a.chain_position)) AS cut
           FROM audit_events a WHERE a.chain_position IS NOT NULL AND a.created_at < $1 GROUP BY a.account_id
       ) p JOIN audit_events e ON e.account_id = p.account_id AND e.chain_position = p.cut
       ORDER BY e.account_id COLLATE "C" LIMIT $2`, [olderThan, limit]))
      .map((r) => ({ accountId: r.account_id, position: r.position, hash: r.hash }));
  }

  async pruneTo(anchor: AuditCheckpointRecord): Promise<number> {
    if (anchor.kind !== 'anchor') throw new TypeError('pruneTo: the checkpoint must be of kind anchor');
    return this.db.tx(async (q) => {
      if (!(await insertCheckpointTx(q, anchor))
        && (await q.get('SELECT 1 AS x FROM audit_checkpoints WHERE account_id = $1 AND position = $2 AND kind = $3 AND head = $4',
          [anchor.accountId, anchor.position, 'anchor', anchor.head])) === undefined) {
        return -1;
      }
      const n = await q.run('DELETE FROM audit_events WHERE account_id = $1 AND chain_position <= $2', [anchor.accountId, anchor.position]);
      await q.run('DELETE FROM audit_checkpoints WHERE account_id = $1 AND position < $2', [anchor.accountId, anchor.position]);
      await q.run("DELETE FROM audit_checkpoints WHERE account_id = $1 AND position = $2 AND kind <> 'anchor'", [anchor.accountId, anchor.position]);
      return n;
    });
  }

  async readChain(accountId: string, after: number, limit: number): Promise<ChainedAuditEvent[]> {
    return (await this.db.all<ChainRow>('SELECT * FROM audit_events WHERE account_id = $1 AND chain_position > $2 ORDER BY chain_position LIMIT $3', [accountId, after, limit]))
      .map(chainedFromRow);
  }

  async chainRange(accountId: string, from: number, to: number): Promise<{ first: number; last: number } | undefined> {
    const r = await this.db.get<{ first: number | null; last: number | null }>(
      `SELECT (SELECT MIN(chain_position) FROM audit_events WHERE account_id = $1 AND created_at >= $2) AS first,
              (SELECT MAX(chain_position) FROM audit_events WHERE account_id = $1 AND created_at < $3) AS last`, [accountId, from, to]);
    return r && r.first !== null && r.last !== null && r.first <= r.last ? { first: r.first, last: r.last } : undefined;
  }

  async claimExport(sink: string, now: number, leaseMs: number, limit: number): Promise<ExportClaim[]> {
    return this.db.tx(async (q) => {
      // Every account with a chain gets a cursor row first, so that claims can lock it.
      await q.run(`INSERT INTO audit_export_cursors (sink, account_id, position) SELECT $1, account_id, 0 FROM audit_chain_heads WHERE position > 0
                   ON CONFLICT (sink, account_id) DO NOTHING`, [sink]);
      const rows = await q.all<{ account_id: string; after: number; head: number }>(
        `WITH due AS (
           SELECT c.account_id, c.position AS after, h.position AS head
             FROM audit_export_cursors c JOIN audit_chain_heads h ON h.account_id = c.account_id
            WHERE c.sink = $1 AND h.position > c.position AND (c.lease_until IS NULL OR c.lease_until <= $2)
            ORDER BY h.position - c.position DESC LIMIT $3
            FOR UPDATE OF c SKIP LOCKED)
         UPDATE audit_export_cursors c SET lease_until = $4 FROM due WHERE c.sink = $1 AND c.account_id = due.account_id
         RETURNING due.account_id, due.after, due.head`, [sink, now, limit, now + leaseMs]);
      return rows.sort((a, b) => (b.head - b.after) - (a.head - a.after)).map((r) => ({ accountId: r.account_id, after: r.after, head: r.head }));
    });
  }

  async advanceExport(sink: string, moves: { accountId: string; from: number; to: number }[]): Promise<void> {
    await this.db.tx(async (q) => {
      for (const m of moves) {
        await q.run('UPDATE audit_export_cursors SET position = $1, lease_until = NULL WHERE sink = $2 AND account_id = $3 AND position = $4', [m.to, sink, m.accountId, m.from]);
      }
    });
  }

  async releaseExport(sink: string, accountIds: string[]): Promise<void> {
    if (accountIds.length === 0) return;
    await this.db.run('UPDATE audit_export_cursors SET lease_until = NULL WHERE sink = $1 AND account_id = ANY($2::text[])', [sink, accountIds]);
  }

  async exportBacklog(sink: string): Promise<number> {
    return Number((await this.db.get<{ n: string | number | null }>(
      `SELECT SUM(h.position - COALESCE(c.position, 0)) AS n FROM audit_chain_heads h
         LEFT JOIN audit_export_cursors c ON c.sink = $1 AND c.account_id = h.account_id`, [sink]))?.n ?? 0);
  }
}
