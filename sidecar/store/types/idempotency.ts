/**
 * The store interface (types.ts) of the idempotency ledger (docs/gateway.md#idempotency): one
 * record per (connection, agent, key), claimed by the verify of the first request, completed
 * with the upstream's answer, replayed to repeats of the same request until it expires.
 */

/** An upstream answer as the ledger keeps it (size-bounded by the sidecar's API). */
export interface IdempotentResponse {
  /** The HTTP status the upstream answered with. */
  status: number;
  /** The response headers to replay, as name/value pairs in order (lowercase names). */
  headers: [string, string][];
  /** The body, base64 (empty when {@link bodyOmitted}). */
  body: string;
  /** True when the body was larger than the ledger keeps: a replay has the status and headers only. */
  bodyOmitted: boolean;
}

/** A claim of a key by the first request (the verify that allowed it). */
export interface IdempotencyClaimRequest {
  connectionId: string;
  agentId: string;
  /** The `Idempotency-Key` as the agent sent it. */
  key: string;
  /** Lowercase hex SHA-256 of the request's method, path, query and body (the gateway's). */
  requestHash: string;
  /** A new id of this claim (UUID): completing or releasing it names it. */
  claimId: string;
  now: number;
  /** The end of the claim's lease: after it, the key is free again unless the claim was completed. */
  leaseUntil: number;
}

/**
 * What a claim found: the key was free (or its record had expired) and is now this claim's; a
 * completed record of the same request (`replay`); a live claim of the same request
 * (`in_flight`); or a record of another request under the same key (`mismatch`).
 */
export type IdempotencyClaimResult =
  | { outcome: 'claimed' }
  | { outcome: 'replay'; response: IdempotentResponse }
  | { outcome: 'in_flight' }
  | { outcome: 'mismatch' };

/** The idempotency ledger. */
export interface IdempotencyStore {
  /**
   * Claims `c.key` for `c.connectionId` and `c.agentId` in one conditional write: of concurrent
   * claims, on any replica, exactly one gets `claimed`. A record whose `expires_at` has passed
   * (a completed one past its retention, a claim past its lease) is taken over.
   */
  claim(c: IdempotencyClaimRequest): Promise<IdempotencyClaimResult>;
  /**
   * Completes the live claim `claimId` of `connectionId` with the upstream's answer, kept until
   * `expiresAt`; false when there is no such claim in flight (released, taken over, completed).
   */
  complete(connectionId: string, claimId: string, response: IdempotentResponse, expiresAt: number): Promise<boolean>;
  /** Deletes the claim `claimId` of `connectionId` while it is in flight (the key is free again); false when none. */
  release(connectionId: string, claimId: string): Promise<boolean>;
  /** Deletes records whose `expires_at` is at or before `now`; returns the count. */
  purgeIdempotency(now: number): Promise<number>;
}
