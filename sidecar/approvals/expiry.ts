/**
 * Expiry of step-up approvals: an approval that is still `pending` (never
 * decided) or `granted` (never used) when its `expires_at` passes becomes
 * `expired`, with its `approval.expired` audit row and webhook in one
 * transaction. It runs every {@link APPROVAL_EXPIRY_INTERVAL_MS} while the
 * sidecar runs, and before anything reads approvals (the routes, and verify
 * when it meets an approval past its time), so what a caller sees is always
 * settled.
 */
import type { ServiceContext } from '../context.js';
import { approvalChange } from './records.js';

/** How often the expiry job runs (ms). */
export const APPROVAL_EXPIRY_INTERVAL_MS = 15_000;
/** Most approvals expired per transaction. */
const BATCH = 200;

/** Expires every due approval (in batches, bounded); returns how many. Nudges the webhook worker. */
export async function expireApprovals(ctx: ServiceContext): Promise<number> {
  const now = ctx.clock();
  let total = 0;
  for (let round = 0; round < 50; round++) {
    const expired = await ctx.store.approvals.expireDue(now, BATCH, (a) =>
      approvalChange(ctx, a, 'approval.expired', now, { previous_state: a.state, expired_at: new Date(a.expiresAt).toISOString() }));
    total += expired.length;
    if (expired.length < BATCH) break;
  }
  if (total > 0) ctx.nudgeWebhooks();
  return total;
}

/** Starts the periodic expiry job; returns its stop function. Failures are logged, never thrown. */
export function startApprovalExpiry(ctx: ServiceContext): () => void {
  const timer = setInterval(() => {
    void expireApprovals(ctx).catch((err: unknown) => ctx.log.error({ err }, 'approval expiry failed'));
  }, APPROVAL_EXPIRY_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
