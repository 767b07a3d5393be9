/**
 * The decision log (`SIDECAR_DECISION_LOG=stdout|/path/file`): one JSON line per
 * verify call and AuthZEN evaluation, like OPA's decision logs, with stable field names (docs/audit.md,
 * "Decision log"). Context members named in `SIDECAR_DECISION_LOG_MASK` are
 * replaced by `[masked]`. Lines go through pino's SonicBoom: to stdout
 * synchronously (whole lines, so they never interleave with the service log),
 * to a file buffered and flushed on close.
 */
import pino from 'pino';
import type { VerifyContext, VerifyResponse } from '../../src/protocol.js';
import type { ServiceError } from '../../src/errors.js';
import type { AuditConfig } from './config.js';

/** The value a masked context member is replaced by. */
export const MASKED = '[masked]';
/** The `type` of every decision-log line. */
export const DECISION_LINE = 'agent_authz.decision';

/** One line of the decision log (field names are a public contract). */
export interface DecisionLine {
  type: typeof DECISION_LINE;
  request_id: string;
  /** The decision time (ISO 8601 UTC). */
  time: string;
  platform_id: string | null;
  connection_id: string | null;
  agent_id: string | null;
  cert_id: string | null;
  scope: string | null;
  /** allow, deny, indeterminate, or refused (a 4xx answer: no decision was made). */
  decision: string;
  /** The decision reason, or for `refused` the error code. */
  reason: string;
  constraint: string | null;
  context: Record<string, string> | null;
  /** Server time of the call, milliseconds. */
  latency_ms: number;
  audit_event_id: string | null;
  /** The decision's id (every call, refused ones too): `GET /v1/service/decisions/{id}` for a decision. */
  decision_id: string | null;
  /** `verify` (a proof) or `grant` (an AuthZEN grant check, docs/authzen.md). */
  mode: 'verify' | 'grant';
}

/** What the verify route knows about one settled call. */
export interface SettledCall {
  requestId: string;
  now: number;
  auth?: { platformId: string; connectionId: string } | undefined;
  scope?: string | undefined;
  context?: VerifyContext | undefined;
  outcome: VerifyResponse | ServiceError;
  latencyMs: number;
  /** The call's decision id. */
  decisionId?: string | undefined;
  /** Default `verify`. */
  mode?: 'verify' | 'grant' | undefined;
}

/** Writes decision-log lines. */
export interface DecisionLog {
  write(c: SettledCall): void;
  close(): Promise<void>;
}

/** Masks the configured context members. */
export function maskContext(context: VerifyContext | undefined, mask: readonly string[]): Record<string, string> | null {
  if (context === undefined) return null;
  const all = mask.includes('*');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(context)) if (typeof v === 'string') out[k] = all || mask.includes(k) ? MASKED : v;
  return out;
}

/** The line of one settled call. */
export function decisionLine(c: SettledCall, mask: readonly string[]): DecisionLine {
  const o = c.outcome;
  const answer = 'decision' in o ? o : null;
  return {
    type: DECISION_LINE, request_id: c.requestId, time: new Date(c.now).toISOString(),
    platform_id: c.auth?.platformId ?? null, connection_id: c.auth?.connectionId ?? null,
    agent_id: answer?.agent_id ?? null, cert_id: answer?.cert_id ?? null, scope: c.scope ?? null,
    decision: answer?.decision ?? 'refused', reason: answer ? answer.decision_reason : (o as ServiceError).code,
    constraint: answer?.constraint ?? null, context: maskContext(c.context, mask),
    latency_ms: Math.round(c.latencyMs * 1000) / 1000, audit_event_id: answer?.audit_event_id ?? null,
    decision_id: c.decisionId ?? answer?.decision_id ?? null, mode: c.mode ?? 'verify',
  };
}

/** Opens the decision log of the configuration, or null when it is off. */
export function openDecisionLog(config: AuditConfig, onLine?: () => void): DecisionLog | null {
  const target = config.decisionLog;
  if (target === null) return null;
  const dest = target === 'stdout'
    ? pino.destination({ dest: 1, sync: true })
    : pino.destination({ dest: target.file, sync: false, mkdir: true, append: true, minLength: 8192 });
  const mask = config.decisionLogMask;
  return {
    write(c) {
      dest.write(JSON.stringify(decisionLine(c, mask)) + '\n');
      onLine?.();
    },
    async close() {
      if (target === 'stdout') return;
      await new Promise<void>((resolve) => {
        dest.once('close', () => resolve());
        dest.once('error', () => resolve());
        dest.end();
      });
    },
  };
}
