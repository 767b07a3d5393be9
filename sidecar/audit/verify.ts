/**
 * The offline verification of an audit trail: runs the chain checker
 * (`src/audit-check.ts`) over every account of an {@link AuditSource} (a
 * database opened read-only, or an export file) with the trusted service keys,
 * and sums it up. An export also has the range of positions its header
 * announces checked against its rows ({@link rangeProblem}). The command line
 * around it is `verify-command.ts`.
 */
import { AccountChainChecker } from '../../src/audit-check.js';
import type { AccountCheck, ChainProblem } from '../../src/audit-check.js';
import { keyIdOf } from '../../src/audit-chain.js';
import { createVerifier, publicKeyFromJson } from '../../src/crypto/hybrid.js';
import type { HybridVerifier } from '../../src/crypto/hybrid.js';
import type { AuditSource } from '../store/types.js';

/** The outcome of {@link verifyTrail}. */
export interface TrailReport {
  ok: boolean;
  /** Key ids trusted for checkpoint signatures. */
  keyIds: string[];
  /** True when the trusted keys were pinned by the caller (else: whatever keys the source holds). */
  pinned: boolean;
  accounts: AccountCheck[];
  /** The first problem of each broken account. */
  problems: ChainProblem[];
  rows: number;
  /** Rows after their account's last valid checkpoint (not yet signed). */
  unsigned: number;
}

/** Options of {@link verifyTrail}. */
export interface VerifyOptions {
  /** Trust only these key ids (each must match the key's own SHA-256, `keyIdOf`). Default: every key in the source. */
  pinnedKeyIds?: readonly string[];
  /** The source is an export of a range (the chain may start anywhere). */
  partial?: boolean;
  /**
   * The positions the source says it holds (an export's header; first and last both null for
   * none): rows that do not reach them were cut from the start or the end.
   */
  range?: { first: number | null; last: number | null };
}

/**
 * A problem when an account's intact rows do not span `range`: `rows_missing` at the first
 * absent position when rows were cut from the start or the end, `malformed` when there are
 * rows outside it. Null when they match.
 */
export function rangeProblem(a: AccountCheck, range: { first: number | null; last: number | null }): ChainProblem | null {
  const p = (kind: ChainProblem['kind'], position: number | null, message: string): ChainProblem =>
    ({ kind, accountId: a.accountId, position, eventId: null, message });
  const { first, last } = range;
  if (first === null || last === null) {
    return a.firstPosition === null ? null : p('malformed', a.firstPosition, 'the export announces no events, but it has event lines');
  }
  if (a.firstPosition === null || a.lastPosition === null) {
    return p('rows_missing', first, `the export announces positions ${first}–${last}, but it has no event lines: they were removed`);
  }
  if (a.firstPosition > first) {
    return p('rows_missing', first, `the export announces events from position ${first}, `
      + `but its first event line is at ${a.firstPosition}: rows were removed from the start`);
  }
  if (a.firstPosition < first) {
    return p('malformed', a.firstPosition, `an event line at position ${a.firstPosition}, before the export's first position ${first}`);
  }
  if (a.lastPosition < last) {
    return p('rows_missing', a.lastPosition + 1, `the export announces events up to position ${last}, `
      + `but its last event line is at ${a.lastPosition}: rows were removed from the end`);
  }
  if (a.lastPosition > last) return p('malformed', last + 1, `event lines after the export's last position ${last}`);
  return null;
}

/** Verifies every account of `source`. Reads everything once; the source stays open. */
export async function verifyTrail(source: AuditSource, opts: VerifyOptions = {}): Promise<TrailReport> {
  const keys = new Map<string, HybridVerifier>();
  for (const k of await source.serviceKeys()) {
    let parsed: unknown;
    try { parsed = JSON.parse(k.publicKey); } catch { continue; }
    const pk = publicKeyFromJson(parsed);
    // A key counts only under its own id: a row whose id and key disagree is ignored.
    if (!pk || keyIdOf(pk) !== k.id) continue;
    if (opts.pinnedKeyIds && !opts.pinnedKeyIds.includes(k.id)) continue;
    keys.set(k.id, createVerifier(pk));
  }
  const accounts: AccountCheck[] = [];
  for (const accountId of await source.accounts()) {
    const checker = new AccountChainChecker(accountId, await source.checkpoints(accountId), keys, { partial: opts.partial === true });
    for await (const r of source.rows(accountId)) {
      if (!checker.add(r)) break;
    }
    const un = await source.unchained(accountId);
    if (un.count > 0) checker.unchained(un.count, un.firstId ?? '');
    const check = checker.finish(await source.head(accountId));
    // Only an intact chain is measured against the range (a broken one already names its first broken row).
    const cut = opts.range && check.problem === null ? rangeProblem(check, opts.range) : null;
    accounts.push(cut ? { ...check, problem: cut } : check);
  }
  const problems = accounts.flatMap((a) => (a.problem ? [a.problem] : []));
  return {
    ok: problems.length === 0, keyIds: [...keys.keys()], pinned: opts.pinnedKeyIds !== undefined, accounts, problems,
    rows: accounts.reduce((n, a) => n + a.rows, 0),
    unsigned: accounts.reduce((n, a) => n + (a.problem || a.lastPosition === null ? 0 : a.lastPosition - (a.signedTo ?? (a.firstPosition ?? 1) - 1)), 0),
  };
}
