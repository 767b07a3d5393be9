/**
 * The NDJSON lines of the audit trail outside the database, with stable field
 * names (docs/audit.md): an event line (the account's export, and every push
 * export), a checkpoint line, and the export's header and trailer. Times are
 * ISO 8601 UTC with milliseconds, which give back the exact stored Unix ms that
 * the hashes and signatures cover.
 */
import type { AuditCheckpointRecord, ChainedAuditEvent } from '../store/types.js';

/** `type` of an event line. */
export const EVENT_LINE = 'audit.event';
/** `type` of a checkpoint line. */
export const CHECKPOINT_LINE = 'audit.checkpoint';
/** `type` of an export's first line. */
export const EXPORT_HEADER = 'audit.export';
/** `type` of an export's last line. */
export const EXPORT_TRAILER = 'audit.export.end';
/** The export format version. */
export const EXPORT_VERSION = 1;

/** One event line. */
export interface EventLine {
  type: typeof EVENT_LINE;
  event_id: string;
  account_id: string;
  event_type: string;
  occurred_at: string;
  connection_id: string | null;
  agent_id: string | null;
  cert_id: string | null;
  required_scope: string | null;
  details: Record<string, unknown>;
  position: number;
  prev_hash: string;
  hash: string;
}

/** One checkpoint line. */
export interface CheckpointLine {
  type: typeof CHECKPOINT_LINE;
  checkpoint_id: string;
  account_id: string;
  position: number;
  head: string;
  kind: string;
  key_id: string;
  created_at: string;
  signature: { ed25519: string; ml_dsa_65: string };
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The event line of a chained row. */
export function eventLine(e: ChainedAuditEvent): EventLine {
  return {
    type: EVENT_LINE, event_id: e.id, account_id: e.accountId, event_type: e.eventType, occurred_at: iso(e.createdAt),
    connection_id: e.connectionId, agent_id: e.agentId, cert_id: e.certId, required_scope: e.requiredScope, details: e.details,
    position: e.position, prev_hash: e.prevHash, hash: e.hash,
  };
}

/** The checkpoint line of a checkpoint. */
export function checkpointLine(c: AuditCheckpointRecord): CheckpointLine {
  return {
    type: CHECKPOINT_LINE, checkpoint_id: c.id, account_id: c.accountId, position: c.position, head: c.head, kind: c.kind,
    key_id: c.keyId, created_at: iso(c.createdAt), signature: c.signature,
  };
}

const str = (v: unknown): v is string => typeof v === 'string';
const strOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';
const ms = (v: unknown): number | null => (
  str(v) && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(v) && Number.isFinite(Date.parse(v))
    ? Date.parse(v) : null);
const obj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads an event line back into a chained row; null when a field is missing or of the wrong type. */
export function parseEventLine(l: Record<string, unknown>): ChainedAuditEvent | null {
  const at = ms(l.occurred_at);
  if (!str(l.event_id) || !str(l.account_id) || !str(l.event_type) || at === null || !strOrNull(l.connection_id) || !strOrNull(l.agent_id)
    || !strOrNull(l.cert_id) || !strOrNull(l.required_scope) || !obj(l.details) || typeof l.position !== 'number' ||
      !str(l.prev_hash) || !str(l.hash)) return null;
  return {
    id: l.event_id, accountId: l.account_id, eventType: l.event_type as ChainedAuditEvent['eventType'], connectionId: l.connection_id, agentId: l.agent_id,
    certId: l.cert_id, requiredScope: l.required_scope, details: l.details, createdAt: at, position: l.position, prevHash: l.prev_hash, hash: l.hash,
  };
}

/** Reads a checkpoint line back; null when a field is missing or of the wrong type. */
export function parseCheckpointLine(l: Record<string, unknown>): AuditCheckpointRecord | null {
  const at = ms(l.created_at);
  const sig = l.signature;
  if (!str(l.checkpoint_id) || !str(l.account_id) || typeof l.position !== 'number' || !str(l.head) || (l.kind !== 'periodic' && l.kind !== 'anchor')
    || !str(l.key_id) || at === null || !obj(sig) || !str(sig.ed25519) || !str(sig.ml_dsa_65)) return null;
  return {
    id: l.checkpoint_id, accountId: l.account_id, position: l.position, head: l.head, kind: l.kind, keyId: l.key_id, createdAt: at,
    signature: { ed25519: sig.ed25519, ml_dsa_65: sig.ml_dsa_65 },
  };
}
