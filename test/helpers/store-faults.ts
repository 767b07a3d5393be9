/**
 * Store faults for tests, injected by wrapping a {@link Store} instead of
 * matching one engine's SQL text, so that the same test runs on any engine.
 *
 * `withFaults(store)` returns a wrapper store (a Proxy) whose operations are
 * named `<sub-store>.<method>` (`proofs.commitDecision`, `platforms.getApiKeyByPrefix`)
 * or `ping` / `close`. A rule made with {@link FaultyStore.fail} makes every
 * matching operation reject (before the real store is called, so a faulted
 * operation writes nothing); {@link FaultyStore.spy} only counts calls.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Store } from '../../sidecar/store/types.js';
import { DB_FILE_NAME, openSqliteStore } from '../../sidecar/store/index.js';
import type { BuildOptions } from '../../sidecar/server.js';
import type { SidecarConfig } from '../../sidecar/config/index.js';
import { startSidecar } from './sidecar.js';
import type { TestSidecar } from './sidecar.js';

/** The sub-stores of {@link Store} whose methods can be faulted. */
const SUB_STORES = new Set(['accounts', 'platforms', 'delegations', 'proofs', 'outbox', 'approvals', 'usage', 'audit']);

/** A fault or spy rule; `hits` counts the matching calls. */
export interface FaultRule {
  /** Calls that matched the rule so far. */
  hits: number;
}

interface Rule extends FaultRule {
  match: (op: string) => boolean;
  error: (() => Error) | null;
  /** Fail only the first `times` matches (Infinity = every one). */
  times: number;
}

/** A wrapped store and the switches of its faults. */
export interface FaultyStore {
  /** The wrapper to hand to `buildServer({ store })`. */
  readonly store: Store;
  /** Makes matching operations reject with `error()` (default: a disk I/O error), for the first `times` matches. */
  fail(ops: RegExp | string, o?: { error?: () => Error; times?: number }): FaultRule;
  /** Counts matching operations without failing them. */
  spy(ops: RegExp | string): FaultRule;
  /** Removes every rule. */
  clear(): void;
  /** Every operation called so far, in order (operation names only). */
  readonly calls: string[];
}

const matcher = (ops: RegExp | string): ((op: string) => boolean) =>
  typeof ops === 'string' ? (op) => op === ops : (op) => ops.test(op);

/** Wraps `inner`; the wrapper forwards everything else (properties, the change feed) unchanged. */
export function withFaults(inner: Store): FaultyStore {
  const rules: Rule[] = [];
  const calls: string[] = [];
  const check = (op: string): Error | null => {
    calls.push(op);
    if (calls.length > 10_000) calls.splice(0, 5_000);
    let out: Error | null = null;
    for (const r of rules) {
      if (!r.match(op)) continue;
      r.hits++;
      if (r.error && r.hits <= r.times && out === null) out = r.error();
    }
    return out;
  };
  const wrapFn = (target: object, fn: (...a: unknown[]) => unknown, op: string) => (...args: unknown[]): unknown => {
    const err = check(op);
    if (err) return Promise.reject(err);
    return fn.apply(target, args);
  };
  const subs = new Map<string, object>();
  const wrapSub = (name: string, sub: object): object => {
    let p = subs.get(name);
    if (!p) {
      p = new Proxy(sub, {
        get(target, prop) {
          const v = Reflect.get(target, prop, target) as unknown;
          return typeof v === 'function' && typeof prop === 'string' ? wrapFn(target, v as (...a: unknown[]) => unknown, `${name}.${prop}`) : v;
        },
      });
      subs.set(name, p);
    }
    return p;
  };
  const store = new Proxy(inner, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof prop !== 'string') return v;
      if (SUB_STORES.has(prop) && v && typeof v === 'object') return wrapSub(prop, v);
      if (typeof v === 'function' && (prop === 'ping' || prop === 'close')) return wrapFn(target, v as (...a: unknown[]) => unknown, prop);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    store,
    calls,
    fail(ops, o = {}) {
      const r: Rule = { hits: 0, match: matcher(ops), error: o.error ?? (() => new Error('disk I/O error (injected)')), times: o.times ?? Infinity };
      rules.push(r);
      return r;
    },
    spy(ops) {
      const r: Rule = { hits: 0, match: matcher(ops), error: null, times: 0 };
      rules.push(r);
      return r;
    },
    clear() { rules.length = 0; },
  };
}

/** A test sidecar on a wrapped store, with its fault switches. */
export type FaultySidecar = TestSidecar & { faults: FaultyStore };

/**
 * Starts a test sidecar ({@link startSidecar}) on `withFaults(store)`, where the store is
 * `open()` (default: a SQLite file in a temp dir, removed on close).
 */
export async function startFaultySidecar(
  overrides: Partial<SidecarConfig> = {}, opts: BuildOptions & { clock?: never; store?: never } = {}, open?: () => Promise<Store>,
): Promise<FaultySidecar> {
  const dir = open ? null : fs.mkdtempSync(path.join(os.tmpdir(), 'authz-faults-'));
  const inner = open ? await open() : openSqliteStore({ file: path.join(dir!, DB_FILE_NAME) });
  const faults = withFaults(inner);
  const sc = await startSidecar(overrides, { ...opts, store: faults.store });
  return {
    ...sc,
    faults,
    async close() {
      faults.clear();
      await sc.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
