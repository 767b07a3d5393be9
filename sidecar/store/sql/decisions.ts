/**
 * {@link DecisionStore} on either engine: the explanation of each decision, read by id.
 * A verify's explanation is written in its decision's transaction ({@link insertExplanation},
 * from the engines' `commitDecision`); a grant check's after its audit row (`recordExplanation`).
 */
import { get, run, sql } from './core.js';
import type { Runner, Work } from './core.js';
import type { DecisionRecord, DecisionStore } from '../types.js';

interface DecisionRow {
  id: string; account_id: string; connection_id: string; explanation: string; created_at: number | string;
}

/** Stores `d` inside the caller's transaction (an id already stored is left as it is). */
export function* insertExplanation(d: DecisionRecord): Work<number> {
  return yield* run(sql`INSERT INTO decision_explanations (id, account_id, connection_id, explanation, created_at)
    VALUES (${d.id}, ${d.accountId}, ${d.connectionId}, ${JSON.stringify(d.explanation)}, ${d.createdAt})
    ON CONFLICT DO NOTHING`);
}

/** Decision explanations. */
export class SqlDecisionStore implements DecisionStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async recordExplanation(d: DecisionRecord): Promise<void> {
    await this.r.write(insertExplanation(d), { group: true, lazy: true });
  }

  async getExplanation(id: string): Promise<DecisionRecord | undefined> {
    const row = await this.r.read(get<DecisionRow>(sql`SELECT * FROM decision_explanations WHERE id = ${id}`));
    return row && { id: row.id, accountId: row.account_id, connectionId: row.connection_id,
      explanation: JSON.parse(row.explanation) as Record<string, unknown>, createdAt: Number(row.created_at) };
  }
}
