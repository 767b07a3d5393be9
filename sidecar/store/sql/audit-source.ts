/**
 * The reads of the offline verifier's {@link AuditSource}, written once for
 * both engines; each engine opens its read-only connection (a SQLite file
 * opened read-only, or one PostgreSQL `REPEATABLE READ READ ONLY` snapshot)
 * and answers them. Rows are read in pages in (position, seq) order, so a
 * large trail is never held in memory at once, and a position that repeats
 * (the unique index dropped) still reaches the checker. Text is ordered
 * byte-wise on both engines (PostgreSQL's "C" collation).
 */
import { all, get, pick, sql } from './core.js';
import type { Work } from './core.js';
import type { AuditSource, ChainedAuditEvent } from '../types.js';
import { sourceCheckpointFromRow, sourceRowFromRow } from '../rows-audit.js';
import type { ChainRow, CheckpointRow } from '../rows-audit.js';

/** Answers one read-only work on the engine's connection. */
export type Reader = <T>(work: Work<T>) => Promise<T>;

/** Rows per page of one account's chain. */
const PAGE = 2000;
const C = pick('', ' COLLATE "C"');

/** The audit source over `read`; `close` ends the engine's connection. */
export function auditSource(read: Reader, close: () => Promise<void>): AuditSource {
  return {
    async serviceKeys() {
      return (await read(all<{ id: string; public_key: string }>(sql`SELECT id, public_key FROM service_keys
        ORDER BY created_at, id${C}`)))
        .map((k) => ({ id: k.id, publicKey: k.public_key }));
    },
    async accounts() {
      return (await read(all<{ account_id: string }>(sql`SELECT account_id FROM (SELECT account_id
        FROM audit_chain_heads
        UNION SELECT account_id FROM audit_events UNION SELECT account_id FROM audit_checkpoints) a
          ORDER BY account_id${C}`))).map((r) => r.account_id);
    },
    async head(accountId) {
      return (await read(get<{ position: number; hash: string }>(sql`SELECT position, hash FROM audit_chain_heads
        WHERE account_id = ${accountId}`))) ?? null;
    },
    async checkpoints(accountId) {
      return (await read(all<CheckpointRow>(sql`SELECT * FROM audit_checkpoints WHERE account_id = ${accountId}
        ORDER BY position, created_at, id${C}`)))
        .map(sourceCheckpointFromRow);
    },
    async *rows(accountId): AsyncIterable<ChainedAuditEvent> {
      let after = { position: -1, seq: -1 };
      for (;;) {
        const page = await read(all<ChainRow & { seq: number }>(sql`SELECT * FROM audit_events
          WHERE account_id = ${accountId}
          AND chain_position IS NOT NULL AND (chain_position, seq) > (${after.position}, ${after.seq})
            ORDER BY chain_position, seq LIMIT ${PAGE}`));
        for (const r of page) yield sourceRowFromRow(r);
        if (page.length < PAGE) return;
        const last = page[page.length - 1]!;
        after = { position: last.chain_position, seq: last.seq };
      }
    },
    async unchained(accountId) {
      const r = (await read(get<{ n: number; first: string | null }>(sql`SELECT CAST(COUNT(*) AS INTEGER) AS n,
        MIN(id${C}) AS first
        FROM audit_events WHERE account_id = ${accountId} AND (chain_position IS NULL OR hash IS NULL
          OR prev_hash IS NULL)`)))!;
      return { count: r.n, firstId: r.first };
    },
    close,
  };
}
