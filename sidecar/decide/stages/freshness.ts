/**
 * Stage 5, freshness: the proof was presented after its challenge was
 * issued, within `SIDECAR_PROOF_FRESHNESS_SECONDS` of now, and not more than
 * {@link FUTURE_SKEW_MS} in the future; else 400 `proof_stale` (billed: it
 * spends the caller's challenge).
 */
import { ServiceError } from '../../../src/errors.js';
import { need } from '../stage.js';
import type { Stage } from '../stage.js';

/** Allowed clock skew for a presentation time in the future. */
export const FUTURE_SKEW_MS = 5_000;

/** The freshness stage. */
export const freshness: Stage = {
  name: 'freshness',
  run(ctx, call) {
    const { presentedAt } = need(call.proof, 'proof');
    const ch = need(call.challenge, 'challenge');
    const seconds = ctx.config.proofFreshnessSeconds;
    if (presentedAt < ch.createdAt || call.now - presentedAt > seconds * 1000 || presentedAt - call.now > FUTURE_SKEW_MS) {
      throw new ServiceError('proof_stale', `The proof was presented outside the ${seconds} s freshness window.`);
    }
  },
};
