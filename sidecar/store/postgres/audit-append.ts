/**
 * The PostgreSQL audit append: writes audit rows linked into their account's
 * hash chain (`src/audit-chain.ts`), inside the caller's transaction. Several
 * replicas append at once, so the head is locked first: an upsert that creates
 * a missing head (position 0) or, for an existing one, locks it and returns it
 * as it is. Appends to one account are thereby serialized until their
 * transaction ends; the unique index on (account_id, chain_position) would
 * refuse a second row at one position anyway.
 */
import { GENESIS_HASH, chainAfter } from '../../../src/audit-chain.js';
import type { Querier } from './db.js';
import type { AuditEventRecord } from '../types.js';

const COLUMNS = 'id, account_id, event_type, connection_id, agent_id, cert_id, required_scope, details, created_at, chain_position, prev_hash, hash';

/**
 * Appends `rows` (all of one account, in order) to the account's chain; with `chain` false
 * (SIDECAR_AUDIT_CHAIN=off) they are written without links and the head stays. Throws when a
 * row cannot be encoded canonically (a float in `details`): the transaction then writes nothing.
 */
export async function appendAudits(q: Querier, rows: readonly AuditEventRecord[], chain: boolean): Promise<void> {
  if (rows.length === 0) return;
  const accountId = rows[0]!.accountId;
  if (rows.some((r) => r.accountId !== accountId)) throw new TypeError('appendAudits: the rows must be of one account');
  const params: unknown[] = [];
  const tuples: string[] = [];
  const add = (r: AuditEventRecord, link: { position: number; prevHash: string; hash: string } | null): void => {
    const v = [r.id, r.accountId, r.eventType, r.connectionId, r.agentId, r.certId, r.requiredScope, JSON.stringify(r.details), r.createdAt,
      link?.position ?? null, link?.prevHash ?? null, link?.hash ?? null];
    tuples.push(`(${v.map((x) => { params.push(x); return `$${params.length}`; }).join(', ')})`);
  };
  if (!chain) {
    for (const r of rows) add(r, null);
    await q.run(`INSERT INTO audit_events (${COLUMNS}) VALUES ${tuples.join(', ')}`, params);
    return;
  }
  const locked = (await q.get<{ position: number; hash: string }>(
    `INSERT INTO audit_chain_heads AS h (account_id, position, hash, checkpoint_position, checkpoint_at) VALUES ($1, 0, $2, 0, $3)
     ON CONFLICT (account_id) DO UPDATE SET account_id = h.account_id RETURNING h.position, h.hash`,
    [accountId, GENESIS_HASH, rows[0]!.createdAt]))!;
  let head: { position: number; hash: string } | null = locked.position === 0 ? null : locked;
  for (const r of rows) {
    const link = chainAfter(head, r);
    add(r, link);
    head = { position: link.position, hash: link.hash };
  }
  await q.run(`INSERT INTO audit_events (${COLUMNS}) VALUES ${tuples.join(', ')}`, params);
  await q.run('UPDATE audit_chain_heads SET position = $1, hash = $2 WHERE account_id = $3', [head!.position, head!.hash, accountId]);
}
