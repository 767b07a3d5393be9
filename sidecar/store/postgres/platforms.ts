/**
 * PostgreSQL implementation of {@link PlatformStore}: platforms, connections,
 * API keys and agents, with their outbox events in the same transaction. The
 * checks that SQLite's single writer serializes take row locks here: the
 * account row for the platform limit, the connection row for rotation and
 * removal.
 */
import type { PgDb, Querier } from './db.js';
import { insertOutboxEvent } from './outbox.js';
import type {
  AgentRecord, ApiKeyRecord, ConnectionRecord, DeniedRequest, OutboxEventInput, PlatformRecord, PlatformStore, RevokedCert,
} from '../types.js';
import { agentFromRow, connectionFromRow, keyFromRow, platformFromRow } from '../rows.js';
import type { AgentRow, ConnectionRow, KeyRow, PlatformRow } from '../rows.js';

const bytes = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

function insertKey(q: Querier, k: ApiKeyRecord): Promise<number> {
  return q.run('INSERT INTO api_keys (id, connection_id, prefix, digest, status, valid_until, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [k.id, k.connectionId, k.prefix, k.digest, k.status, k.validUntil, k.createdAt]);
}

/** Platforms, connections, keys and agents on PostgreSQL. */
export class PgPlatformStore implements PlatformStore {
  private readonly db: PgDb;
  constructor(db: PgDb) {
    this.db = db;
  }

  async countPlatforms(accountId: string): Promise<number> {
    return (await this.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM platforms WHERE account_id = $1', [accountId]))!.n;
  }

  async createPlatform(p: PlatformRecord, c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput | null, maxPlatforms: number): Promise<boolean> {
    return this.db.tx(async (q) => {
      // The account row lock serializes creates of one account, so the count cannot go stale.
      await q.run('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [p.accountId]);
      if ((await q.get<{ n: number }>('SELECT COUNT(*) AS n FROM platforms WHERE account_id = $1', [p.accountId]))!.n >= maxPlatforms) return false;
      await q.run(`INSERT INTO platforms (id, account_id, name, description, surface_type, publish_state, default_allowed_scopes,
        callback_url, callback_disabled_at, signing_secret_enc, webhook_secret_enc, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
      [p.id, p.accountId, p.name, p.description, p.surfaceType, p.publishState, JSON.stringify(p.defaultAllowedScopes),
        p.callbackUrl, p.callbackDisabledAt, bytes(p.signingSecretEnc), bytes(p.webhookSecretEnc), p.expiresAt, p.createdAt]);
      await q.run('INSERT INTO connections (id, platform_id, account_id, allowed_scopes, status, removed_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [c.id, c.platformId, c.accountId, JSON.stringify(c.allowedScopes), c.status, c.removedAt, c.createdAt]);
      await insertKey(q, k);
      if (event) await insertOutboxEvent(q, event);
      return true;
    });
  }

  async getPlatform(id: string): Promise<PlatformRecord | undefined> {
    const r = await this.db.get<PlatformRow>('SELECT * FROM platforms WHERE id = $1', [id]);
    return r && platformFromRow(r);
  }

  async listPlatforms(accountId: string): Promise<PlatformRecord[]> {
    return (await this.db.all<PlatformRow>('SELECT * FROM platforms WHERE account_id = $1 ORDER BY created_at, id', [accountId])).map(platformFromRow);
  }

  async setCallbackUrl(platformId: string, url: string | null): Promise<void> {
    await this.db.run('UPDATE platforms SET callback_url = $1, callback_disabled_at = NULL WHERE id = $2', [url, platformId]);
  }

  async disableCallback(platformId: string, now: number): Promise<void> {
    await this.db.run('UPDATE platforms SET callback_disabled_at = $1 WHERE id = $2 AND callback_disabled_at IS NULL', [now, platformId]);
  }

  async getConnection(id: string): Promise<ConnectionRecord | undefined> {
    const r = await this.db.get<ConnectionRow>('SELECT * FROM connections WHERE id = $1', [id]);
    return r && connectionFromRow(r);
  }

  async listConnections(accountId: string): Promise<ConnectionRecord[]> {
    return (await this.db.all<ConnectionRow>('SELECT * FROM connections WHERE account_id = $1 ORDER BY created_at, id', [accountId])).map(connectionFromRow);
  }

  async getApiKeyByPrefix(prefix: string): Promise<ApiKeyRecord | undefined> {
    const r = await this.db.get<KeyRow>('SELECT * FROM api_keys WHERE prefix = $1', [prefix]);
    return r && keyFromRow(r);
  }

  async rotateApiKey(connectionId: string, next: ApiKeyRecord, graceUntil: number | null, event: (previousPrefix: string | null) => OutboxEventInput): Promise<ApiKeyRecord | undefined> {
    return this.db.tx(async (q) => {
      // The connection row lock serializes rotations and removal of one connection.
      const conn = await q.get<ConnectionRow>("SELECT * FROM connections WHERE id = $1 AND status = 'active' FOR UPDATE", [connectionId]);
      if (!conn) return undefined;
      const prev = await q.get<KeyRow>("SELECT * FROM api_keys WHERE connection_id = $1 AND status = 'active'", [connectionId]);
      await q.run("UPDATE api_keys SET valid_until = NULL WHERE connection_id = $1 AND status = 'rotated' AND valid_until IS NOT NULL", [connectionId]);
      await q.run("UPDATE api_keys SET status = 'rotated', valid_until = $1 WHERE connection_id = $2 AND status = 'active'", [graceUntil, connectionId]);
      await insertKey(q, next);
      await insertOutboxEvent(q, event(prev?.prefix ?? null));
      return prev && keyFromRow(prev);
    });
  }

  async removeConnection(connectionId: string, now: number, events: (revoked: RevokedCert[], denied: DeniedRequest[]) => OutboxEventInput[]): Promise<RevokedCert[] | undefined> {
    return this.db.tx(async (q) => {
      if ((await q.run("UPDATE connections SET status = 'removed', removed_at = $1 WHERE id = $2 AND status = 'active'", [now, connectionId])) !== 1) return undefined;
      await q.run("UPDATE api_keys SET status = 'removed', valid_until = NULL WHERE connection_id = $1", [connectionId]);
      // RETURNING: exactly the rows this statement changed, even if others changed concurrently.
      const revoked = (await q.all<{ id: string; agent_id: string; seq: number }>(
        "UPDATE certificates SET status = 'revoked', revoked_at = $1, revoke_reason = 'connection_removed' WHERE connection_id = $2 AND status = 'approved' RETURNING id, agent_id, seq",
        [now, connectionId])).sort((a, b) => a.seq - b.seq).map((r) => ({ certId: r.id, agentId: r.agent_id }));
      const denied = (await q.all<{ id: string; agent_id: string; seq: number }>(
        "UPDATE delegation_requests SET state = 'denied', decided_at = $1 WHERE connection_id = $2 AND state = 'pending' RETURNING id, agent_id, seq",
        [now, connectionId])).sort((a, b) => a.seq - b.seq).map((r) => ({ requestId: r.id, agentId: r.agent_id }));
      for (const e of events(revoked, denied)) await insertOutboxEvent(q, e);
      return revoked;
    });
  }

  async createAgent(a: AgentRecord): Promise<void> {
    await this.db.run('INSERT INTO agents (id, connection_id, account_id, name, agent_type, custody_mode, public_key, secret_enc, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      [a.id, a.connectionId, a.accountId, a.name, a.agentType, a.custodyMode, a.publicKey, bytes(a.secretEnc), a.createdAt]);
  }

  async getAgent(id: string): Promise<AgentRecord | undefined> {
    const r = await this.db.get<AgentRow>('SELECT * FROM agents WHERE id = $1', [id]);
    return r && agentFromRow(r);
  }

  async listAgents(filter: { accountId?: string; connectionId?: string }): Promise<AgentRecord[]> {
    if (filter.connectionId) return (await this.db.all<AgentRow>('SELECT * FROM agents WHERE connection_id = $1 ORDER BY created_at, id', [filter.connectionId])).map(agentFromRow);
    return (await this.db.all<AgentRow>('SELECT * FROM agents WHERE account_id = $1 ORDER BY created_at, id', [filter.accountId ?? ''])).map(agentFromRow);
  }
}
