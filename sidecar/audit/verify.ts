/**
 * The offline verification of an audit trail: runs the chain checker
 * (`src/audit-check.ts`) over every account of an {@link AuditSource} (a
 * database opened read-only, or an export file) with the trusted service keys,
 * and sums it up. The command line around it is `verify-command.ts`.
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
    accounts.push(checker.finish(await source.head(accountId)));
  }
  const problems = accounts.flatMap((a) => (a.problem ? [a.problem] : []));
  return {
    ok: problems.length === 0, keyIds: [...keys.keys()], pinned: opts.pinnedKeyIds !== undefined, accounts, problems,
    rows: accounts.reduce((n, a) => n + a.rows, 0),
    unsigned: accounts.reduce((n, a) => n + (a.problem || a.lastPosition === null ? 0 : a.lastPosition - (a.signedTo ?? (a.firstPosition ?? 1) - 1)), 0),
  };
}
