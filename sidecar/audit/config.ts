/**
 * The audit settings (`SIDECAR_AUDIT_*`, `SIDECAR_DECISION_LOG*`): the hash
 * chain and its checkpoints, the decision log, and the push exports (NDJSON
 * over HTTP, OTLP/HTTP logs). Parsed once by `config/index.ts` with its helpers (so
 * a bad value stops startup with the variable's name, like every setting).
 */

/** The validated audit settings (`SidecarConfig.audit`). */
export interface AuditConfig {
  /** Link audit rows into the per-account hash chain (`SIDECAR_AUDIT_CHAIN`, default on). */
  chain: boolean;
  /** Sign a chain head after this many new rows. */
  checkpointRows: number;
  /** ...or after this many seconds with new rows. */
  checkpointSeconds: number;
  /** Decision log: null (off), `stdout`, or an absolute file path (appended). */
  decisionLog: null | 'stdout' | { file: string };
  /** Context members replaced by `[masked]` in the decision log. */
  decisionLogMask: readonly string[];
  /** NDJSON push export; null = off. */
  export: null | { url: string; secret: string };
  /** OTLP/HTTP JSON logs export; null = off. */
  otlp: null | { url: string; headers: Record<string, string> };
  /** Most events per export request. */
  exportBatch: number;
  /** Most rows per account an export may fall behind; older unexported rows are skipped (counted). */
  exportMaxBacklog: number;
  /** How often the exporters look for new rows (ms). */
  exportFlushMs: number;
}

/** The variables this module reads (config.ts adds them to its list of known variables). */
export const AUDIT_ENV_VARS = [
  'SIDECAR_AUDIT_CHAIN', 'SIDECAR_AUDIT_CHECKPOINT_ROWS', 'SIDECAR_AUDIT_CHECKPOINT_SECONDS',
  'SIDECAR_DECISION_LOG', 'SIDECAR_DECISION_LOG_MASK',
  'SIDECAR_AUDIT_EXPORT_URL', 'SIDECAR_AUDIT_EXPORT_SECRET', 'SIDECAR_AUDIT_EXPORT_BATCH', 'SIDECAR_AUDIT_EXPORT_MAX_BACKLOG',
  'SIDECAR_AUDIT_EXPORT_FLUSH_MS', 'SIDECAR_AUDIT_OTLP_URL', 'SIDECAR_AUDIT_OTLP_HEADERS',
] as const;

/** The context members of a verify request (`src/protocol.ts` `VerifyContext`), which the decision log can mask. */
export const MASKABLE_CONTEXT = ['method', 'path', 'client_ip', 'tenant', 'amount', 'currency', 'body_sha256', 'query_sha256'] as const;

/** Defaults. */
export const AUDIT_DEFAULTS = { checkpointRows: 1000, checkpointSeconds: 60, exportBatch: 500, exportMaxBacklog: 100_000, exportFlushMs: 1000 } as const;

/** The parsing helpers config.ts lends (they throw its ConfigError). */
export interface ConfigHelpers {
  int(name: string, def: number, min: number, max: number): number;
  fail(message: string): never;
}

function httpUrl(h: ConfigHelpers, name: string, raw: string): string {
  let u: URL;
  try { u = new URL(raw); } catch { return h.fail(`${name}: not a URL: ${JSON.stringify(raw)}`); }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') h.fail(`${name}: scheme must be http: or https:, got ${u.protocol}`);
  if (u.username || u.password) h.fail(`${name}: put credentials in headers, not in the URL`);
  return u.toString();
}

/** Parses `k=v,k2=v2` (the OTEL_EXPORTER_OTLP_HEADERS form; values may be percent-encoded). */
function headers(h: ConfigHelpers, raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const i = part.indexOf('=');
    const k = part.slice(0, i).trim().toLowerCase();
    let v: string;
    try { v = decodeURIComponent(part.slice(i + 1).trim()); } catch { return h.fail('SIDECAR_AUDIT_OTLP_HEADERS: a value is not valid percent-encoding'); }
    if (i < 1 || !/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(k) || /[\r\n]/.test(v)) h.fail('SIDECAR_AUDIT_OTLP_HEADERS: expected name=value pairs separated by commas');
    out[k] = v;
  }
  return out;
}

/** Reads and validates the audit settings. */
export function parseAuditConfig(env: NodeJS.ProcessEnv, h: ConfigHelpers): AuditConfig {
  const chainRaw = env.SIDECAR_AUDIT_CHAIN || 'on';
  if (chainRaw !== 'on' && chainRaw !== 'off') h.fail(`SIDECAR_AUDIT_CHAIN: on or off, got ${JSON.stringify(chainRaw)}`);
  const logRaw = env.SIDECAR_DECISION_LOG || 'off';
  let decisionLog: AuditConfig['decisionLog'] = null;
  if (logRaw === 'stdout') decisionLog = 'stdout';
  else if (logRaw !== 'off') {
    if (!logRaw.startsWith('/')) h.fail(`SIDECAR_DECISION_LOG: off, stdout or an absolute file path, got ${JSON.stringify(logRaw)}`);
    decisionLog = { file: logRaw };
  }
  const decisionLogMask = (env.SIDECAR_DECISION_LOG_MASK ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const m of decisionLogMask) {
    if (m !== '*' && !(MASKABLE_CONTEXT as readonly string[]).includes(m)) h.fail(
      `SIDECAR_DECISION_LOG_MASK: unknown context member ${JSON.stringify(m)} (known: ${MASKABLE_CONTEXT.join(', ')}, or * for all)`);
  }
  const exportUrl = env.SIDECAR_AUDIT_EXPORT_URL || null;
  const secret = env.SIDECAR_AUDIT_EXPORT_SECRET || null;
  if (exportUrl && !secret) h.fail('SIDECAR_AUDIT_EXPORT_SECRET: required when SIDECAR_AUDIT_EXPORT_URL is set (it signs every batch)');
  if (secret && !exportUrl) h.fail('SIDECAR_AUDIT_EXPORT_SECRET: set without SIDECAR_AUDIT_EXPORT_URL');
  if (secret && (secret.length < 32 || secret.length > 256 || /\s/.test(secret))) h.fail(
    'SIDECAR_AUDIT_EXPORT_SECRET: 32 to 256 characters without spaces (e.g. `openssl rand -hex 32`)');
  const otlpUrl = env.SIDECAR_AUDIT_OTLP_URL || null;
  if (env.SIDECAR_AUDIT_OTLP_HEADERS && !otlpUrl) h.fail('SIDECAR_AUDIT_OTLP_HEADERS: set without SIDECAR_AUDIT_OTLP_URL');
  return {
    chain: chainRaw === 'on',
    checkpointRows: h.int('SIDECAR_AUDIT_CHECKPOINT_ROWS', AUDIT_DEFAULTS.checkpointRows, 1, 1_000_000),
    checkpointSeconds: h.int('SIDECAR_AUDIT_CHECKPOINT_SECONDS', AUDIT_DEFAULTS.checkpointSeconds, 1, 86_400),
    decisionLog,
    decisionLogMask,
    export: exportUrl && secret ? { url: httpUrl(h, 'SIDECAR_AUDIT_EXPORT_URL', exportUrl), secret } : null,
    otlp: otlpUrl ? { url: httpUrl(h, 'SIDECAR_AUDIT_OTLP_URL', otlpUrl), headers: headers(h, env.SIDECAR_AUDIT_OTLP_HEADERS ?? '') } : null,
    exportBatch: h.int('SIDECAR_AUDIT_EXPORT_BATCH', AUDIT_DEFAULTS.exportBatch, 1, 10_000),
    exportMaxBacklog: h.int('SIDECAR_AUDIT_EXPORT_MAX_BACKLOG', AUDIT_DEFAULTS.exportMaxBacklog, 100, 100_000_000),
    exportFlushMs: h.int('SIDECAR_AUDIT_EXPORT_FLUSH_MS', AUDIT_DEFAULTS.exportFlushMs, 10, 60_000),
  };
}
