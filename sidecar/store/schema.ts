/**
 * Schema migrations written once for both engines. A table that is the same on SQLite and on
 * PostgreSQL but for the names of two column types is written here once, in PostgreSQL's words
 * (`BIGINT` for times and counts, `BYTEA` for sealed bytes), and each engine's migration list
 * (`sqlite/migrations.ts`, `postgres/migrations.ts`) takes it under its own version number with
 * {@link migrationFor}, which renders SQLite's words (`INTEGER`, `BLOB`: the types that engine's
 * own migrations use, so the copy command and the schema checks see one schema).
 *
 * Add a new migration here unless the dialects truly differ (a PL/pgSQL function, a trigger, a
 * table rebuild): then each engine list gets its own. Never edit a released migration: add one.
 */
import type { Dialect } from './sql/core.js';

/** A migration both engines run. */
export interface SharedMigration {
  /** Short name, recorded in each engine's `schema_migrations`. */
  readonly name: string;
  /** The SQL in PostgreSQL's type names. */
  readonly sql: string;
}

/** A shared migration's name and SQL for one dialect. */
export function migrationFor(m: SharedMigration, dialect: Dialect): { name: string; sql: string } {
  const sql = dialect === 'pg' ? m.sql : m.sql.replace(/\bBIGINT\b/g, 'INTEGER').replace(/\bBYTEA\b/g, 'BLOB');
  return { name: m.name, sql };
}

/** Decision explanations (SQLite version 5, PostgreSQL 3). */
export const DECISION_EXPLANATIONS: SharedMigration = {
  name: 'decision explanations',
  sql: `
CREATE TABLE decision_explanations (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  connection_id TEXT NOT NULL,
  explanation TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX decision_explanations_created ON decision_explanations (created_at);
`,
};

/** The idempotency ledger (SQLite version 6, PostgreSQL 4). */
export const IDEMPOTENCY_LEDGER: SharedMigration = {
  name: 'idempotency ledger',
  sql: `
CREATE TABLE idempotency_records (
  connection_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  claim_id TEXT NOT NULL UNIQUE,
  state TEXT NOT NULL,
  response TEXT,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (connection_id, agent_id, idem_key)
);
CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_at);
`,
};

/**
 * Organisations (SQLite version 7, PostgreSQL 5; issue 32). An organisation is an `accounts` row
 * (a workspace with its own root identity, credits, platforms and audit chain, as a personal
 * account is), with `account_type` `organization`, its name in `org_name` and a placeholder
 * `email` (`org:<id>`: no address a login accepts has no `@`). People belong to it through
 * `memberships`; a session acts in one workspace (`sessions.workspace_id`; NULL: the person's own).
 */
export const ORGANISATIONS: SharedMigration = {
  name: 'organisations, memberships, invitations',
  sql: `
ALTER TABLE accounts ADD COLUMN org_name TEXT;
ALTER TABLE sessions ADD COLUMN workspace_id TEXT REFERENCES accounts(id);
CREATE INDEX sessions_workspace ON sessions (workspace_id, account_id);

CREATE TABLE memberships (
  org_id TEXT NOT NULL REFERENCES accounts(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  role TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (org_id, account_id)
);
CREATE INDEX memberships_account ON memberships (account_id);

CREATE TABLE invitations (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES accounts(id),
  email TEXT NOT NULL,
  role TEXT NOT NULL,
  invited_by TEXT NOT NULL REFERENCES accounts(id),
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  decided_at BIGINT,
  accepted_by TEXT REFERENCES accounts(id)
);
CREATE UNIQUE INDEX invitations_one_pending ON invitations (org_id, email) WHERE state = 'pending';
CREATE INDEX invitations_email ON invitations (email, state);
`,
};

/**
 * Publisher domains (SQLite version 8, PostgreSQL 6; issue 32): the domain an organisation
 * claims, the token its DNS TXT record must carry, and when it was verified, lapsed and last
 * checked. A domain is verified by one organisation at a time (the partial unique index).
 */
export const PUBLISHER_DOMAINS: SharedMigration = {
  name: 'publisher domains',
  sql: `
CREATE TABLE publisher_domains (
  org_id TEXT PRIMARY KEY REFERENCES accounts(id),
  domain TEXT NOT NULL,
  token TEXT NOT NULL,
  claimed_at BIGINT NOT NULL,
  verified_at BIGINT,
  lapsed_at BIGINT,
  checked_at BIGINT,
  last_outcome TEXT
);
CREATE UNIQUE INDEX publisher_domains_verified ON publisher_domains (domain)
  WHERE verified_at IS NOT NULL AND lapsed_at IS NULL;
CREATE INDEX publisher_domains_checked ON publisher_domains (checked_at);
`,
};

/**
 * Sub-delegation chains (SQLite version 9, PostgreSQL 7; issue 33, docs/certificates.md): a
 * certificate's parent (NULL: the account holder signed it), its depth in the chain (0 there)
 * and the right to delegate it grants (0: none); the index serves the cascade revocation.
 */
export const SUB_DELEGATION_CHAINS: SharedMigration = {
  name: 'sub-delegation chains',
  sql: `
ALTER TABLE certificates ADD COLUMN parent_cert_id TEXT;
ALTER TABLE certificates ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE certificates ADD COLUMN max_delegation_depth INTEGER NOT NULL DEFAULT 0;
CREATE INDEX certificates_parent ON certificates (parent_cert_id, status);
`,
};

/**
 * Proposed constraints (SQLite version 10, PostgreSQL 8; issue 32, docs/organisations.md): the
 * constraints a platform proposes with a delegation request, as JSON (NULL: none proposed).
 * An approval keeps them or makes them stricter.
 */
export const PROPOSED_CONSTRAINTS: SharedMigration = {
  name: 'proposed constraints of delegation requests',
  sql: `
ALTER TABLE delegation_requests ADD COLUMN proposed_constraints TEXT;
`,
};
