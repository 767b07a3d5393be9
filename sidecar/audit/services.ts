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
import { AuditExporter } from './export.js';
import type { ExportSink } from './sinks.js';
import type { DecisionLog } from './decision-log.js';

/** What {@link createAuditServices} needs. */
export interface AuditDeps {
  config: AuditConfig;
  store: Store;
  box: SecretBox;
  clock: () => number;
  log: { error(obj: object, msg?: string): void; warn(obj: object, msg?: string): void;
    info(obj: object, msg?: string): void; debug(obj: object, msg?: string): void };
  registry: client.Registry;
  /** The sidecar's version (the OTLP resource's service.version). */
  serviceVersion: string;
  /** Per-request deadline of the push exports (ms; default 15000). */
  exportTimeoutMs?: number;
}

/** The audit services. */
export interface AuditServices {
  readonly signer: CheckpointSigner;
  readonly checkpoints: CheckpointJob;
  readonly metrics: AuditMetrics;
  /** The decision log, or null when `SIDECAR_DECISION_LOG` is off. */
  readonly decisionLog: DecisionLog | null;
  /** The push exporters (one per configured sink). */
  readonly exporters: readonly AuditExporter[];
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
  const timeoutMs = d.exportTimeoutMs ?? 15_000;
  const sinks: ExportSink[] = [];
  // The sinks (undici, the OpenTelemetry exporter: ~0.4 CPU s to load) are loaded only when one is configured.
  const { httpSink, otlpSink } = d.config.export || d.config.otlp ? await import('./sinks.js') : ({} as never);
  if (d.config.export) sinks.push(httpSink({ url: d.config.export.url, secret: d.config.export.secret, timeoutMs, clock: d.clock, log: d.log }));
  if (d.config.otlp) sinks.push(
    otlpSink({ url: d.config.otlp.url, headers: d.config.otlp.headers, timeoutMs, clock: d.clock,
      serviceVersion: d.serviceVersion }));
  const exporters = sinks.map((sink) => {
    metrics.backlogOf(sink.name, () => d.store.audit.exportBacklog(sink.name));
    return new AuditExporter({
      store: d.store.audit, sink, clock: d.clock, batch: d.config.exportBatch, maxBacklog: d.config.exportMaxBacklog, flushMs: d.config.exportFlushMs,
      leaseMs: Math.max(60_000, 2 * timeoutMs + 10_000), log: d.log,
      onEvents: (result, n) => metrics.exportEvents.inc({ sink: sink.name, result }, n),
      onFailure: () => metrics.exportFailures.inc({ sink: sink.name }),
    });
  });
  return {
    signer, checkpoints, metrics, decisionLog, exporters,
    async prune(olderThan) {
      const r = await pruneAudit(d.store.audit, signer, olderThan, d.clock());
      if (r.anchors > 0) metrics.checkpoints.inc({ kind: 'anchor' }, r.anchors);
      return r.rows;
    },
    start() {
      checkpoints.start();
      for (const e of exporters) e.start();
    },
    async stop() {
      await checkpoints.stop();
      await Promise.all(exporters.map((e) => e.stop()));
      await decisionLog?.close();
    },
  };
}
