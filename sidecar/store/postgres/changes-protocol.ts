/**
 * The notification protocol of the PostgreSQL change feed: the channel the
 * schema's triggers notify (migrations.ts) and the parser of their payloads
 * (changes.ts). A payload is JSON `{"t": type, "id": text, "at": unix ms}`,
 * where `at` is the database server's clock when the trigger ran.
 */
import type { StoreChange } from '../types.js';

/** The LISTEN/NOTIFY channel. */
export const NOTIFY_CHANNEL = 'agent_authz_changes';

/** A parsed notification: the change and the time it was made (server clock, Unix ms). */
export interface Notification {
  change: StoreChange;
  at: number;
}

/** Parses a payload; undefined for anything it does not know (ignored, never trusted). */
export function parseNotification(payload: string | undefined): Notification | undefined {
  if (!payload) return undefined;
  let v: unknown;
  try { v = JSON.parse(payload); } catch { return undefined; }
  const o = v as { t?: unknown; id?: unknown; at?: unknown };
  if (typeof o?.id !== 'string' || o.id === '') return undefined;
  const at = typeof o.at === 'number' && Number.isFinite(o.at) ? o.at : Date.now();
  if (o.t === 'certificate_revoked') return { change: { type: 'certificate_revoked', certId: o.id }, at };
  if (o.t === 'connection_keys_changed') return { change: { type: 'connection_keys_changed', connectionId: o.id }, at };
  return undefined;
}
