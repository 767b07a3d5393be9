/**
 * The audit append: writes audit rows linked into their account's hash chain
 * (`src/audit-chain.ts`), inside the caller's transaction. With `chain` false
 * (SIDECAR_AUDIT_CHAIN=off) rows are written without links and the head stays
 * where it is; `audit verify` reports such rows. A row that cannot be encoded
 * canonically (a float in `details`) throws, and the transaction writes nothing.
 *
 * SQLite runs one write transaction at a time, so the link is computed here and
 * reading the head and moving it cannot race. On PostgreSQL the database does
 * the append (`authz_append_audits`, postgres/migrations.ts version 2): it
 * locks the account's chain head (several replicas append at once) and computes
 * each link frame from the content hash computed here, with the one definition
 * in src/. The unique index on (account_id, chain_position) refuses a second
 * row at one position on both. `appendAuditsByAccount` appends the rows of several accounts.
 */
import { AUDIT_LINK_TAG, chainAfter, contentHash } from '../../../src/audit-chain.js';
import { dialectOf, get, list, run, sql } from './core.js';
import type { Work } from './core.js';
import type { AuditEventRecord } from '../types.js';

/**
 * The PostgreSQL append's arguments for `rows` (all of one account, in order), without the account:
 * ids, types, connections, agents, certificates, scopes, details, times, content hashes, link tag and
 * `chain`. Throws a TypeError when the rows are of several accounts or a row cannot be encoded
 * canonically, before anything is written.
 */
export function appendArgs(rows: readonly AuditEventRecord[], chain: boolean): unknown[] {
  const accountId = rows[0]?.accountId;
  if (rows.some((r) => r.accountId !== accountId)) throw new TypeError('appendAudits: the rows must be of one account');
  const col = <T>(f: (r: AuditEventRecord) => T): T[] => rows.map(f);
  return [col((r) => r.id), col((r) => r.eventType), col((r) => r.connectionId), col((r) => r.agentId),
    col((r) => r.certId),
    col((r) => r.requiredScope), col((r) => JSON.stringify(r.details)), col((r) => r.createdAt),
    chain ? col((r) => contentHash(r).toString('hex')) : [], AUDIT_LINK_TAG, chain];
}

/** Appends `rows` (all of one account, in order) to the account's chain. */
export function* appendAudits(rows: readonly AuditEventRecord[], chain: boolean): Work<void> {
  if (rows.length === 0) return;
  if ((yield* dialectOf()) === 'pg') {
    const [ids, ...rest] = appendArgs(rows, chain);
    yield* run(sql`SELECT authz_append_audits(${list([ids, rows[0]!.accountId, ...rest])})`);
    return;
  }
  for (const a of rows) {
    const head = chain
      ? yield* get<{ position: number; hash: string }>(sql`SELECT position, hash FROM audit_chain_heads
        WHERE account_id = ${a.accountId}`)
      : undefined;
    const link = chain ? chainAfter(head ?? null, a) : { position: null, prevHash: null, hash: null };
    yield* run(sql`INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id,
      required_scope, details, created_at,
      chain_position, prev_hash, hash) VALUES (${a.id}, ${a.accountId}, ${a.eventType}, ${a.connectionId}, ${a.agentId},
        ${a.certId},
      ${a.requiredScope}, ${JSON.stringify(a.details)}, ${a.createdAt}, ${link.position}, ${link.prevHash},
        ${link.hash})`);
    if (!chain) continue;
    if (head) yield* run(sql`UPDATE audit_chain_heads SET position = ${link.position}, hash = ${link.hash}
      WHERE account_id = ${a.accountId}`);
    else {
      yield* run(sql`INSERT INTO audit_chain_heads (account_id, position, hash, checkpoint_position, checkpoint_at)
        VALUES (${a.accountId}, ${link.position}, ${link.hash}, 0, ${a.createdAt})`);
    }
  }
}

/**
 * Appends `rows` of one or more accounts, each account's rows in their given order, the accounts in
 * id order: two transactions that both touch two chains lock their heads in one order (no deadlock
 * on PostgreSQL).
 */
export function* appendAuditsByAccount(rows: readonly AuditEventRecord[], chain: boolean): Work<void> {
  const byAccount = new Map<string, AuditEventRecord[]>();
  for (const r of rows) byAccount.set(r.accountId, [...(byAccount.get(r.accountId) ?? []), r]);
  for (const id of [...byAccount.keys()].sort()) yield* appendAudits(byAccount.get(id)!, chain);
}
