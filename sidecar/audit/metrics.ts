/**
 * The audit metric families, registered on the sidecar's registry: checkpoints
 * made, and per push-export sink the events delivered or skipped, the failed
 * requests and the backlog (docs/operations.md lists them).
 */
import client from 'prom-client';

/** The audit metrics the audit services update. */
export interface AuditMetrics {
  readonly checkpoints: client.Counter<'kind'>;
  readonly exportEvents: client.Counter<'sink' | 'result'>;
  readonly exportFailures: client.Counter<'sink'>;
  readonly decisionLogLines: client.Counter<string>;
  /** Binds the backlog gauge of one sink to its source (read at scrape time). */
  backlogOf(sink: string, read: () => Promise<number>): void;
}

/** Registers the audit metrics on `registry`. */
export function createAuditMetrics(registry: client.Registry): AuditMetrics {
  const registers = [registry];
  const backlogs = new Map<string, () => Promise<number>>();
  new client.Gauge({
    name: 'agent_authz_audit_export_backlog', help: 'Audit events not yet exported, by sink (http, otlp).', labelNames: ['sink'], registers,
    async collect() {
      for (const [sink, read] of backlogs) {
        try { this.set({ sink }, await read()); } catch { /* keep the previous value; /readyz reports store faults */ }
      }
    },
  });
  return {
    checkpoints: new client.Counter({ name: 'agent_authz_audit_checkpoints_total',
      help: 'Signed audit checkpoints made, by kind (periodic, anchor).', labelNames: ['kind'], registers }),
    exportEvents: new client.Counter({
      name: 'agent_authz_audit_export_events_total', labelNames: ['sink', 'result'], registers,
      help: 'Audit events by sink and result: delivered, skipped (the backlog bound was passed), pruned (removed by retention before export).',
    }),
    exportFailures: new client.Counter({ name: 'agent_authz_audit_export_failures_total',
      help: 'Failed audit export requests, by sink (each is retried).', labelNames: ['sink'], registers }),
    decisionLogLines: new client.Counter({ name: 'agent_authz_decision_log_lines_total', help: 'Lines written to the decision log.', registers }),
    backlogOf(sink, read) { backlogs.set(sink, read); },
  };
}
