/**
 * The better-sqlite3 driver, loaded on first use: importing the SQLite engine
 * (as `store/index.ts` does for the tools and tests) loads neither its
 * JavaScript nor its native addon, so a sidecar on PostgreSQL never maps
 * `better_sqlite3.node` (test/sidecar/postgres/engine-loading.test.ts).
 */
import { createRequire } from 'node:module';
import type { Database, Options } from 'better-sqlite3';

type Driver = new (file: string, options?: Options) => Database;
let driver: Driver | undefined;

/** Opens a better-sqlite3 connection on `file`. */
export function openDatabase(file: string, options?: Options): Database {
  driver ??= createRequire(import.meta.url)('better-sqlite3') as Driver;
  return new driver(file, options);
}
