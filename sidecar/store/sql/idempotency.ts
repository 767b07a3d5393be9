/**
 * {@link IdempotencyStore} on either engine: the idempotency ledger. A claim is one
 * `INSERT … ON CONFLICT DO UPDATE … WHERE expires_at <= now` (an upsert that takes over only an
 * expired record), so concurrent claims of a key on any replica yield exactly one winner; the
 * losers read the record to say why.
 */
import { get, run, sql } from './core.js';
import type { Runner } from './core.js';
import type {
  IdempotencyClaimRequest, IdempotencyClaimResult, IdempotencyStore, IdempotentResponse,
} from '../types.js';

interface LedgerRow {
  request_hash: string;
  state: string;
  response: string | null;
}

/** The idempotency ledger. */
export class SqlIdempotencyStore implements IdempotencyStore {
  private readonly r: Runner;
  constructor(r: Runner) {
    this.r = r;
  }

  async claim(c: IdempotencyClaimRequest): Promise<IdempotencyClaimResult> {
    return this.r.write((function* () {
      const won = yield* run(sql`INSERT INTO idempotency_records AS i (connection_id, agent_id, idem_key, request_hash,
        claim_id, state, response, created_at, expires_at)
        VALUES (${c.connectionId}, ${c.agentId}, ${c.key}, ${c.requestHash}, ${c.claimId}, 'in_flight', NULL, ${c.now},
          ${c.leaseUntil})
        ON CONFLICT (connection_id, agent_id, idem_key) DO UPDATE SET request_hash = excluded.request_hash,
          claim_id = excluded.claim_id, state = 'in_flight', response = NULL, created_at = excluded.created_at,
          expires_at = excluded.expires_at
        WHERE i.expires_at <= ${c.now}`);
      if (won === 1) return { outcome: 'claimed' } as const;
      const row = yield* get<LedgerRow>(sql`SELECT request_hash, state, response FROM idempotency_records
        WHERE connection_id = ${c.connectionId} AND agent_id = ${c.agentId} AND idem_key = ${c.key}`);
      // Released between the two statements (PostgreSQL runs them one by one): as busy, the agent retries.
      if (row === undefined) return { outcome: 'in_flight' } as const;
      if (row.request_hash !== c.requestHash) return { outcome: 'mismatch' } as const;
      if (row.state !== 'completed' || row.response === null) return { outcome: 'in_flight' } as const;
      return { outcome: 'replay', response: JSON.parse(row.response) as IdempotentResponse } as const;
    })());
  }

  async complete(
    connectionId: string, claimId: string, response: IdempotentResponse, expiresAt: number,
  ): Promise<boolean> {
    return (await this.r.write(run(sql`UPDATE idempotency_records SET state = 'completed',
      response = ${JSON.stringify(response)}, expires_at = ${expiresAt}
      WHERE claim_id = ${claimId} AND connection_id = ${connectionId} AND state = 'in_flight'`))) === 1;
  }

  async release(connectionId: string, claimId: string): Promise<boolean> {
    return (await this.r.write(run(sql`DELETE FROM idempotency_records
      WHERE claim_id = ${claimId} AND connection_id = ${connectionId} AND state = 'in_flight'`))) === 1;
  }

  async purgeIdempotency(now: number): Promise<number> {
    return this.r.write(run(sql`DELETE FROM idempotency_records WHERE expires_at <= ${now}`));
  }
}
