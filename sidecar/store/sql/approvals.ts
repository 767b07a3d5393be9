/**
 * {@link ApprovalStore} and {@link UsageStore} on either engine: step-up
 * approvals (each state change with its chained audit row and outbox event in
 * one transaction; a decision and the expiry job race safely, each change being
 * a conditional UPDATE) and the usage counters of budgets and rate limits
 * (debited inside the verify commit, see the engines' commit).
 */
import { SKIP_LOCKED, all, get, join, run, sql } from './core.js';
import type { Runner, Work } from './core.js';
import { insertOutboxEvent } from './outbox.js';
import { appendAudits } from './audit-append.js';
import type { ApprovalChange, ApprovalRecord, ApprovalState, ApprovalStore, UsageStore } from '../types.js';
import { approvalFromRow } from '../rows-audit.js';
import type { ApprovalRow } from '../rows-audit.js';

/**
 * Inserts a new approval unless the certificate has a pending one with the same fingerprint
 * (the partial unique index `approvals_one_pending`); returns whether it was inserted. Run it
 * inside the caller's transaction.
 */
export function* insertApproval(a: ApprovalRecord): Work<boolean> {
  const operation = a.operation === null ? null : JSON.stringify(a.operation);
  return (yield* run(sql`INSERT INTO approvals (id, account_id, connection_id, platform_id, agent_id, cert_id, scope,
    fingerprint, context,
    operation, state, note, created_at, expires_at, decided_at, settled_at)
      VALUES (${a.id}, ${a.accountId}, ${a.connectionId}, ${a.platformId},
    ${a.agentId}, ${a.certId}, ${a.scope}, ${a.fingerprint}, ${JSON.stringify(a.context)}, ${operation}, ${a.state},
      ${a.note}, ${a.createdAt},
    ${a.expiresAt}, ${a.decidedAt}, ${a.settledAt}) ON CONFLICT DO NOTHING`)) === 1;
}

/** A state change of an approval, with its audit row and event when it changed the row. */
function* settle(change: Work<number>, c: ApprovalChange, chain: boolean): Work<boolean> {
  if ((yield* change) !== 1) return false;
  yield* appendAudits([c.audit], chain);
  yield* insertOutboxEvent(c.event);
  return true;
}

/** Step-up approvals. */
export class SqlApprovalStore implements ApprovalStore {
  private readonly r: Runner;
  private readonly chain: boolean;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(r: Runner, chain = true) {
    this.r = r;
    this.chain = chain;
  }

  async getApproval(id: string): Promise<ApprovalRecord | undefined> {
    const row = await this.r.read(get<ApprovalRow>(sql`SELECT * FROM approvals WHERE id = ${id}`));
    return row && approvalFromRow(row);
  }

  async listApprovals(
    q: { accountId: string; state?: ApprovalState; limit: number; before?: number },
  ): Promise<ApprovalRecord[]> {
    const where = [sql`account_id = ${q.accountId}`];
    if (q.state !== undefined) where.push(sql`state = ${q.state}`);
    if (q.before !== undefined) where.push(sql`seq < ${q.before}`);
    return (await this.r.read(all<ApprovalRow>(sql`SELECT * FROM approvals WHERE ${join(where, ' AND ')}
      ORDER BY seq DESC
      LIMIT ${Math.max(0, Math.floor(q.limit))}`))).map(approvalFromRow);
  }

  async findForOperation(
    certId: string, fingerprint: string, settledAfter: number,
  ): Promise<ApprovalRecord | undefined> {
    const row = await this.r.read(get<ApprovalRow>(sql`SELECT * FROM approvals WHERE cert_id = ${certId}
      AND fingerprint = ${fingerprint}
      AND (state IN ('pending', 'granted') OR settled_at > ${settledAfter}) ORDER BY seq DESC LIMIT 1`));
    return row && approvalFromRow(row);
  }

  async decideApproval(
    id: string,
    d: { state: 'granted' | 'denied'; now: number; grantExpiresAt: number; note: string | null },
    change: ApprovalChange,
  ): Promise<boolean> {
    const granted = d.state === 'granted';
    return this.r.tx(settle(run(sql`UPDATE approvals SET state = ${d.state}, decided_at = ${d.now},
      expires_at = CASE WHEN ${granted ? 1 : 0} = 1 THEN CAST(${d.grantExpiresAt} AS BIGINT) ELSE expires_at END, note =
        ${d.note},
      settled_at = ${granted ? null : d.now} WHERE id = ${id} AND state = 'pending'
        AND expires_at > ${d.now}`), change, this.chain));
  }

  async expireDue(
    now: number, limit: number, change: (a: ApprovalRecord) => ApprovalChange,
  ): Promise<ApprovalRecord[]> {
    const chain = this.chain;
    return this.r.tx((function* () {
      // SKIP LOCKED: replicas running the job at once take different rows.
      const due = (yield* all<ApprovalRow>(sql`SELECT * FROM approvals WHERE state IN ('pending', 'granted')
        AND expires_at <= ${now}
        ORDER BY expires_at, seq LIMIT ${Math.max(0, Math.floor(limit))}${SKIP_LOCKED}`)).map(approvalFromRow);
      const out: ApprovalRecord[] = [];
      for (const a of due) {
        const expire = run(sql`UPDATE approvals SET state = 'expired', settled_at = expires_at WHERE id = ${a.id}
          AND state = ${a.state}`);
        if (yield* settle(expire, change(a), chain)) out.push(a);
      }
      return out;
    })());
  }
}

/** Usage counters of budgets and rate limits. */
export class SqlUsageStore implements UsageStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async usage(certId: string, counters: { kind: 'budget' | 'calls'; windowStart: number }[]): Promise<number[]> {
    if (counters.length === 0) return [];
    const which = join(counters.map((c) => sql`(kind = ${c.kind} AND window_start = ${c.windowStart})`), ' OR ');
    const rows = await this.r.read(all<{ kind: string; window_start: number; used: number }>(
      sql`SELECT kind, window_start, used FROM usage_counters WHERE cert_id = ${certId} AND (${which})`));
    return counters.map((c) => rows.find((x) => x.kind === c.kind && x.window_start === c.windowStart)?.used ?? 0);
  }
}
