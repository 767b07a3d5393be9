/**
 * Numbered schema migrations for the SQLite store, applied in order at
 * startup by `Db.migrate()`. Never edit a released migration: add a new one.
 *
 * Times are stored as integer Unix milliseconds; JSON columns hold canonical
 * JSON text; `*_enc` columns hold AES-256-GCM sealed bytes (see src/crypto/seal.ts).
 */
import { AUDIT_CHAIN_SQL, chainExistingRows } from './migration-audit.js';
import type { MigrationDb } from './migration-audit.js';
import {
  DECISION_EXPLANATIONS, IDEMPOTENCY_LEDGER, ORGANISATIONS, PROPOSED_CONSTRAINTS, PUBLISHER_DOMAINS,
  SUB_DELEGATION_CHAINS,
  migrationFor,
} from '../schema.js';

export type { MigrationDb } from './migration-audit.js';

/** One migration. */
export interface Migration {
  /** Strictly increasing version number. */
  version: number;
  /** Short name, recorded in `schema_migrations`. */
  name: string;
  /** The SQL to run (inside one transaction). */
  sql: string;
  /** Work that SQL cannot do (hashing), run after `sql` in the same transaction. */
  after?: (db: MigrationDb) => void;
}

/** All migrations, oldest first. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
CREATE TABLE accounts (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  first_name TEXT,
  last_name TEXT,
  account_type TEXT,
  onboarding_step TEXT NOT NULL,
  root_public_key TEXT,
  root_secret_enc BLOB,
  credits_micros INTEGER NOT NULL DEFAULT 0,
  verify_calls INTEGER NOT NULL DEFAULT 0,
  verify_allows INTEGER NOT NULL DEFAULT 0,
  verify_denies INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);

CREATE TABLE login_codes (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL,
  code_hash TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  expires_at INTEGER NOT NULL,
  used_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX login_codes_email ON login_codes (email, created_at);

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  expires_at INTEGER NOT NULL,
  absolute_expires_at INTEGER NOT NULL,
  ended_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX sessions_account ON sessions (account_id);

CREATE TABLE platforms (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  surface_type TEXT NOT NULL,
  publish_state TEXT NOT NULL,
  default_allowed_scopes TEXT NOT NULL,
  callback_url TEXT,
  callback_disabled_at INTEGER,
  signing_secret_enc BLOB NOT NULL,
  webhook_secret_enc BLOB NOT NULL,
  expires_at INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX platforms_account ON platforms (account_id);

CREATE TABLE connections (
  id TEXT PRIMARY KEY,
  platform_id TEXT NOT NULL REFERENCES platforms(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  allowed_scopes TEXT NOT NULL,
  status TEXT NOT NULL,
  removed_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX connections_account ON connections (account_id);
CREATE INDEX connections_platform ON connections (platform_id);

CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id),
  prefix TEXT NOT NULL UNIQUE,
  digest TEXT NOT NULL,
  status TEXT NOT NULL,
  valid_until INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX api_keys_connection ON api_keys (connection_id);

CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  name TEXT NOT NULL,
  agent_type TEXT NOT NULL,
  custody_mode TEXT NOT NULL,
  public_key TEXT NOT NULL,
  secret_enc BLOB NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX agents_connection ON agents (connection_id);

CREATE TABLE delegation_requests (
  id TEXT PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  agent_id TEXT NOT NULL REFERENCES agents(id),
  requested_scopes TEXT NOT NULL,
  state TEXT NOT NULL,
  cert_id TEXT,
  decided_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX delegation_requests_account ON delegation_requests (account_id, created_at);

CREATE TABLE certificates (
  id TEXT PRIMARY KEY,
  request_id TEXT NOT NULL REFERENCES delegation_requests(id),
  account_id TEXT NOT NULL REFERENCES accounts(id),
  connection_id TEXT NOT NULL REFERENCES connections(id),
  agent_id TEXT NOT NULL REFERENCES agents(id),
  approved_scope TEXT NOT NULL,
  constraints TEXT,
  cert_json TEXT NOT NULL,
  cert_sha256 TEXT NOT NULL,
  status TEXT NOT NULL,
  issued_at INTEGER NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER,
  revoke_reason TEXT
);
CREATE INDEX certificates_agent ON certificates (agent_id, status);
CREATE INDEX certificates_account ON certificates (account_id, issued_at);

CREATE TABLE challenges (
  id TEXT PRIMARY KEY,
  audience_connection_id TEXT NOT NULL,
  account_id TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  presented_at INTEGER,
  consumed_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX challenges_expiry ON challenges (expires_at);

CREATE TABLE audit_events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  connection_id TEXT,
  agent_id TEXT,
  cert_id TEXT,
  required_scope TEXT,
  details TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX audit_account ON audit_events (account_id, seq);
CREATE INDEX audit_account_type ON audit_events (account_id, event_type, seq);
CREATE INDEX audit_account_agent ON audit_events (account_id, agent_id, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit_events BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;

CREATE TABLE outbox (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  platform_id TEXT NOT NULL,
  connection_id TEXT,
  event_type TEXT NOT NULL,
  body_enc BLOB NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  lease_until INTEGER,
  last_status INTEGER,
  last_error TEXT,
  delivered_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX outbox_due ON outbox (state, next_attempt_at);
CREATE INDEX outbox_platform ON outbox (platform_id, seq);

CREATE TABLE delivery_attempts (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_id TEXT NOT NULL REFERENCES outbox(id),
  attempt INTEGER NOT NULL,
  attempted_at INTEGER NOT NULL,
  status INTEGER,
  error TEXT,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id, attempt);
`,
  },
  {
    version: 2,
    name: 'key check and rate limits',
    sql: `
CREATE TABLE store_meta (
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL
);

CREATE TABLE rate_limits (
  key TEXT PRIMARY KEY,
  window_end INTEGER NOT NULL,
  count INTEGER NOT NULL
);
CREATE INDEX rate_limits_end ON rate_limits (window_end);
`,
  },
  // Version 2 is the PostgreSQL branch's (key check and rate limits); this one is numbered after it.
  {
    version: 3,
    name: 'approvals and usage counters',
    sql: `
CREATE TABLE approvals (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  account_id TEXT NOT NULL,
  connection_id TEXT NOT NULL,
  platform_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  cert_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  context TEXT NOT NULL,
  operation TEXT,
  state TEXT NOT NULL,
  note TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  decided_at INTEGER,
  settled_at INTEGER
);
CREATE UNIQUE INDEX approvals_one_pending ON approvals (cert_id, fingerprint) WHERE state = 'pending';
CREATE INDEX approvals_operation ON approvals (cert_id, fingerprint, seq);
CREATE INDEX approvals_account ON approvals (account_id, seq);
CREATE INDEX approvals_due ON approvals (state, expires_at);

CREATE TABLE usage_counters (
  cert_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  window_start INTEGER NOT NULL,
  used INTEGER NOT NULL,
  PRIMARY KEY (cert_id, kind, window_start)
);
`,
  },
  { version: 4, name: 'audit hash chain, checkpoints, export cursors, service keys', sql: AUDIT_CHAIN_SQL, after: chainExistingRows },
  { version: 5, ...migrationFor(DECISION_EXPLANATIONS, 'sqlite') },
  { version: 6, ...migrationFor(IDEMPOTENCY_LEDGER, 'sqlite') },
  { version: 7, ...migrationFor(ORGANISATIONS, 'sqlite') },
  { version: 8, ...migrationFor(PUBLISHER_DOMAINS, 'sqlite') },
  { version: 9, ...migrationFor(SUB_DELEGATION_CHAINS, 'sqlite') },
  { version: 10, ...migrationFor(PROPOSED_CONSTRAINTS, 'sqlite') },
];
