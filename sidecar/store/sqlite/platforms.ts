/**
 * SQLite implementation of {@link PlatformStore}: platforms, connections,
 * API keys and agents. Lifecycle events go into the outbox inside the same
 * transaction as the change they describe.
 */
import type { Db } from './db.js';
import { insertOutboxEvent } from './outbox.js';
import type {
  AgentRecord, ApiKeyRecord, ConnectionRecord, DeniedRequest, OutboxEventInput, PlatformRecord, PlatformStore, RevokedCert,
} from '../types.js';
import { agentFromRow, connectionFromRow, keyFromRow, platformFromRow } from '../rows.js';
import type { AgentRow, ConnectionRow, KeyRow, PlatformRow } from '../rows.js';


/** Platforms, connections, keys and agents on SQLite. */
export class SqlitePlatformStore implements PlatformStore {
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  private insertKey(k: ApiKeyRecord): void {
    this.db.run('INSERT INTO api_keys (id, connection_id, prefix, digest, status, valid_until, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      k.id, k.connectionId, k.prefix, k.digest, k.status, k.validUntil, k.createdAt);
  }

  async countPlatforms(accountId: string): Promise<number> {
    return this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM platforms WHERE account_id = ?', accountId)!.n;
  }

  async createPlatform(p: PlatformRecord, c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput | null, maxPlatforms: number): Promise<boolean> {
    return this.db.tx(() => {
      if (this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM platforms WHERE account_id = ?', p.accountId)!.n >= maxPlatforms) return false;
      this.db.run(`INSERT INTO platforms (id, account_id, name, description, surface_type, publish_state, default_allowed_scopes,
        callback_url, callback_disabled_at, signing_secret_enc, webhook_secret_enc, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      p.id, p.accountId, p.name, p.description, p.surfaceType, p.publishState, JSON.stringify(p.defaultAllowedScopes),
      p.callbackUrl, p.callbackDisabledAt, Buffer.from(p.signingSecretEnc), Buffer.from(p.webhookSecretEnc), p.expiresAt, p.createdAt);
      this.db.run('INSERT INTO connections (id, platform_id, account_id, allowed_scopes, status, removed_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        c.id, c.platformId, c.accountId, JSON.stringify(c.allowedScopes), c.status, c.removedAt, c.createdAt);
      this.insertKey(k);
      if (event) insertOutboxEvent(this.db, event);
      return true;
    });
  }

  async getPlatform(id: string): Promise<PlatformRecord | undefined> {
    const r = this.db.get<PlatformRow>('SELECT * FROM platforms WHERE id = ?', id);
    return r && platformFromRow(r);
  }

  async listPlatforms(accountId: string): Promise<PlatformRecord[]> {
    return this.db.all<PlatformRow>('SELECT * FROM platforms WHERE account_id = ? ORDER BY created_at, id', accountId).map(platformFromRow);
  }

  async setCallbackUrl(platformId: string, url: string | null): Promise<void> {
    this.db.tx(() => { this.db.run('UPDATE platforms SET callback_url = ?, callback_disabled_at = NULL WHERE id = ?', url, platformId); });
  }

  async disableCallback(platformId: string, now: number): Promise<void> {
    this.db.tx(() => { this.db.run('UPDATE platforms SET callback_disabled_at = ? WHERE id = ? AND callback_disabled_at IS NULL', now, platformId); });
  }

  async getConnection(id: string): Promise<ConnectionRecord | undefined> {
    const r = this.db.get<ConnectionRow>('SELECT * FROM connections WHERE id = ?', id);
    return r && connectionFromRow(r);
  }

  async listConnections(accountId: string): Promise<ConnectionRecord[]> {
    return this.db.all<ConnectionRow>('SELECT * FROM connections WHERE account_id = ? ORDER BY created_at, id', accountId).map(connectionFromRow);
  }

  async getApiKeyByPrefix(prefix: string): Promise<ApiKeyRecord | undefined> {
    const r = this.db.get<KeyRow>('SELECT * FROM api_keys WHERE prefix = ?', prefix);
    return r && keyFromRow(r);
  }

  async rotateApiKey(connectionId: string, next: ApiKeyRecord, graceUntil: number | null, event: (previousPrefix: string | null) => OutboxEventInput): Promise<ApiKeyRecord | undefined> {
    return this.db.tx(() => {
      const conn = this.db.get<ConnectionRow>("SELECT * FROM connections WHERE id = ? AND status = 'active'", connectionId);
      if (!conn) return undefined;
      const prev = this.db.get<KeyRow>("SELECT * FROM api_keys WHERE connection_id = ? AND status = 'active'", connectionId);
      // Keys rotated out earlier lose any remaining grace: only the newest previous key has one.
      this.db.run("UPDATE api_keys SET valid_until = NULL WHERE connection_id = ? AND status = 'rotated'", connectionId);
      this.db.run("UPDATE api_keys SET status = 'rotated', valid_until = ? WHERE connection_id = ? AND status = 'active'", graceUntil, connectionId);
      this.insertKey(next);
      insertOutboxEvent(this.db, event(prev?.prefix ?? null));
      return prev && keyFromRow(prev);
    });
  }

  async removeConnection(connectionId: string, now: number, events: (revoked: RevokedCert[], denied: DeniedRequest[]) => OutboxEventInput[]): Promise<RevokedCert[] | undefined> {
    return this.db.tx(() => {
      if (this.db.run("UPDATE connections SET status = 'removed', removed_at = ? WHERE id = ? AND status = 'active'", now, connectionId) !== 1) return undefined;
      this.db.run("UPDATE api_keys SET status = 'removed', valid_until = NULL WHERE connection_id = ?", connectionId);
      const revoked = this.db.all<{ id: string; agent_id: string }>("SELECT id, agent_id FROM certificates WHERE connection_id = ? AND status = 'approved'", connectionId)
        .map((r) => ({ certId: r.id, agentId: r.agent_id }));
      this.db.run("UPDATE certificates SET status = 'revoked', revoked_at = ?, revoke_reason = 'connection_removed' WHERE connection_id = ? AND status = 'approved'", now, connectionId);
      const denied = this.db.all<{ id: string; agent_id: string }>("SELECT id, agent_id FROM delegation_requests WHERE connection_id = ? AND state = 'pending'", connectionId)
        .map((r) => ({ requestId: r.id, agentId: r.agent_id }));
      this.db.run("UPDATE delegation_requests SET state = 'denied', decided_at = ? WHERE connection_id = ? AND state = 'pending'", now, connectionId);
      for (const e of events(revoked, denied)) insertOutboxEvent(this.db, e);
      return revoked;
    });
  }

  async createAgent(a: AgentRecord): Promise<void> {
    this.db.tx(() => {
      this.db.run('INSERT INTO agents (id, connection_id, account_id, name, agent_type, custody_mode, public_key, secret_enc, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
        a.id, a.connectionId, a.accountId, a.name, a.agentType, a.custodyMode, a.publicKey, Buffer.from(a.secretEnc), a.createdAt);
    });
  }

  async getAgent(id: string): Promise<AgentRecord | undefined> {
    const r = this.db.get<AgentRow>('SELECT * FROM agents WHERE id = ?', id);
    return r && agentFromRow(r);
  }

  async listAgents(filter: { accountId?: string; connectionId?: string }): Promise<AgentRecord[]> {
    if (filter.connectionId) return this.db.all<AgentRow>('SELECT * FROM agents WHERE connection_id = ? ORDER BY created_at, id', filter.connectionId).map(agentFromRow);
    return this.db.all<AgentRow>('SELECT * FROM agents WHERE account_id = ? ORDER BY created_at, id', filter.accountId ?? '').map(agentFromRow);
  }
}
