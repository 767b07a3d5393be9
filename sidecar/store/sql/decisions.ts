/**
 * {@link DecisionStore} on either engine: the explanation of each decision,
 * written after its answer (group-committed with other writes), read by id.
 */
import { get, run, sql } from './core.js';
import type { Runner } from './core.js';
import type { DecisionRecord, DecisionStore } from '../types.js';

interface DecisionRow {
  id: string; account_id: string; connection_id: string; explanation: string; created_at: number | string;
}

/** Decision explanations. */
export class SqlDecisionStore implements DecisionStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async recordExplanation(d: DecisionRecord): Promise<void> {
    await this.r.write(run(sql`INSERT INTO decision_explanations
      (id, account_id, connection_id, explanation, created_at)
      VALUES (${d.id}, ${d.accountId}, ${d.connectionId}, ${JSON.stringify(d.explanation)}, ${d.createdAt})
      ON CONFLICT DO NOTHING`), { group: true, lazy: true });
  }

  async getExplanation(id: string): Promise<DecisionRecord | undefined> {
    const row = await this.r.read(get<DecisionRow>(sql`SELECT * FROM decision_explanations WHERE id = ${id}`));
    return row && { id: row.id, accountId: row.account_id, connectionId: row.connection_id,
      explanation: JSON.parse(row.explanation) as Record<string, unknown>, createdAt: Number(row.created_at) };
  }
}
