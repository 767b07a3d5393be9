/**
 * The offline checker of one account's audit chain (pure: no I/O): fed the
 * account's checkpoints, then its rows in position order, it checks every
 * link, every checkpoint signature, that no position is missing, and that the
 * chain starts at the genesis or right after a signed retention anchor. It
 * stops at the first broken row and reports it. The chain itself is defined in
 * `audit-chain.ts`; `agent-authz-sidecar audit verify` drives this.
 */
import { GENESIS_HASH, checkpointMessage, isHash, rowHash, CHECKPOINT_DOMAIN } from './audit-chain.js';
import type { AuditCheckpoint, ChainedRow } from './audit-chain.js';
import { signatureFromJson } from './crypto/hybrid.js';
import type { HybridVerifier } from './crypto/hybrid.js';

/** What is wrong, as a stable word (docs/audit.md lists them). */
export type ChainProblemKind =
  | 'row_changed' | 'link_broken' | 'rows_missing' | 'out_of_order' | 'unanchored_start' | 'unchained_row'
  | 'checkpoint_forged' | 'checkpoint_unknown_key' | 'checkpoint_mismatch' | 'head_mismatch' | 'malformed';

/** One problem; `position` is the first broken row (null when none can be named). */
export interface ChainProblem {
  kind: ChainProblemKind;
  accountId: string;
  position: number | null;
  eventId: string | null;
  message: string;
}

/** The outcome for one account. */
export interface AccountCheck {
  accountId: string;
  rows: number;
  firstPosition: number | null;
  lastPosition: number | null;
  checkpoints: number;
  /** The highest position covered by a valid checkpoint whose head matched (rows after it are not yet signed). */
  signedTo: number | null;
  /** The first problem (lowest position), or null when the chain holds. */
  problem: ChainProblem | null;
}

/** Options of {@link AccountChainChecker}. */
export interface CheckOptions {
  /**
   * An export of a range: the chain may start at any position (the first row's `prev` is
   * taken as given, and authenticated by the checkpoints after it). A database must start at
   * position 1 or right after a retention anchor.
   */
  partial?: boolean;
}

/** Checks one account's chain. Feed {@link add} the rows in ascending position, then call {@link finish}. */
export class AccountChainChecker {
  private readonly accountId: string;
  private readonly partial: boolean;
  /** Valid checkpoints by position (the newest wins when several sign one position). */
  private readonly valid = new Map<number, AuditCheckpoint>();
  private readonly problems: ChainProblem[] = [];
  private readonly checkpointCount: number;
  private rows = 0;
  private first: ChainedRow | null = null;
  private last: ChainedRow | null = null;
  private signedTo: number | null = null;
  private broken = false;

  constructor(accountId: string, checkpoints: readonly AuditCheckpoint[], keys: ReadonlyMap<string, HybridVerifier>, opts: CheckOptions = {}) {
    this.accountId = accountId;
    this.partial = opts.partial === true;
    this.checkpointCount = checkpoints.length;
    for (const c of checkpoints) {
      const problem = this.checkCheckpoint(c, keys);
      if (problem) this.problems.push(problem);
      else this.valid.set(c.position, c);
    }
  }

  /** Adds the next row; returns false once the chain is broken (later rows are not checked). */
  add(r: ChainedRow): boolean {
    if (this.broken) return false;
    this.rows++;
    const fail = (kind: ChainProblemKind, message: string, at: number | null = Number.isSafeInteger(r.position) ? r.position : null): boolean => {
      this.broken = true;
      this.problems.push({ kind, accountId: this.accountId, position: at, eventId: at === r.position ? r.id : null, message });
      return false;
    };
    if (r.accountId !== this.accountId || !Number.isSafeInteger(r.position) || r.position < 1 || !isHash(r.prevHash) || !isHash(r.hash)) {
      return fail('malformed', 'the row has no valid chain fields (position, prev_hash, hash)');
    }
    const prev = this.last;
    if (prev === null) {
      if (r.position === 1 && r.prevHash !== GENESIS_HASH) return fail('link_broken', 'the first row does not start from the genesis hash');
      if (r.position > 1 && !this.partial) {
        const anchor = this.valid.get(r.position - 1);
        if (!anchor || anchor.kind !== 'anchor') {
          return fail('unanchored_start',
            `the chain starts at position ${r.position} without a signed retention anchor at ${r.position - 1}: rows 1–${r.position - 1} are missing`, 1);
        }
        if (anchor.head !== r.prevHash) return fail('link_broken', `the row does not link to the retention anchor at position ${anchor.position}`);
      }
    } else if (r.position <= prev.position) {
      return fail('out_of_order', `position ${r.position} follows position ${prev.position}: rows were reordered or inserted`);
    } else if (r.position > prev.position + 1) {
      return fail('rows_missing', `rows ${prev.position + 1}–${r.position - 1} are missing (deleted)`, prev.position + 1);
    } else if (r.prevHash !== prev.hash) {
      return fail('link_broken', `the row does not link to row ${prev.position}: a row was changed, inserted or reordered`);
    }
    let computed: string;
    try {
      computed = rowHash(r);
    } catch {
      return fail('malformed', 'the row\'s fields cannot be encoded canonically');
    }
    if (computed !== r.hash) return fail('row_changed', 'the row\'s contents do not match its hash: the row was changed');
    const cp = this.valid.get(r.position);
    if (cp) {
      if (cp.head !== r.hash) return fail(
        'checkpoint_mismatch',
          `the signed checkpoint ${cp.id} at this position names another hash: the chain was rewritten up to here`);
      this.signedTo = r.position;
    }
    this.first ??= r;
    this.last = r;
    return true;
  }

  /** Rows without chain fields (written with the chain off, or inserted): the first one is a problem. */
  unchained(count: number, firstEventId: string): void {
    if (count > 0) this.problems.push(
      { kind: 'unchained_row', accountId: this.accountId, position: null, eventId: firstEventId,
        message: `${count} row(s) carry no chain link (written with SIDECAR_AUDIT_CHAIN=off, or inserted)` });
  }

  /**
   * Ends the check. `head` is the stored chain head (a database; omit for an export): the
   * last row must be it, so rows removed from the end are found.
   */
  finish(head?: { position: number; hash: string } | null): AccountCheck {
    const lastPos = this.last?.position ?? null;
    if (!this.broken) {
      // A valid checkpoint beyond the last row: rows were removed from the end.
      const beyond = [...this.valid.values()].filter((c) => c.position > (lastPos ?? 0) && !(this.rows === 0 && c.kind === 'anchor'))
        .sort((a, b) => a.position - b.position)[0];
      if (beyond) {
        this.problem('rows_missing', (lastPos ?? 0) + 1, null,
          `the signed checkpoint ${beyond.id} covers position ${beyond.position}, but the rows end at ${lastPos ?? 'none'}: rows were removed from the end`);
      } else if (head !== undefined && head !== null) {
        const anchor = this.rows === 0 ? [...this.valid.values()].find((c) => c.kind === 'anchor' && c.position === head.position) : undefined;
        const endHash = this.last?.hash ?? anchor?.head;
        const endPos = lastPos ?? anchor?.position;
        if (endPos !== head.position || endHash !== head.hash) {
          this.problem('head_mismatch', endPos === undefined ? 1 : endPos + 1, null,
            `the stored chain head is position ${head.position}, but the rows end at ${endPos ?? 'none'}: `
            + 'rows were removed from the end, or the head was changed');
        }
      }
    }
    const problem = this.problems.slice().sort((a, b) => (a.position ?? Infinity) - (b.position ?? Infinity))[0] ?? null;
    return {
      accountId: this.accountId, rows: this.rows, firstPosition: this.first?.position ?? null, lastPosition: lastPos,
      checkpoints: this.checkpointCount, signedTo: this.signedTo, problem,
    };
  }

  private problem(kind: ChainProblemKind, position: number | null, eventId: string | null, message: string): void {
    this.problems.push({ kind, accountId: this.accountId, position, eventId, message });
  }

  private checkCheckpoint(c: AuditCheckpoint, keys: ReadonlyMap<string, HybridVerifier>): ChainProblem | null {
    const at = { accountId: this.accountId, position: Number.isSafeInteger(c.position) ? c.position : null, eventId: null };
    if (c.accountId !== this.accountId || !Number.isSafeInteger(c.position) || c.position < 1 || !isHash(c.head)) {
      return { ...at, kind: 'malformed', message: `checkpoint ${c.id} is malformed` };
    }
    const verifier = keys.get(c.keyId);
    if (!verifier) return { ...at, kind: 'checkpoint_unknown_key',
      message: `checkpoint ${c.id} is signed by key ${c.keyId}, which is not a trusted service key` };
    const sig = signatureFromJson(c.signature);
    let ok = false;
    try {
      ok = sig !== null && verifier.verify(CHECKPOINT_DOMAIN, checkpointMessage(c), sig);
    } catch {
      ok = false;
    }
    return ok ? null : { ...at, kind: 'checkpoint_forged', message: `checkpoint ${c.id}'s signature does not verify: it was forged or changed` };
  }
}
