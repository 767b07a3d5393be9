/**
 * The PostgreSQL {@link Runner}: runs the shared units of work (sql/) on the
 * pool, awaiting each statement, in one transaction on one pooled client when
 * asked; and the flush barrier of the commits made without waiting for their
 * WAL flush (see proofs in docs/storage.md).
 */
import { compile, drive } from '../sql/core.js';
import type { Op, Runner, Work, WriteOptions } from '../sql/core.js';
import type { PgDb, Querier } from './db.js';

const exec = (q: Querier) => (op: Exclude<Op, { kind: 'dialect' }>): Promise<unknown> => {
  const { text, params } = compile(op.stmt, 'pg');
  return op.kind === 'all' ? q.all(text, params) : op.kind === 'get' ? q.get(text, params) : q.run(text, params);
};

/** Runs shared works on a {@link PgDb}. */
export class PgRunner implements Runner {
  readonly dialect = 'pg' as const;
  /** The flush barrier in flight, and the one queued behind it (see flushBarrier()). */
  private flushing: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  read<T>(work: Work<T>): Promise<T> {
    return drive(work, 'pg', exec(this.db));
  }

  write<T>(work: Work<T>, o?: WriteOptions): Promise<T> {
    return o?.lazy ? this.tx(work, o) : this.read(work);
  }

  /** With `lazy`, the transaction commits without waiting for its WAL flush (`synchronous_commit` off). */
  tx<T>(work: Work<T>, o?: WriteOptions): Promise<T> {
    return this.db.tx(async (q) => {
      if (o?.lazy && (await q.run("SELECT set_config('synchronous_commit', 'off', true)")) !== 1) {
        throw new Error('set_config failed');
      }
      return drive(work, 'pg', exec(q));
    });
  }

  /**
   * Waits until the WAL is flushed past every commit made so far: a tiny transaction that waits
   * for its own commit record, which (the WAL being one sequence) flushes every commit before it.
   * Callers share barriers: a barrier that starts after a caller's commit returned covers it, so
   * while one is in flight the callers that arrive wait for the next one, which starts when it ends.
   */
  flushBarrier(): Promise<void> {
    if (!this.flushing) {
      const p = this.db.run('SELECT pg_current_xact_id()').then(() => undefined);
      this.flushing = p;
      // Both outcomes handled here: a `finally()` copy of a failed barrier (the database cut
      // mid-flush) would be a second, unhandled rejection, and that ends the process.
      const clear = (): void => { this.flushing = undefined; };
      p.then(clear, clear);
      return p;
    }
    this.queued ??= this.flushing.catch(() => undefined).then(() => {
      this.queued = undefined;
      return this.flushBarrier();
    });
    return this.queued;
  }
}
