/**
 * Validation of the receiver's options, once, when the receiver (or an
 * adapter, or the SQLite store) is created — in the style of the gateway
 * plugin's options (`gateway-plugin/options.ts`): misuse throws a `TypeError`
 * whose message starts with the path of the bad value, for example
 * `receiver options: onEvent: must be a function`. Unknown keys are rejected,
 * so a typo never silently falls back to a default.
 */
import { WEBHOOK_TOLERANCE_SECONDS } from '../src/webhooks.js';
import { at, checkInt, checkObject, fail, item } from '../gateway-plugin/validate.js';
import type { DedupStore } from './dedup.js';

/** Label of {@link createWebhookReceiver} option errors. */
export const RECEIVER_LABEL = 'receiver options:';

/** Largest accepted timestamp tolerance (seconds); the spec's window is 300. */
export const MAX_TOLERANCE_SECONDS = 3600;

/** Keys that moved, with the hint given instead of "unknown key". */
const MOVED: Readonly<Record<string, string>> = {
  dedupFile: "was removed: pass dedup: new SqliteDedupStore({ file }) from 'agent-authz/receiver/sqlite' (a durable store), or your own DedupStore",
};

/** Throws the path-named error for an unknown key, with a hint for keys that moved. */
export function checkKeys(value: unknown, path: string, allowed: readonly string[]): Record<string, unknown> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const key of Object.keys(value)) if (!allowed.includes(key) && key in MOVED) fail(at(path, key), MOVED[key]!);
  }
  return checkObject(value, path, allowed);
}

/** Checks that `value` is a function (or `undefined` when optional). */
export function checkFunction(value: unknown, path: string, optional: boolean): void {
  if (value === undefined && optional) return;
  if (value === undefined) fail(path, 'is required (a function)');
  if (typeof value !== 'function') fail(path, `must be a function, got ${describe(value)}`);
}

/** A short description of a bad value for messages (never its content: it may be a secret). */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** The signing secrets: one non-empty string, or a non-empty list of them (rotation). */
function checkSecrets(value: unknown, path: string): string[] {
  const hint = 'the webhook_signing_secret shown at platform registration';
  if (value === undefined) fail(path, `is required (${hint})`);
  const list: unknown[] = Array.isArray(value) ? value : [value];
  if (Array.isArray(value) && value.length === 0) fail(path, `must not be an empty list (${hint})`);
  if (!Array.isArray(value) && typeof value !== 'string') fail(path, `must be a string or a list of strings, got ${describe(value)}`);
  return list.map((s, i) => {
    const p = Array.isArray(value) ? item(path, i) : path;
    if (typeof s !== 'string') fail(p, `must be a string, got ${describe(s)}`);
    if (s.length === 0) fail(p, `must not be empty (${hint})`);
    return s;
  });
}

/** Checks a dedup store: an object with `has` and `add` functions (and `close`, when present). */
function checkDedup(value: unknown, path: string): DedupStore {
  if (value === undefined) {
    fail(path, "is required: a durable store such as new SqliteDedupStore({ file }) from 'agent-authz/receiver/sqlite', "
      + 'your own DedupStore on your database, or new MemoryDedupStore() for tests (forgets on restart)');
  }
  if (value === null || typeof value !== 'object') fail(path, `must be a DedupStore object, got ${describe(value)}`);
  const store = value as Record<string, unknown>;
  for (const method of ['has', 'add'] as const) {
    if (typeof store[method] !== 'function') fail(at(path, method), 'must be a function (a DedupStore has has() and add())');
  }
  if (store.close !== undefined && typeof store.close !== 'function') fail(at(path, 'close'), 'must be a function when present');
  return value as DedupStore;
}

/** The validated options of a receiver. */
export interface ResolvedReceiverOptions {
  readonly secrets: readonly string[];
  readonly dedup: DedupStore;
  readonly toleranceSeconds: number;
}

const RECEIVER_KEYS = ['secret', 'onEvent', 'onUnknownEvent', 'dedup', 'toleranceSeconds', 'clock', 'onError'] as const;

/** Validates the options of `createWebhookReceiver`. Throws a path-named `TypeError`. */
export function resolveReceiverOptions(raw: unknown): ResolvedReceiverOptions {
  const L = RECEIVER_LABEL;
  const o = checkKeys(raw, L, RECEIVER_KEYS);
  const secrets = checkSecrets(o.secret, at(L, 'secret'));
  checkFunction(o.onEvent, at(L, 'onEvent'), false);
  checkFunction(o.onUnknownEvent, at(L, 'onUnknownEvent'), true);
  checkFunction(o.clock, at(L, 'clock'), true);
  checkFunction(o.onError, at(L, 'onError'), true);
  const dedup = checkDedup(o.dedup, at(L, 'dedup'));
  const toleranceSeconds = checkInt(o.toleranceSeconds, at(L, 'toleranceSeconds'), 1, MAX_TOLERANCE_SECONDS, WEBHOOK_TOLERANCE_SECONDS);
  return { secrets, dedup, toleranceSeconds };
}

/** Checks that `value` is a receiver made by `createWebhookReceiver`. */
export function checkReceiver(value: unknown, path: string): void {
  if (value === null || typeof value !== 'object' || typeof (value as { handleWebhook?: unknown }).handleWebhook !== 'function') {
    fail(path, `must be a receiver from createWebhookReceiver(), got ${describe(value)}`);
  }
}
