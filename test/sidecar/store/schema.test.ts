/**
 * Migrations written once (sidecar/store/schema.ts): the rendering of PostgreSQL's type names
 * for SQLite, and both engine lists taking every shared migration, in the same order, under
 * strictly increasing versions.
 */
import t from 'tap';
import { DECISION_EXPLANATIONS, IDEMPOTENCY_LEDGER, ORGANISATIONS, PROPOSED_CONSTRAINTS, PUBLISHER_DOMAINS,
  SUB_DELEGATION_CHAINS, migrationFor } from '../../../sidecar/store/schema.js';
import { MIGRATIONS } from '../../../sidecar/store/sqlite/migrations.js';
import { PG_MIGRATIONS } from '../../../sidecar/store/postgres/migrations.js';

t.test('migrationFor renders the type names per dialect, whole words only', async (t) => {
  const m = { name: 'x', sql: 'CREATE TABLE t (a BIGINT NOT NULL, b BYTEA, c_bigint_note TEXT, BIGINTS TEXT);' };
  t.same(migrationFor(m, 'pg'), { name: 'x', sql: m.sql });
  t.same(migrationFor(m, 'sqlite'), { name: 'x', sql: 'CREATE TABLE t (a INTEGER NOT NULL, b BLOB, c_bigint_note TEXT, BIGINTS TEXT);' });
});

t.test('both engines run every shared migration, in order', async (t) => {
  const shared = [DECISION_EXPLANATIONS, IDEMPOTENCY_LEDGER, ORGANISATIONS, PUBLISHER_DOMAINS, SUB_DELEGATION_CHAINS,
    PROPOSED_CONSTRAINTS];
  for (const [engine, list, dialect] of [['sqlite', MIGRATIONS, 'sqlite'], ['pg', PG_MIGRATIONS, 'pg']] as const) {
    const versions = list.map((m) => m.version);
    t.ok(versions.every((v, i) => i === 0 || v > versions[i - 1]!), `${engine}: versions strictly increase`);
    const found = shared.map((s) => list.findIndex((m) => m.name === s.name && m.sql === migrationFor(s, dialect).sql));
    t.ok(found.every((i) => i >= 0), `${engine}: every shared migration is in the list as rendered`);
    t.same([...found].sort((a, b) => a - b), found, `${engine}: in the shared order`);
  }
});
