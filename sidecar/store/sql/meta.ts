/** The store's own metadata (`store_meta`): the master-key check value (key-check.ts). */
import { bytes, get, run, sql } from './core.js';
import type { Runner } from './core.js';

/** Stores `candidate` as the key-check value unless one is stored; returns the stored one. */
export function keyCheck(r: Runner, candidate: Uint8Array): Promise<Uint8Array> {
  return r.write((function* () {
    yield* run(sql`INSERT INTO store_meta (key, value) VALUES ('key_check', ${bytes(candidate)}) ON CONFLICT (key)
      DO NOTHING`);
    return new Uint8Array((yield* get<{ value: Buffer }>(sql`SELECT value FROM store_meta
      WHERE key = 'key_check'`))!.value);
  })());
}
