/**
 * The service context: everything a route or pipeline stage needs (config,
 * store, secret box, clock, mailer, caches, metrics, crypto workers), created once by
 * `buildServer` and passed explicitly.
 */
import type { KeyObject } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { SidecarConfig } from './config/index.js';
import type { Store } from './store/types.js';
import type { SecretBox } from './secrets.js';
import type { Mailer } from './mail.js';
import type { SidecarMetrics } from './metrics.js';
import type { DecisionCaches } from './decide/caches.js';
import type { ProofCrypto } from './crypto/pool.js';
import type { AuditServices } from './audit/services.js';
import type { Resolver } from 'node:dns/promises';

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
  /** Proof signing and proof-signature checks: the crypto worker pool, or inline (`SIDECAR_CRYPTO_WORKERS=0`). */
  readonly crypto: ProofCrypto;
  /**
   * HMAC keys derived from the master key, as secret KeyObjects: on Node 24 an HMAC keyed with
   * raw bytes costs several times one keyed with a KeyObject (the key is imported per call).
   */
  readonly keys: { csrf: KeyObject; loginCode: KeyObject; apiKey: KeyObject };
  /** The audit chain's signer and checkpoints, the decision log and the push exports. */
  readonly audit: AuditServices;
  /** The resolver of publisher-domain checks (`SIDECAR_DNS_SERVERS`). */
  readonly dns: Resolver;
  /** Wakes the webhook worker after an event was enqueued. */
  readonly nudgeWebhooks: () => void;
}
