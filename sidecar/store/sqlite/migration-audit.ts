/**
 * SQLite migration 4: the audit hash chain (chain columns on `audit_events`,
 * per-account heads), signed checkpoints, push-export cursors and the service
 * signing keys; and the one-time step that chains the rows written before it
 * (hashing cannot be done in SQL). The link rule is `src/audit-chain.ts`.
 */
import { chainAfter } from '../../../src/audit-chain.js';

/** What a migration's `after` step may use: the statements of the open transaction. */
export interface MigrationDb {
  run(sql: string, ...params: unknown[]): number;
  all<T>(sql: string, ...params: unknown[]): T[];
}

/** The schema of migration 4. The append-only trigger is re-created by {@link chainExistingRows}. */
export const AUDIT_CHAIN_SQL = `
DROP TRIGGER audit_no_update;
ALTER TABLE audit_events ADD COLUMN chain_position INTEGER;
ALTER TABLE audit_events ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_events ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX audit_chain ON audit_events (account_id, chain_position);
CREATE INDEX audit_account_time ON audit_events (account_id, created_at);
CREATE INDEX audit_account_cert ON audit_events (account_id, cert_id, seq);

CREATE TABLE audit_chain_heads (
  account_id TEXT PRIMARY KEY,
  position INTEGER NOT NULL,
  hash TEXT NOT NULL,
  checkpoint_position INTEGER NOT NULL DEFAULT 0,
  checkpoint_at INTEGER NOT NULL
);

CREATE TABLE audit_checkpoints (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  head TEXT NOT NULL,
  kind TEXT NOT NULL,
  key_id TEXT NOT NULL,
  signature TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX audit_checkpoints_at ON audit_checkpoints (account_id, position, kind);

CREATE TABLE audit_export_cursors (
  sink TEXT NOT NULL,
  account_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  lease_until INTEGER,
  PRIMARY KEY (sink, account_id)
);

CREATE TABLE service_keys (
  id TEXT PRIMARY KEY,
  purpose TEXT NOT NULL UNIQUE,
  public_key TEXT NOT NULL,
  secret_enc BLOB NOT NULL,
  created_at INTEGER NOT NULL
);
`;

interface LegacyRow {
  seq: number; id: string; account_id: string; event_type: string; connection_id: string | null; agent_id: string | null;
  cert_id: string | null; required_scope: string | null; details: string; created_at: number;
}

/**
 * Chains the rows written before the chain existed, per account in `seq` order (they prove
 * integrity from the migration on: nothing signed them before), then re-creates the
 * append-only trigger.
 */
export function chainExistingRows(db: MigrationDb): void {
  const heads = new Map<string, { position: number; hash: string; startedAt: number }>();
  for (const r of db.all<LegacyRow>(`SELECT seq, id, account_id, event_type, connection_id, agent_id, cert_id, required_scope,
    details, created_at FROM audit_events ORDER BY seq`)) {
    const head = heads.get(r.account_id) ?? null;
    const link = chainAfter(head, {
      id: r.id, accountId: r.account_id, eventType: r.event_type, connectionId: r.connection_id, agentId: r.agent_id, certId: r.cert_id,
      requiredScope: r.required_scope, details: JSON.parse(r.details) as Record<string, unknown>, createdAt: r.created_at,
    });
    db.run('UPDATE audit_events SET chain_position = ?, prev_hash = ?, hash = ? WHERE seq = ?', link.position, link.prevHash, link.hash, r.seq);
    heads.set(r.account_id, { position: link.position, hash: link.hash, startedAt: head?.startedAt ?? r.created_at });
  }
  for (const [accountId, h] of heads) {
    db.run(`INSERT INTO audit_chain_heads (account_id, position, hash, checkpoint_position, checkpoint_at)
      VALUES (?, ?, ?, 0, ?)`, accountId, h.position, h.hash, h.startedAt);
  }
  db.run("CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit_events BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END");
}
