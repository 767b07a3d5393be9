/**
 * Billing of verify calls, written once: the price, the balance pre-check
 * (the meter stage) and which outcomes are debited.
 *
 * - A decision (allow or deny) is debited in its commit transaction, with the
 *   challenge it consumes and its audit row (`stages/commit.ts` passes
 *   {@link VERIFY_PRICE_MICROS}).
 * - A refusal (4xx) is debited only when it spends one of the caller's own
 *   live challenges ({@link settleRefusal}): from the freshness stage on,
 *   until commit takes the challenge. A request that never got that far costs
 *   nothing, so a stranger who sends garbage through a gateway cannot drain
 *   the gateway owner's credits. A billed refusal writes no audit row.
 * - An `indeterminate` answer is never debited and spends nothing.
 */
import { ServiceError } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';
import { need, read } from './stage.js';
import type { Stage, VerifyCall } from './stage.js';

/** Price of one verify call: 0.002 dollars in micro-dollars. */
export const VERIFY_PRICE_MICROS = 2_000;

/**
 * Refusals that spend the challenge but are not billed: the idempotency ledger's (a repeat of a
 * request the agent already paid for, still in flight or under a reused key).
 */
export const UNBILLED_REFUSALS: ReadonlySet<string> = new Set(['idempotency_in_flight', 'idempotency_key_reused']);

/** Stage 2: refuses with 402 `credits_exhausted`, before any work, when the balance cannot cover the call. */
export const meter: Stage = {
  name: 'meter',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    if ((await read(() => ctx.store.proofs.creditsOf(auth.accountId))) < VERIFY_PRICE_MICROS) throw new ServiceError('credits_exhausted');
  },
};

/**
 * The error a refused call answers with, after billing it if it spends the caller's challenge.
 * The debit consumes that challenge too; when the balance cannot cover it the answer is 402
 * `credits_exhausted`, and when a concurrent call spent the challenge first, 400
 * `invalid_challenge` (unbilled). A store failure while debiting leaves the refusal as it was.
 */
export async function settleRefusal(ctx: ServiceContext, call: VerifyCall, refusal: ServiceError): Promise<ServiceError> {
  const challengeId = call.spendableChallenge;
  if (challengeId === null || call.auth === undefined) return refusal;
  call.spendableChallenge = null;
  const { connectionId, accountId } = call.auth;
  let r: Awaited<ReturnType<typeof ctx.store.proofs.consumeAndDebit>>;
  try {
    r = await ctx.store.proofs.consumeAndDebit(challengeId, connectionId, call.now, accountId,
      UNBILLED_REFUSALS.has(refusal.code) ? 0 : VERIFY_PRICE_MICROS);
  } catch {
    r = 'committed';
  }
  if (r === 'credits_exhausted') return new ServiceError('credits_exhausted');
  if (r === 'invalid_challenge') return new ServiceError('invalid_challenge');
  return refusal;
}
