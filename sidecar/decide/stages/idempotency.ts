/**
 * Stage 11, idempotency (docs/gateway.md#idempotency): for an allow of a request that carries an
 * idempotency block, the ledger (`store.idempotency`) is asked about its key, per connection and
 * agent. The key was free: this call claims it for the block's lease (the gateway forwards and
 * records the answer under the claim's id). A recorded answer of the same request: the call is a
 * replay — limits and approval pass it without a debit, commit consumes the challenge and writes
 * the audit row at price 0, and the answer carries the recorded response. A live claim of the
 * same request is 409 `idempotency_in_flight`; another request under the key is 422
 * `idempotency_key_reused` (both spend the challenge, unbilled: `billing.ts`). A deny passes
 * unchanged and claims nothing, so authority is checked before the ledger is. A claim whose call
 * ends in anything but an allow is released by the pipeline (`pipeline.ts`).
 */
import crypto from 'node:crypto';
import { ServiceError } from '../../../src/errors.js';
import { need, read } from '../stage.js';
import type { Stage } from '../stage.js';

/** The idempotency stage. */
export const idempotency: Stage = {
  name: 'idempotency',
  async run(ctx, call) {
    const block = need(call.request, 'request').idempotency;
    if (block === undefined || need(call.decision, 'decision').decision !== 'allow') return;
    const auth = need(call.auth, 'auth');
    const agentId = need(call.proof, 'proof').payload.agent_id;
    const claimId = crypto.randomUUID();
    const r = await read(() => ctx.store.idempotency.claim({
      connectionId: auth.connectionId, agentId, key: block.key, requestHash: block.request_sha256, claimId,
      now: call.now, leaseUntil: call.now + block.lease_seconds * 1000,
    }));
    if (r.outcome === 'claimed') call.ledger = { claimId };
    else if (r.outcome === 'replay') call.ledger = { replay: r.response };
    else throw new ServiceError(r.outcome === 'in_flight' ? 'idempotency_in_flight' : 'idempotency_key_reused');
  },
};

/** True when the call replays a recorded answer (limits, approval and commit debit nothing for it). */
export const isReplay = (call: { ledger?: { claimId: string } | { replay: unknown } }): boolean =>
  call.ledger !== undefined && 'replay' in call.ledger;
