/**
 * Stage 4, challenge: the proof's challenge is known, unconsumed, unexpired
 * and was issued to the caller's connection, which is also the proof's
 * audience; else 400 `invalid_challenge` (unbilled: it spends nothing of the
 * caller's). From here on the call holds a challenge it can spend, and a
 * refusal is billed (`billing.ts`).
 */
import { ServiceError } from '../../../src/errors.js';
import { challengeId as challengeIdOf } from '../../../src/proof.js';
import { need, read } from '../stage.js';
import type { Stage } from '../stage.js';

/** The challenge stage. */
export const challenge: Stage = {
  name: 'challenge',
  async run(ctx, call) {
    const auth = need(call.auth, 'auth');
    const p = need(call.proof, 'proof').payload;
    const id = challengeIdOf(p.challenge);
    const ch = await read(() => ctx.store.proofs.getChallenge(id));
    if (ch && ch.consumedAt === null && ch.expiresAt <= call.now) ctx.metrics.challenges.inc({ event: 'expired' });
    if (!ch || ch.consumedAt !== null || ch.expiresAt <= call.now || ch.audienceConnectionId !== auth.connectionId || p.aud !== auth.connectionId) {
      throw new ServiceError('invalid_challenge');
    }
    call.challenge = ch;
    call.spendableChallenge = id;
  },
};
