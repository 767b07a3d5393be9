/**
 * Store contract, store level: readiness (`ping`) reports a migrated schema,
 * and a closed store can be opened again by the engine's `open` (a new, empty
 * store each time: nothing leaks between opens).
 */
import type { Test } from 'tap';
import type { OpenStore } from './contract.js';
import { seed, storeFor } from './contract-fixtures.js';

/** Runs the store-level part. */
export async function storeLevelContract(t: Test, open: OpenStore): Promise<void> {
  const s = await storeFor(t, open);
  const p = await s.ping();
  t.equal(p.ok, true, 'ping: ok');
  t.ok(Number.isInteger(p.schemaVersion) && p.schemaVersion >= 1, 'ping: a schema version');
  t.equal(p.schemaVersion, p.expectedVersion, 'ping: every migration applied');
  const x = await seed(s);
  const other = await storeFor(t, open);
  t.equal(await other.accounts.getAccount(x.accountId), undefined, 'a second open is a different, empty store');
  t.same(await other.delegations.revokedCertificateIds(), []);
  t.same(await other.outbox.stats(), { pending: 0, oldestPendingAt: null });
}
