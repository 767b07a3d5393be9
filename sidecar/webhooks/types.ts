/**
 * The public types of the webhook delivery worker (`worker.ts`): its options,
 * the logger it writes to, and what one attempt produced. Kept apart so that
 * the worker and the per-attempt sender (`deliver.ts`) share them without
 * importing each other; `worker.ts` re-exports them.
 */
import type { OutboxStore } from '../store/types.js';
import type { SecretBox } from '../secrets.js';
import type { Resolver } from './ssrf.js';

/** Final or intermediate outcome of one attempt, for metrics. */
export type DeliveryResult = 'delivered' | 'failed' | 'dead' | 'disabled';

/** The logger methods the worker uses (a pino logger fits). */
export interface WorkerLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Options of the `WebhookWorker` (`worker.ts`). */
export interface WebhookWorkerOptions {
  store: OutboxStore;
  /**
   * Called after a 410 for stores whose `recordAttempt` does not disable the
   * platform's callback itself (the SQLite store does; pass `undefined`).
   */
  platforms?: { disableCallback(platformId: string, now: number): Promise<void> } | undefined;
  box: SecretBox;
  /** Current time in Unix milliseconds (injectable for tests). Default `Date.now`. */
  clock?: () => number;
  /** Lifts the https and private-address rules (SIDECAR_WEBHOOK_ALLOW_INSECURE=1; development and tests only). */
  allowInsecure: boolean;
  /** Per-attempt deadline for the response headers, connect included. Default 15000. */
  timeoutMs?: number;
  /** Idle poll interval. Default 1000. */
  pollIntervalMs?: number;
  /** Deliveries in flight at once. Default 4. */
  concurrency?: number;
  /** Lease of a claimed delivery; must exceed `timeoutMs`. Default max(60 s, 2 × timeoutMs + 10 s). */
  leaseMs?: number;
  /** How long `stop()` waits for in-flight deliveries before aborting them and releasing their leases. Default 5000. */
  stopGraceMs?: number;
  logger: WorkerLogger;
  /** Metrics hook: outcome of each attempt and its duration in seconds. */
  onResult?: (result: DeliveryResult, seconds: number) => void;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
  /** DNS resolver for the connect-time SSRF check (tests). Default `dns.lookup`. */
  resolve?: Resolver;
}

/** What one attempt produced (returned by `WebhookWorker.tick()` for tests and logs). */
export interface AttemptOutcome {
  deliveryId: string;
  attempt: number;
  result: DeliveryResult | 'skipped' | 'released';
  status: number | null;
  error: string | null;
}
