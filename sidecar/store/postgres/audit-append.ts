/**
 * The PostgreSQL audit append: writes audit rows linked into their account's
 * hash chain (`src/audit-chain.ts`), inside the caller's transaction. The
 * database does the append (`authz_append_audits`, migrations.ts version 2):
 * it locks the account's chain head (several replicas append at once), so
 * appends to one account are serialized until their transaction ends, and
 * computes each link frame from the row's content hash. The content hash (the
 * canonical JSON) is computed here, with the one definition in src/.
 */
import { AUDIT_LINK_TAG, contentHash } from '../../../src/audit-chain.js';
import type { Querier } from './db.js';
import type { AuditEventRecord } from '../types.js';

/** The parameter list of `authz_append_audits` after its account (`$1`, `$3`…`$12` there). */
export const APPEND_PARAMS = 11;

/**
 * The append's arguments for `rows` (all of one account, in order), without the account: ids,
 * types, connections, agents, certificates, scopes, details, times, content hashes, link tag and
 * `chain`. Throws a TypeError when the rows are of several accounts or a row cannot be encoded
 * canonically (a float in `details`), before anything is written.
 */
export function appendArgs(rows: readonly AuditEventRecord[], chain: boolean): unknown[] {
  const accountId = rows[0]?.accountId;
  if (rows.some((r) => r.accountId !== accountId)) throw new TypeError('appendAudits: the rows must be of one account');
  const col = <T>(f: (r: AuditEventRecord) => T): T[] => rows.map(f);
  return [col((r) => r.id), col((r) => r.eventType), col((r) => r.connectionId), col((r) => r.agentId), col((r) => r.certId),
    col((r) => r.requiredScope), col((r) => JSON.stringify(r.details)), col((r) => r.createdAt),
    chain ? col((r) => contentHash(r).toString('hex')) : [], AUDIT_LINK_TAG, chain];
}

/**
 * Appends `rows` (all of one account, in order) to the account's chain; with `chain` false
 * (SIDECAR_AUDIT_CHAIN=off) they are written without links and the head stays. Throws when a
 * row cannot be encoded canonically (a float in `details`): the transaction then writes nothing.
 */
export async function appendAudits(q: Querier, rows: readonly AuditEventRecord[], chain: boolean): Promise<void> {
  if (rows.length === 0) return;
  const [ids, ...rest] = appendArgs(rows, chain);
  const params = [ids, rows[0]!.accountId, ...rest];
  await q.run(`SELECT authz_append_audits(${params.map((_, i) => `$${i + 1}`).join(', ')})`, params);
}
