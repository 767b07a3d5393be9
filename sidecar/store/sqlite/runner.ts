/**
 * The SQLite {@link Runner}: runs the shared units of work (sql/) synchronously
 * on the one connection, so a work is one `BEGIN IMMEDIATE … COMMIT` (or one
 * savepoint of a group commit) with nothing interleaved.
 */
import { compile, driveSync } from '../sql/core.js';
import type { Runner, Work, WriteOptions } from '../sql/core.js';
import type { Db } from './db.js';

/** Runs shared works on a {@link Db}. */
export class SqliteRunner implements Runner {
  readonly dialect = 'sqlite' as const;
  readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  /** Runs `work` now, inside the caller's transaction if there is one. */
  now<T>(work: Work<T>): T {
    return driveSync(work, 'sqlite', (op) => {
      const { text, params } = compile(op.stmt, 'sqlite');
      const s = this.db.stmt(text);
      return op.kind === 'run' ? s.run(...params).changes : op.kind === 'get' ? s.get(...params) : s.all(...params);
    });
  }

  async read<T>(work: Work<T>): Promise<T> {
    return this.now(work);
  }

  async write<T>(work: Work<T>, o?: WriteOptions): Promise<T> {
    return o?.group ? this.db.groupTx(() => this.now(work)) : this.db.tx(() => this.now(work));
  }

  tx<T>(work: Work<T>, o?: WriteOptions): Promise<T> {
    return this.write(work, o);
  }

  /** Every SQLite commit is durable when it returns (see docs/storage.md for the synchronous level). */
  async flushBarrier(): Promise<void> {}
}
