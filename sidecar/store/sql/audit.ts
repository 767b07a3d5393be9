/**
 * {@link AuditStore} on either engine: chain heads, signed checkpoints,
 * retention that leaves a signed anchor, chain-ordered reads for exports, the
 * push-export cursors (with leases) and the service signing keys. The rows'
 * links are written by audit-append.ts inside the decision's transaction.
 * Several PostgreSQL replicas run the checkpoint and export jobs at once: a
 * checkpoint is stored once per position and kind (unique index), and export
 * claims lock cursor rows with `FOR UPDATE SKIP LOCKED`, so each account's rows
 * go to one exporter per lease.
 */
import { all, bytes, get, list, pick, run, sql } from './core.js';
import type { Runner, Work } from './core.js';
import type {
  AuditChainHead, AuditCheckpointRecord, AuditStore, ChainedAuditEvent, ExportClaim, PrunePoint, ServiceKeyRecord,
} from '../types.js';
import { chainedFromRow, checkpointFromRow, headFromRow, serviceKeyFromRow } from '../rows-audit.js';
import type { ChainRow, CheckpointRow, HeadRow, ServiceKeyRow } from '../rows-audit.js';

const GREATEST = pick('MAX', 'GREATEST');

/** Stores a checkpoint inside an open transaction (see {@link AuditStore.insertCheckpoint}). */
function* insertCheckpoint(c: AuditCheckpointRecord): Work<boolean> {
  const row = yield* get<{ hash: string | null }>(sql`SELECT hash FROM audit_events WHERE account_id = ${c.accountId}
    AND chain_position = ${c.position}`);
  if (row?.hash !== c.head) return false;
  const stored = (yield* run(sql`INSERT INTO audit_checkpoints (id, account_id, position, head, kind, key_id, signature,
    created_at)
    VALUES (${c.id}, ${c.accountId}, ${c.position}, ${c.head}, ${c.kind}, ${c.keyId}, ${JSON.stringify(c.signature)},
      ${c.createdAt})
    ON CONFLICT (account_id, position, kind) DO NOTHING`)) === 1;
  if (stored) {
    yield* run(sql`UPDATE audit_chain_heads SET checkpoint_position = ${GREATEST}(checkpoint_position, ${c.position}),
      checkpoint_at = ${GREATEST}(checkpoint_at, ${c.createdAt}) WHERE account_id = ${c.accountId}`);
  }
  return stored;
}

type Claim = { account_id: string; after: number; head: number };

/** Audit evidence. */
export class SqlAuditStore implements AuditStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async ensureServiceKey(c: ServiceKeyRecord): Promise<ServiceKeyRecord> {
    return this.r.write((function* () {
      yield* run(sql`INSERT INTO service_keys (id, purpose, public_key, secret_enc, created_at)
        VALUES (${c.id}, ${c.purpose}, ${c.publicKey}, ${bytes(c.secretEnc)}, ${c.createdAt}) ON CONFLICT (purpose)
          DO NOTHING`);
      return serviceKeyFromRow((yield* get<ServiceKeyRow>(sql`SELECT * FROM service_keys
        WHERE purpose = ${c.purpose}`))!);
    })());
  }

  async serviceKeys(): Promise<ServiceKeyRecord[]> {
    return (await this.r.read(all<ServiceKeyRow>(sql`SELECT * FROM service_keys
      ORDER BY created_at, id`))).map(serviceKeyFromRow);
  }

  async getHead(accountId: string): Promise<AuditChainHead | undefined> {
    const row = await this.r.read(get<HeadRow>(sql`SELECT * FROM audit_chain_heads WHERE account_id = ${accountId}
      AND position > 0`));
    return row && headFromRow(row);
  }

  async headsDue(q: { rows: number; olderThan: number; limit: number }): Promise<AuditChainHead[]> {
    return (await this.r.read(all<HeadRow>(sql`SELECT * FROM audit_chain_heads WHERE position > checkpoint_position
      AND (position - checkpoint_position >= ${q.rows} OR checkpoint_at <= ${q.olderThan}) ORDER BY checkpoint_at
        LIMIT ${q.limit}`))).map(headFromRow);
  }

  async insertCheckpoint(c: AuditCheckpointRecord): Promise<boolean> {
    return this.r.tx(insertCheckpoint(c));
  }

  async listCheckpoints(
    q: { accountId: string; fromPosition?: number; toPosition?: number },
  ): Promise<AuditCheckpointRecord[]> {
    return (await this.r.read(all<CheckpointRow>(sql`SELECT * FROM audit_checkpoints WHERE account_id = ${q.accountId}
      AND position >= ${q.fromPosition ?? 0} AND position <= ${q.toPosition ?? Number.MAX_SAFE_INTEGER}
        ORDER BY position, created_at`)))
      .map(checkpointFromRow);
  }

  async prunePoints(olderThan: number, limit: number): Promise<PrunePoint[]> {
    // Per account: the row before the first row at or after the cut-off (or the last row, if all are older).
    const rows = await this.r.read(all<{ account_id: string; position: number; hash: string }>(sql`SELECT e.account_id,
         e.chain_position AS position, e.hash FROM (
         SELECT a.account_id, COALESCE((SELECT MIN(n.chain_position) - 1 FROM audit_events n
                  WHERE n.account_id = a.account_id AND n.chain_position IS NOT NULL
                    AND n.created_at >= ${olderThan}), MAX(a.chain_position)) AS cut
           FROM audit_events a WHERE a.chain_position IS NOT NULL AND a.created_at < ${olderThan} GROUP BY a.account_id
       ) p JOIN audit_events e ON e.account_id = p.account_id AND e.chain_position = p.cut
       ORDER BY e.account_id ${pick('', 'COLLATE "C" ')}LIMIT ${limit}`));
    return rows.map((x) => ({ accountId: x.account_id, position: x.position, hash: x.hash }));
  }

  async pruneTo(anchor: AuditCheckpointRecord): Promise<number> {
    if (anchor.kind !== 'anchor') throw new TypeError('pruneTo: the checkpoint must be of kind anchor');
    const { accountId, position } = anchor;
    return this.r.tx((function* () {
      if (!(yield* insertCheckpoint(anchor)) && (yield* get(sql`SELECT 1 AS x FROM audit_checkpoints
        WHERE account_id = ${accountId}
          AND position = ${position} AND kind = 'anchor' AND head = ${anchor.head}`)) === undefined) return -1;
      const n = yield* run(sql`DELETE FROM audit_events WHERE account_id = ${accountId}
        AND chain_position <= ${position}`);
      yield* run(sql`DELETE FROM audit_checkpoints WHERE account_id = ${accountId} AND position < ${position}`);
      yield* run(sql`DELETE FROM audit_checkpoints WHERE account_id = ${accountId} AND position = ${position}
        AND kind <> 'anchor'`);
      return n;
    })());
  }

  async readChain(accountId: string, after: number, limit: number): Promise<ChainedAuditEvent[]> {
    return (await this.r.read(all<ChainRow>(sql`SELECT * FROM audit_events WHERE account_id = ${accountId}
      AND chain_position > ${after}
      ORDER BY chain_position LIMIT ${limit}`))).map(chainedFromRow);
  }

  async chainRange(accountId: string, from: number, to: number): Promise<{ first: number; last: number } | undefined> {
    const r = await this.r.read(get<{ first: number | null; last: number | null }>(sql`SELECT
      (SELECT MIN(chain_position) FROM audit_events WHERE account_id = ${accountId} AND created_at >= ${from}) AS first,
      (SELECT MAX(chain_position) FROM audit_events WHERE account_id = ${accountId} AND created_at < ${to}) AS last`));
    return r && r.first !== null && r.last !== null && r.first <= r.last ? { first: r.first, last: r.last } : undefined;
  }

  async claimExport(sink: string, now: number, leaseMs: number, limit: number): Promise<ExportClaim[]> {
    const pg = this.r.dialect === 'pg';
    const rows = await this.r.tx((function* () {
      if (pg) {
        // Every account with a chain gets a cursor row first, so that claims can lock it.
        yield* run(sql`INSERT INTO audit_export_cursors (sink, account_id, position) SELECT ${sink}, account_id, 0
          FROM audit_chain_heads
          WHERE position > 0 ON CONFLICT (sink, account_id) DO NOTHING`);
        return yield* all<Claim>(sql`WITH due AS (
           SELECT c.account_id, c.position AS after, h.position AS head
             FROM audit_export_cursors c JOIN audit_chain_heads h ON h.account_id = c.account_id
            WHERE c.sink = ${sink} AND h.position > c.position AND (c.lease_until IS NULL OR c.lease_until <= ${now})
            ORDER BY h.position - c.position DESC LIMIT ${limit}
            FOR UPDATE OF c SKIP LOCKED)
         UPDATE audit_export_cursors c SET lease_until = ${now + leaseMs} FROM due WHERE c.sink = ${sink}
           AND c.account_id = due.account_id
         RETURNING due.account_id, due.after, due.head`);
      }
      const due = yield* all<Claim>(sql`SELECT h.account_id, COALESCE(c.position, 0) AS after, h.position AS head
           FROM audit_chain_heads h LEFT JOIN audit_export_cursors c ON c.sink = ${sink} AND c.account_id = h.account_id
          WHERE h.position > COALESCE(c.position, 0) AND (c.lease_until IS NULL OR c.lease_until <= ${now})
          ORDER BY h.position - COALESCE(c.position, 0) DESC LIMIT ${limit}`);
      for (const x of due) {
        yield* run(sql`INSERT INTO audit_export_cursors (sink, account_id, position, lease_until)
          VALUES (${sink}, ${x.account_id}, ${x.after},
          ${now + leaseMs}) ON CONFLICT (sink, account_id) DO UPDATE SET lease_until = excluded.lease_until`);
      }
      return due;
    })());
    return rows.sort((a, b) => (b.head - b.after) - (a.head - a.after))
      .map((x) => ({ accountId: x.account_id, after: x.after, head: x.head }));
  }

  async advanceExport(sink: string, moves: { accountId: string; from: number; to: number }[]): Promise<void> {
    await this.r.tx((function* () {
      for (const m of moves) {
        yield* run(sql`UPDATE audit_export_cursors SET position = ${m.to}, lease_until = NULL WHERE sink = ${sink}
          AND account_id = ${m.accountId} AND position = ${m.from}`);
      }
    })());
  }

  async releaseExport(sink: string, accountIds: string[]): Promise<void> {
    if (accountIds.length === 0) return;
    await this.r.write(run(sql`UPDATE audit_export_cursors SET lease_until = NULL WHERE sink = ${sink}
      AND account_id IN (${list(accountIds)})`));
  }

  async exportBacklog(sink: string): Promise<number> {
    return Number((await this.r.read(get<{ n: string | number | null }>(sql`SELECT SUM(h.position - COALESCE(c.position,
      0)) AS n
      FROM audit_chain_heads h LEFT JOIN audit_export_cursors c ON c.sink = ${sink}
        AND c.account_id = h.account_id`)))?.n ?? 0);
  }
}
