/**
 * A throwaway PostgreSQL server for one test file (test/shared/pg-server.ts: Debian's
 * `postgresql` package, which `.ci/run` installs; a copy of an `initdb` template in a temp dir;
 * `postgres` on a free loopback port), stopped and removed in the test's
 * teardown.
 *
 * In CI (`CI=true`) a missing or failing server fails the test with the
 * reason; elsewhere {@link startPostgres} returns null after printing why the
 * file is skipped.
 */
import type { Test } from 'tap';
import { findPostgres, launchPostgres } from '../shared/pg-server.js';
import type { PgCluster } from '../shared/pg-server.js';

export type { PgCluster } from '../shared/pg-server.js';

/**
 * Starts a cluster for the test `t` (stopped and removed in its teardown). Returns null
 * outside CI when no server can be started (the reason is printed and the file is skipped);
 * in CI it throws with the reason.
 */
export async function startPostgres(t: Test, o: { settings?: Record<string, string> } = {}): Promise<PgCluster | null> {
  const found = findPostgres();
  const refuse = (reason: string): null => {
    if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`PostgreSQL tests must run in CI: ${reason}`);
    t.comment(`skipped: ${reason}`);
    t.pass('PostgreSQL tests', { skip: `PostgreSQL not available: ${reason}` });
    return null;
  };
  if ('reason' in found) return refuse(found.reason);
  try {
    const c = await launchPostgres(o.settings ? { settings: o.settings } : {});
    t.teardown(() => c.destroy());
    return c;
  } catch (err) {
    return refuse(`the test server did not start: ${(err as Error).message}`);
  }
}

