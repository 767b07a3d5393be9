/**
 * The audit services of one sidecar: the checkpoint signer and job, retention
 * with an anchor, the decision log and the push exporters. `buildServer`
 * creates them once (`ctx.audit`), starts them with the other workers and stops
 * them on close.
 */
import type { AuditConfig } from './config.js';
import type { Store } from '../store/types.js';
import type { SecretBox } from '../secrets.js';
import { loadCheckpointSigner } from './signer.js';
import type { CheckpointSigner } from './signer.js';
import { CheckpointJob, pruneAudit } from './checkpoints.js';
import { createAuditMetrics } from './metrics.js';
import type { AuditMetrics } from './metrics.js';
import type client from 'prom-client';
import { openDecisionLog } from './decision-log.js';
import type { DecisionLog } from './decision-log.js';

/** What {@link createAuditServices} needs. */
export interface AuditDeps {
  config: AuditConfig;
  store: Store;
  box: SecretBox;
  clock: () => number;
  log: { error(obj: object, msg?: string): void; warn(obj: object, msg?: string): void; info(obj: object, msg?: string): void; debug(obj: object, msg?: string): void };
  registry: client.Registry;
}

/** The audit services. */
export interface AuditServices {
  readonly signer: CheckpointSigner;
  readonly checkpoints: CheckpointJob;
  readonly metrics: AuditMetrics;
  /** The decision log, or null when `SIDECAR_DECISION_LOG` is off. */
  readonly decisionLog: DecisionLog | null;
  /** Retention: removes chain prefixes older than `olderThan`, leaving signed anchors; returns the rows removed. */
  prune(olderThan: number): Promise<number>;
  /** Starts the background jobs. */
  start(): void;
  /** Stops them (and flushes the decision log). */
  stop(): Promise<void>;
}

/** Creates the audit services (loads or makes the checkpoint key). */
export async function createAuditServices(d: AuditDeps): Promise<AuditServices> {
  const signer = await loadCheckpointSigner(d.store.audit, d.box, d.clock());
  const metrics = createAuditMetrics(d.registry);
  const checkpoints = new CheckpointJob({
    store: d.store.audit, signer, clock: d.clock, rows: d.config.checkpointRows, seconds: d.config.checkpointSeconds, log: d.log,
    onCheckpoints: (n) => metrics.checkpoints.inc({ kind: 'periodic' }, n),
  });
  const decisionLog = openDecisionLog(d.config, () => metrics.decisionLogLines.inc());
  return {
    signer, checkpoints, metrics, decisionLog,
    async prune(olderThan) {
      const r = await pruneAudit(d.store.audit, signer, olderThan, d.clock());
      if (r.anchors > 0) metrics.checkpoints.inc({ kind: 'anchor' }, r.anchors);
      return r.rows;
    },
    start() {
      checkpoints.start();
    },
    async stop() {
      await checkpoints.stop();
      await decisionLog?.close();
    },
  };
}
