/**
 * The webhook outbox on SQLite: the shared {@link SqlOutboxStore} on a SQLite
 * connection, plus what only a single-process engine can do (release every
 * lease when the worker starts).
 */
import type { Db } from './db.js';
import { SqliteRunner } from './runner.js';
import { run, sql } from '../sql/core.js';
import { SqlOutboxStore, insertOutboxEvent as insertEvent } from '../sql/outbox.js';
import type { OutboxEventInput } from '../types.js';

/** Puts one event in the outbox; synchronous: call it inside the caller's `db.tx` (see sql/outbox.ts). */
export function insertOutboxEvent(db: Db, e: OutboxEventInput): void {
  new SqliteRunner(db).now(insertEvent(e));
}

/** The webhook outbox on SQLite. */
export class SqliteOutboxStore extends SqlOutboxStore {
  constructor(db: Db | SqliteRunner) {
    super(db instanceof SqliteRunner ? db : new SqliteRunner(db));
  }

  /**
   * Clears the lease of every pending delivery (worker start). Only valid while no other process
   * works on this database file: the deployment runs one sidecar process per database. The
   * PostgreSQL engine has none: a starting replica cannot tell a dead peer's lease from a live one's.
   */
  async releaseAllLeases(): Promise<number> {
    return this.r.write(run(sql`UPDATE outbox SET lease_until = NULL WHERE state = 'pending' AND lease_until IS NOT NULL`));
  }
}
