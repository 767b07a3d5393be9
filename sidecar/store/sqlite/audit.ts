/**
 * SQLite implementation of {@link AuditStore}: chain heads, signed
 * checkpoints, retention that leaves a signed anchor, chain-ordered reads for
 * exports, the push-export cursors (with leases, so the same code is right when
 * several processes share a database) and the service signing keys. The rows'
 * links are written by `audit-append.ts` inside the decision's transaction.
 */
import type { Db } from './db.js';
import type {
  AuditChainHead, AuditCheckpointRecord, AuditStore, ChainedAuditEvent, ExportClaim, PrunePoint, ServiceKeyRecord,
} from '../types.js';
import { checkpointFromRow, headFromRow, serviceKeyFromRow as keyFromRow, chainedFromRow } from '../rows-audit.js';
import type { ChainRow, CheckpointRow, HeadRow, ServiceKeyRow as KeyRow } from '../rows-audit.js';

/** The chained-row mapping (rows-audit.ts), for the audit source. */
export { chainedFromRow } from '../rows-audit.js';

/** Audit evidence on SQLite. */
export class SqliteAuditStore implements AuditStore {
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  async ensureServiceKey(c: ServiceKeyRecord): Promise<ServiceKeyRecord> {
    return this.db.tx(() => {
      this.db.run('INSERT INTO service_keys (id, purpose, public_key, secret_enc, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(purpose) DO NOTHING',
        c.id, c.purpose, c.publicKey, Buffer.from(c.secretEnc), c.createdAt);
      return keyFromRow(this.db.get<KeyRow>('SELECT * FROM service_keys WHERE purpose = ?', c.purpose)!);
    });
  }

  async serviceKeys(): Promise<ServiceKeyRecord[]> {
    return this.db.all<KeyRow>('SELECT * FROM service_keys ORDER BY created_at, id').map(keyFromRow);
  }

  async getHead(accountId: string): Promise<AuditChainHead | undefined> {
    const r = this.db.get<HeadRow>('SELECT * FROM audit_chain_heads WHERE account_id = ?', accountId);
    return r && headFromRow(r);
  }

  async headsDue(q: { rows: number; olderThan: number; limit: number }): Promise<AuditChainHead[]> {
    return this.db.all<HeadRow>(
      `SELECT * FROM audit_chain_heads WHERE position > checkpoint_position AND (position - checkpoint_position >= ? OR checkpoint_at <= ?)
        ORDER BY checkpoint_at LIMIT ?`, q.rows, q.olderThan, q.limit,
    ).map(headFromRow);
  }

  async insertCheckpoint(c: AuditCheckpointRecord): Promise<boolean> {
    return this.db.tx(() => this.insertCheckpointTx(c));
  }

  /** The checkpoint insert inside an open transaction. */
  private insertCheckpointTx(c: AuditCheckpointRecord): boolean {
    const row = this.db.get<{ hash: string | null }>('SELECT hash FROM audit_events WHERE account_id = ? AND chain_position = ?', c.accountId, c.position);
    if (row?.hash !== c.head) return false;
    const stored = this.db.run(
      `INSERT INTO audit_checkpoints (id, account_id, position, head, kind, key_id, signature, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(account_id, position, kind) DO NOTHING`,
      c.id, c.accountId, c.position, c.head, c.kind, c.keyId, JSON.stringify(c.signature), c.createdAt,
    ) === 1;
    if (stored) {
      this.db.run('UPDATE audit_chain_heads SET checkpoint_position = MAX(checkpoint_position, ?), checkpoint_at = MAX(checkpoint_at, ?) WHERE account_id = ?',
        c.position, c.createdAt, c.accountId);
    }
    return stored;
  }

  async listCheckpoints(q: { accountId: string; fromPosition?: number; toPosition?: number }): Promise<AuditCheckpointRecord[]> {
    return this.db.all<CheckpointRow>(
      'SELECT * FROM audit_checkpoints WHERE account_id = ? AND position >= ? AND position <= ? ORDER BY position, created_at',
      q.accountId, q.fromPosition ?? 0, q.toPosition ?? Number.MAX_SAFE_INTEGER,
    ).map(checkpointFromRow);
  }

  async prunePoints(olderThan: number, limit: number): Promise<PrunePoint[]> {
    // Per account: the row before the first row at or after the cut-off (or the last row, if all are older).
    return this.db.all<{ account_id: string; position: number; hash: string }>(
      `SELECT e.account_id, e.chain_position AS position, e.hash FROM (
         SELECT a.account_id, COALESCE((SELECT MIN(n.chain_position) - 1 FROM audit_events n
                  WHERE n.account_id = a.account_id AND n.chain_position IS NOT NULL AND n.created_at >= ?), MAX(a.chain_position)) AS cut
           FROM audit_events a WHERE a.chain_position IS NOT NULL AND a.created_at < ? GROUP BY a.account_id
       ) p JOIN audit_events e ON e.account_id = p.account_id AND e.chain_position = p.cut
       ORDER BY e.account_id LIMIT ?`, olderThan, olderThan, limit,
    ).map((r) => ({ accountId: r.account_id, position: r.position, hash: r.hash }));
  }

  async pruneTo(anchor: AuditCheckpointRecord): Promise<number> {
    if (anchor.kind !== 'anchor') throw new TypeError('pruneTo: the checkpoint must be of kind anchor');
    return this.db.tx(() => {
      if (!this.insertCheckpointTx(anchor)
        && this.db.get('SELECT 1 AS x FROM audit_checkpoints WHERE account_id = ? AND position = ? AND kind = ? AND head = ?', anchor.accountId, anchor.position, 'anchor', anchor.head) === undefined) {
        return -1;
      }
      const n = this.db.run('DELETE FROM audit_events WHERE account_id = ? AND chain_position <= ?', anchor.accountId, anchor.position);
      this.db.run('DELETE FROM audit_checkpoints WHERE account_id = ? AND position < ?', anchor.accountId, anchor.position);
      this.db.run("DELETE FROM audit_checkpoints WHERE account_id = ? AND position = ? AND kind <> 'anchor'", anchor.accountId, anchor.position);
      return n;
    });
  }

  async readChain(accountId: string, after: number, limit: number): Promise<ChainedAuditEvent[]> {
    return this.db.all<ChainRow>('SELECT * FROM audit_events WHERE account_id = ? AND chain_position > ? ORDER BY chain_position LIMIT ?', accountId, after, limit)
      .map(chainedFromRow);
  }

  async chainRange(accountId: string, from: number, to: number): Promise<{ first: number; last: number } | undefined> {
    const r = this.db.get<{ first: number | null; last: number | null }>(
      `SELECT (SELECT MIN(chain_position) FROM audit_events WHERE account_id = ? AND created_at >= ?) AS first,
              (SELECT MAX(chain_position) FROM audit_events WHERE account_id = ? AND created_at < ?) AS last`, accountId, from, accountId, to);
    return r && r.first !== null && r.last !== null && r.first <= r.last ? { first: r.first, last: r.last } : undefined;
  }

  async claimExport(sink: string, now: number, leaseMs: number, limit: number): Promise<ExportClaim[]> {
    return this.db.tx(() => {
      const rows = this.db.all<{ account_id: string; after: number; head: number }>(
        `SELECT h.account_id, COALESCE(c.position, 0) AS after, h.position AS head
           FROM audit_chain_heads h LEFT JOIN audit_export_cursors c ON c.sink = ? AND c.account_id = h.account_id
          WHERE h.position > COALESCE(c.position, 0) AND (c.lease_until IS NULL OR c.lease_until <= ?)
          ORDER BY h.position - COALESCE(c.position, 0) DESC LIMIT ?`, sink, now, limit);
      for (const r of rows) {
        this.db.run(`INSERT INTO audit_export_cursors (sink, account_id, position, lease_until) VALUES (?, ?, ?, ?)
                     ON CONFLICT(sink, account_id) DO UPDATE SET lease_until = excluded.lease_until`, sink, r.account_id, r.after, now + leaseMs);
      }
      return rows.map((r) => ({ accountId: r.account_id, after: r.after, head: r.head }));
    });
  }

  async advanceExport(sink: string, moves: { accountId: string; from: number; to: number }[]): Promise<void> {
    this.db.tx(() => {
      for (const m of moves) {
        this.db.run('UPDATE audit_export_cursors SET position = ?, lease_until = NULL WHERE sink = ? AND account_id = ? AND position = ?', m.to, sink, m.accountId, m.from);
      }
    });
  }

  async releaseExport(sink: string, accountIds: string[]): Promise<void> {
    this.db.tx(() => {
      for (const id of accountIds) this.db.run('UPDATE audit_export_cursors SET lease_until = NULL WHERE sink = ? AND account_id = ?', sink, id);
    });
  }

  async exportBacklog(sink: string): Promise<number> {
    return this.db.get<{ n: number | null }>(
      `SELECT SUM(h.position - COALESCE(c.position, 0)) AS n FROM audit_chain_heads h
         LEFT JOIN audit_export_cursors c ON c.sink = ? AND c.account_id = h.account_id`, sink)?.n ?? 0;
  }
}
