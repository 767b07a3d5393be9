/**
 * The store interface (types.ts), by subject: the explanations of decisions
 * (`GET /v1/service/decisions/{decision_id}`, docs/authzen.md "Explained decisions").
 */

/** A decision's explanation, as stored. */
export interface DecisionRecord {
  /** The decision id (its audit row's id). */
  id: string;
  accountId: string;
  connectionId: string;
  /** The explanation (JSON; no secret and no proof). */
  explanation: Record<string, unknown>;
  createdAt: number;
}

/** Decision explanations. */
export interface DecisionStore {
  /** Stores an explanation (an id already stored is left as it is). */
  recordExplanation(d: DecisionRecord): Promise<void>;
  /** The explanation of decision `id`, or undefined. */
  getExplanation(id: string): Promise<DecisionRecord | undefined>;
}
