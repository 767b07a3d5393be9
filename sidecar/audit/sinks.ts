/**
 * Where the push export sends audit events (`export.ts` drives them):
 *
 * - `http`: one POST per batch of NDJSON event lines (`format.ts`), signed and
 *   sent exactly like a webhook (`webhooks/deliver.ts` `sendSigned`: the
 *   `X-Service-Signature` HMAC of `timestamp.body` with
 *   `SIDECAR_AUDIT_EXPORT_SECRET`, `X-Service-Delivery-ID` = the batch id, the
 *   timeout, redirects refused, `Retry-After` honoured). The collector is the
 *   operator's own, often on a private network, so the webhooks' SSRF guard does
 *   not apply.
 * - `otlp`: OpenTelemetry logs over OTLP/HTTP with JSON encoding, through the
 *   OpenTelemetry JS exporter (`@opentelemetry/exporter-logs-otlp-http`); the
 *   mapping is {@link toLogRecord} (docs/audit.md).
 */
import { Agent } from 'undici';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableLogRecord } from '@opentelemetry/sdk-logs';
import { SeverityNumber } from '@opentelemetry/api-logs';
import type { ChainedAuditEvent } from '../store/types.js';
import { sendSigned } from '../webhooks/deliver.js';
import type { WorkerLogger } from '../webhooks/types.js';
import { eventLine } from './format.js';

/** What one send achieved. */
export interface SinkResult { ok: boolean; retryAfterMs: number | null; error: string | null }

/** A push-export destination. */
export interface ExportSink {
  /** `http` or `otlp` (also the cursor name and the metric label). */
  readonly name: string;
  send(events: readonly ChainedAuditEvent[], batchId: string, signal: AbortSignal): Promise<SinkResult>;
  close(): Promise<void>;
}

/** The NDJSON body of a batch. */
export function ndjson(events: readonly ChainedAuditEvent[]): Uint8Array {
  let s = '';
  for (const e of events) s += JSON.stringify(eventLine(e)) + '\n';
  return new TextEncoder().encode(s);
}

/** The `http` sink. */
export function httpSink(o: { url: string; secret: string; timeoutMs: number; clock: () => number; log: WorkerLogger }): ExportSink {
  const dispatcher = new Agent({ connect: { timeout: o.timeoutMs } });
  const secret = new TextEncoder().encode(o.secret);
  return {
    name: 'http',
    async send(events, batchId, signal) {
      const sent = await sendSigned({
        deliveryId: batchId, callbackUrl: o.url, body: ndjson(events), contentType: 'application/x-ndjson', secret, attemptedAt: o.clock(),
        allowInsecure: true, timeoutMs: o.timeoutMs, dispatcher, stopSignal: signal, clock: o.clock, log: o.log, logCtx: { sink: 'http', batchId },
      });
      if (sent.stopped) return { ok: false, retryAfterMs: null, error: 'stopped' };
      return { ok: sent.error === null, retryAfterMs: sent.retryAfterMs, error: sent.error };
    },
    close: () => dispatcher.close(),
  };
}

/** The instrumentation scope of every exported log record (one object: the exporter groups by identity). */
const SCOPE = { name: 'agent-authz.audit', version: '1' } as const;

const hr = (ms: number): [number, number] => [Math.floor(ms / 1000), (ms % 1000) * 1_000_000];

/**
 * One audit event as an OpenTelemetry log record: the event time, INFO (WARN for
 * `proof.rejected`), the event type as the event name, a short body, and the fields as
 * `agent_authz.*` attributes with the event id as `log.record.uid` (docs/audit.md).
 */
export function toLogRecord(e: ChainedAuditEvent, observedAt: number, resource: ReadableLogRecord['resource']): ReadableLogRecord {
  const d = e.details;
  const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  const attrs: Record<string, string | number> = { 'log.record.uid': e.id, 'agent_authz.event_type': e.eventType, 'agent_authz.account_id': e.accountId };
  const put = (k: string, v: string | number | null | undefined): void => { if (v !== null && v !== undefined) attrs[`agent_authz.${k}`] = v; };
  put('connection_id', e.connectionId);
  put('agent_id', e.agentId);
  put('cert_id', e.certId);
  put('scope', e.requiredScope);
  put('decision', str(d.decision));
  put('reason', str(d.decision_reason));
  put('constraint', str(d.constraint));
  put('details', JSON.stringify(d));
  put('chain.position', e.position);
  put('chain.prev_hash', e.prevHash);
  put('chain.hash', e.hash);
  const warn = e.eventType === 'proof.rejected';
  return {
    hrTime: hr(e.createdAt), hrTimeObserved: hr(observedAt),
      severityNumber: warn ? SeverityNumber.WARN : SeverityNumber.INFO, severityText: warn ? 'WARN' : 'INFO',
    body: [e.eventType, str(d.decision), str(d.decision_reason)].filter(Boolean).join(' '), eventName: e.eventType,
    resource, instrumentationScope: SCOPE, attributes: attrs, droppedAttributesCount: 0,
  };
}

/** The `otlp` sink. */
export function otlpSink(o: { url: string; headers: Record<string, string>; timeoutMs: number; clock: () => number; serviceVersion: string }): ExportSink {
  const exporter = new OTLPLogExporter({ url: o.url, headers: o.headers, timeoutMillis: o.timeoutMs });
  const resource = resourceFromAttributes({ 'service.name': 'agent-authz-sidecar', 'service.version': o.serviceVersion });
  return {
    name: 'otlp',
    send(events) {
      const now = o.clock();
      const records = events.map((e) => toLogRecord(e, now, resource));
      return new Promise<SinkResult>((resolve) => {
        exporter.export(records,
          (r) => resolve({ ok: r.code === 0, retryAfterMs: null,
            error: r.code === 0 ? null : String(r.error?.message ?? 'export failed').slice(0, 500) }));
      });
    },
    close: () => exporter.shutdown(),
  };
}
