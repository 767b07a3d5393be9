/**
 * The SQLite audit append: writes one audit row linked into its account's hash
 * chain (`src/audit-chain.ts`), inside the caller's transaction. SQLite runs one
 * write transaction at a time, so reading the head and moving it cannot race;
 * the unique index on (account_id, chain_position) would refuse a second row at
 * one position anyway.
 */
import type { Db } from './db.js';
import type { AuditEventRecord } from '../types.js';
import { chainAfter } from '../../../src/audit-chain.js';

const INSERT = `INSERT INTO audit_events (id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at, chain_position, prev_hash, hash)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/**
 * Appends `a` to its account's chain (synchronous: call it inside `db.tx` / `db.groupTx`).
 * With `chain` false (SIDECAR_AUDIT_CHAIN=off) the row is written without links and the head
 * stays where it is; `audit verify` reports such rows. Throws when the row cannot be encoded
 * canonically (a float in `details`): the transaction then writes nothing.
 */
export function appendAudit(db: Db, a: AuditEventRecord, chain: boolean): void {
  const details = JSON.stringify(a.details);
  if (!chain) {
    db.run(INSERT, a.id, a.accountId, a.eventType, a.connectionId, a.agentId, a.certId, a.requiredScope, details, a.createdAt, null, null, null);
    return;
  }
  const head = db.get<{ position: number; hash: string }>('SELECT position, hash FROM audit_chain_heads WHERE account_id = ?', a.accountId);
  const link = chainAfter(head ?? null, a);
  db.run(INSERT, a.id, a.accountId, a.eventType, a.connectionId, a.agentId, a.certId, a.requiredScope, details, a.createdAt, link.position, link.prevHash, link.hash);
  if (head) db.run('UPDATE audit_chain_heads SET position = ?, hash = ? WHERE account_id = ?', link.position, link.hash, a.accountId);
  else db.run('INSERT INTO audit_chain_heads (account_id, position, hash, checkpoint_position, checkpoint_at) VALUES (?, ?, ?, 0, ?)', a.accountId, link.position, link.hash, a.createdAt);
}
