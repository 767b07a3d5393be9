/**
 * The service context: everything a route or pipeline stage needs (config,
 * store, secret box, clock, mailer, caches, metrics), created once by
 * `buildServer` and passed explicitly.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { SidecarConfig } from './config.ts';
import type { Store } from './store/types.ts';
import type { SecretBox } from './secrets.ts';
import type { Mailer } from './mail.ts';
import type { SidecarMetrics } from './metrics.ts';
import type { DecisionCaches } from './decide/caches.ts';

/** A clock returning Unix milliseconds; injectable for tests. */
export type Clock = () => number;

/** Shared services of one sidecar instance. */
export interface ServiceContext {
  readonly config: SidecarConfig;
  readonly store: Store;
  readonly box: SecretBox;
  readonly clock: Clock;
  readonly mailer: Mailer;
  readonly log: FastifyBaseLogger;
  readonly metrics: SidecarMetrics;
  readonly caches: DecisionCaches;
  /** HMAC keys derived from the master key. */
  readonly keys: { csrf: Uint8Array; loginCode: Uint8Array; apiKey: Uint8Array };
  /** Wakes the webhook worker after an event was enqueued. */
  readonly nudgeWebhooks: () => void;
}
