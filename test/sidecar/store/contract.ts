/**
 * The store contract: an engine-neutral test suite that every implementation
 * of the store interface (`sidecar/store/types.ts`) must pass. It uses only
 * the interface: no SQL, no engine type, no file. Each engine's test file
 * calls {@link runStoreContract} with a function that opens a new, empty store
 * (test/sidecar/store/sqlite.test.ts, test/sidecar/postgres/contract.test.ts).
 *
 * Covered: every method of every sub-store, the once-only state changes
 * under real concurrency (the promises are started together; an engine with
 * a connection pool runs them on several connections), and the atomicity
 * promises: an operation that fails part-way (a duplicate key late in the
 * transaction) writes nothing at all.
 *
 * The parts live in contract-*.ts; fixtures in contract-fixtures.ts. The verify
 * commit's rules, written in TypeScript for SQLite and in PL/pgSQL for
 * PostgreSQL, are one table of cases (contract-commit-rules.ts).
 */
import type { Test } from 'tap';
import type { Store } from '../../../sidecar/store/types.js';
import { accountsContract } from './contract-accounts.js';
import { platformsContract } from './contract-platforms.js';
import { delegationsContract } from './contract-delegations.js';
import { chainsContract } from './contract-chains.js';
import { proofsContract } from './contract-proofs.js';
import { outboxContract } from './contract-outbox.js';
import { limitsContract } from './contract-limits.js';
import { storeLevelContract } from './contract-store.js';
import { approvalsContract } from './contract-approvals.js';
import { auditContract } from './contract-audit.js';
import { auditExportContract } from './contract-audit-export.js';
import { commitRulesContract } from './contract-commit-rules.js';
import { commitExplanationContract, decisionsContract } from './contract-decisions.js';
import { idempotencyContract } from './contract-idempotency.js';
import { organisationsContract } from './contract-organisations.js';
import { publishingContract } from './contract-publishing.js';

/** Opens a new, empty, migrated store. */
export type OpenStore = () => Promise<Store>;

/** Runs the whole contract as subtests of `t`, named `<name>: <part>`. */
export async function runStoreContract(t: Test, name: string, open: OpenStore): Promise<void> {
  const parts: [string, (t: Test, open: OpenStore) => Promise<void>][] = [
    ['store', storeLevelContract],
    ['accounts, login codes and sessions', accountsContract],
    ['rate limits, key check, pool', limitsContract],
    ['platforms, connections, keys and agents', platformsContract],
    ['delegation requests and certificates', delegationsContract],
    ['sub-delegation chains', chainsContract],
    ['challenges, decisions and audit', proofsContract],
    ['webhook outbox', outboxContract],
    ['approvals and usage counters', approvalsContract],
    ['audit chain, checkpoints and retention', auditContract],
    ['audit reads, ranges, export cursors and service keys', auditExportContract],
    ['the verify commit\'s rules, one table for both implementations', commitRulesContract],
    ['decision explanations', decisionsContract],
    ['a commit\'s explanation', commitExplanationContract],
    ['the idempotency ledger', idempotencyContract],
    ['organisations, memberships, invitations', organisationsContract],
    ['publisher domains, publish states, the directory', publishingContract],
  ];
  for (const [part, fn] of parts) await t.test(`${name}: ${part}`, (tt) => fn(tt, open));
}
