/**
 * {@link PlatformStore} on either engine: platforms, connections, API keys and
 * agents, with their outbox events and audit rows in the same transaction. The checks that
 * SQLite's single writer serializes take row locks on PostgreSQL: the account
 * row for the platform limit, the connection row for rotation and removal.
 */
import { FOR_UPDATE, SEQ, all, bytes, get, pgOnly, run, sql } from './core.js';
import type { Runner, Work } from './core.js';
import { insertOutboxEvent } from './outbox.js';
import { appendAudits, appendAuditsByAccount } from './audit-append.js';
import type {
  AgentRecord, ApiKeyRecord, AuditEventRecord, ConnectionRecord, DeniedRequest, OutboxEventInput, PlatformEdit,
  PlatformEditOutcome, PlatformRecord, PlatformStore, RevokedCert,
} from '../types.js';
import { agentFromRow, connectionFromRow, keyFromRow, platformFromRow } from '../rows.js';
import type { AgentRow, ConnectionRow, KeyRow, PlatformRow } from '../rows.js';

/** Inserts an API key (in the caller's transaction). */
export function insertKey(k: ApiKeyRecord): Work<number> {
  return run(sql`INSERT INTO api_keys (id, connection_id, prefix, digest, status, valid_until, created_at)
    VALUES (${k.id}, ${k.connectionId}, ${k.prefix}, ${k.digest}, ${k.status}, ${k.validUntil}, ${k.createdAt})`);
}
const countPlatforms = (accountId: string): Work<{ n: number } | undefined> =>
  get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM platforms WHERE account_id = ${accountId}`);

/** Platforms, connections, keys and agents. */
export class SqlPlatformStore implements PlatformStore {
  private readonly r: Runner;
  private readonly chain: boolean;
  /** `chain` false writes audit rows without hash links (SIDECAR_AUDIT_CHAIN=off). */
  constructor(r: Runner, chain = true) {
    this.r = r;
    this.chain = chain;
  }

  async countPlatforms(accountId: string): Promise<number> {
    return (await this.r.read(countPlatforms(accountId)))!.n;
  }

  async createPlatform(
    p: PlatformRecord, c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput | null, maxPlatforms: number,
    audits: readonly AuditEventRecord[],
  ): Promise<boolean> {
    const chain = this.chain;
    return this.r.tx((function* () {
      // The account row lock serializes creates of one account, so the count cannot go stale.
      yield* pgOnly(sql`SELECT 1 FROM accounts WHERE id = ${p.accountId} FOR UPDATE`);
      if ((yield* countPlatforms(p.accountId))!.n >= maxPlatforms) return false;
      yield* run(sql`INSERT INTO platforms (id, account_id, name, description, surface_type, publish_state,
        default_allowed_scopes,
        callback_url, callback_disabled_at, signing_secret_enc, webhook_secret_enc, expires_at, created_at)
        VALUES (${p.id}, ${p.accountId}, ${p.name}, ${p.description}, ${p.surfaceType}, ${p.publishState},
          ${JSON.stringify(p.defaultAllowedScopes)},
        ${p.callbackUrl}, ${p.callbackDisabledAt}, ${bytes(p.signingSecretEnc)}, ${bytes(p.webhookSecretEnc)},
          ${p.expiresAt}, ${p.createdAt})`);
      yield* run(sql`INSERT INTO connections (id, platform_id, account_id, allowed_scopes, status, removed_at,
        created_at)
        VALUES (${c.id}, ${c.platformId}, ${c.accountId}, ${JSON.stringify(c.allowedScopes)}, ${c.status},
          ${c.removedAt}, ${c.createdAt})`);
      yield* insertKey(k);
      if (event) yield* insertOutboxEvent(event);
      yield* appendAudits(audits, chain);
      return true;
    })());
  }

  async getPlatform(id: string): Promise<PlatformRecord | undefined> {
    const row = await this.r.read(get<PlatformRow>(sql`SELECT * FROM platforms WHERE id = ${id}`));
    return row && platformFromRow(row);
  }

  async listPlatforms(accountId: string): Promise<PlatformRecord[]> {
    return (await this.r.read(all<PlatformRow>(sql`SELECT * FROM platforms WHERE account_id = ${accountId}
      ORDER BY created_at, id`))).map(platformFromRow);
  }

  async updatePlatform(
    platformId: string, accountId: string, edit: PlatformEdit,
    audit: (before: PlatformRecord, after: PlatformRecord) => AuditEventRecord[],
  ): Promise<PlatformEditOutcome> {
    const chain = this.chain;
    return this.r.tx((function* (): Work<PlatformEditOutcome> {
      // The row lock orders this edit with a concurrent publish (which needs a description).
      const row = yield* get<PlatformRow>(sql`SELECT * FROM platforms WHERE id = ${platformId}
        AND account_id = ${accountId}${FOR_UPDATE}`);
      if (row === undefined) return { outcome: 'not_found' };
      const before = platformFromRow(row);
      const after = { ...before, name: edit.name ?? before.name, description: edit.description ?? before.description };
      if (before.publishState === 'published' && after.description === '') return { outcome: 'description_required' };
      yield* run(sql`UPDATE platforms SET name = ${after.name}, description = ${after.description}
        WHERE id = ${platformId}`);
      yield* appendAudits(audit(before, after), chain);
      return { outcome: 'updated', before, after };
    })());
  }

  async setCallbackUrl(platformId: string, url: string | null): Promise<boolean> {
    // Checked in the statement, so a clear racing a publish cannot leave a published platform without one.
    const kept = url === null ? sql` AND publish_state <> 'published'` : sql``;
    return (await this.r.write(run(sql`UPDATE platforms SET callback_url = ${url}, callback_disabled_at = NULL
      WHERE id = ${platformId}${kept}`))) === 1;
  }

  async disableCallback(platformId: string, now: number): Promise<void> {
    await this.r.write(run(sql`UPDATE platforms SET callback_disabled_at = ${now} WHERE id = ${platformId}
      AND callback_disabled_at IS NULL`));
  }

  async getConnection(id: string): Promise<ConnectionRecord | undefined> {
    const row = await this.r.read(get<ConnectionRow>(sql`SELECT * FROM connections WHERE id = ${id}`));
    return row && connectionFromRow(row);
  }

  async listConnections(accountId: string): Promise<ConnectionRecord[]> {
    return (await this.r.read(all<ConnectionRow>(sql`SELECT * FROM connections WHERE account_id = ${accountId}
      ORDER BY created_at, id`)))
      .map(connectionFromRow);
  }

  async getApiKeyByPrefix(prefix: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.r.read(get<KeyRow>(sql`SELECT * FROM api_keys WHERE prefix = ${prefix}`));
    return row && keyFromRow(row);
  }

  async rotateApiKey(
    connectionId: string, next: ApiKeyRecord, graceUntil: number | null,
    event: (previousPrefix: string | null) => OutboxEventInput,
    audit: (previousPrefix: string | null) => AuditEventRecord[],
  ): Promise<ApiKeyRecord | undefined> {
    const chain = this.chain;
    return this.r.tx((function* () {
      // The connection row lock serializes rotations and removal of one connection.
      if (!(yield* get(sql`SELECT * FROM connections WHERE id = ${connectionId}
        AND status = 'active'${FOR_UPDATE}`))) return undefined;
      const prev = yield* get<KeyRow>(sql`SELECT * FROM api_keys WHERE connection_id = ${connectionId}
        AND status = 'active'`);
      // Keys rotated out earlier lose any remaining grace: only the newest previous key has one.
      yield* run(sql`UPDATE api_keys SET valid_until = NULL WHERE connection_id = ${connectionId} AND status = 'rotated'
        AND valid_until IS NOT NULL`);
      yield* run(sql`UPDATE api_keys SET status = 'rotated', valid_until = ${graceUntil}
        WHERE connection_id = ${connectionId} AND status = 'active'`);
      yield* insertKey(next);
      yield* insertOutboxEvent(event(prev?.prefix ?? null));
      yield* appendAuditsByAccount(audit(prev?.prefix ?? null), chain);
      return prev && keyFromRow(prev);
    })());
  }

  async removeConnection(
    connectionId: string, now: number, events: (revoked: RevokedCert[], denied: DeniedRequest[]) => OutboxEventInput[],
    audit: (revoked: RevokedCert[], denied: DeniedRequest[]) => AuditEventRecord[],
  ): Promise<RevokedCert[] | undefined> {
    const chain = this.chain;
    return this.r.tx((function* () {
      const removed = yield* run(sql`UPDATE connections SET status = 'removed', removed_at = ${now}
        WHERE id = ${connectionId} AND status = 'active'`);
      if (removed !== 1) return undefined;
      yield* run(sql`UPDATE api_keys SET status = 'removed', valid_until = NULL WHERE connection_id = ${connectionId}`);
      // RETURNING: exactly the rows this statement changed, even if others changed concurrently.
      type Changed = { id: string; agent_id: string; seq: number };
      const revoked = (yield* all<Changed>(sql`UPDATE certificates
        SET status = 'revoked', revoked_at = ${now}, revoke_reason = 'connection_removed'
        WHERE connection_id = ${connectionId} AND status = 'approved' RETURNING id, agent_id, ${SEQ} AS seq`))
        .sort((a, b) => a.seq - b.seq).map((x) => ({ certId: x.id, agentId: x.agent_id }));
      const denied = (yield* all<Changed>(sql`UPDATE delegation_requests SET state = 'denied', decided_at = ${now}
        WHERE connection_id = ${connectionId} AND state = 'pending' RETURNING id, agent_id, ${SEQ} AS seq`))
        .sort((a, b) => a.seq - b.seq).map((x) => ({ requestId: x.id, agentId: x.agent_id }));
      for (const e of events(revoked, denied)) yield* insertOutboxEvent(e);
      yield* appendAuditsByAccount(audit(revoked, denied), chain);
      return revoked;
    })());
  }

  async createAgent(a: AgentRecord): Promise<void> {
    await this.r.write(run(sql`INSERT INTO agents (id, connection_id, account_id, name, agent_type, custody_mode,
      public_key, secret_enc, created_at)
      VALUES (${a.id}, ${a.connectionId}, ${a.accountId}, ${a.name}, ${a.agentType}, ${a.custodyMode}, ${a.publicKey},
        ${bytes(a.secretEnc)},
      ${a.createdAt})`));
  }

  async getAgent(id: string): Promise<AgentRecord | undefined> {
    const row = await this.r.read(get<AgentRow>(sql`SELECT * FROM agents WHERE id = ${id}`));
    return row && agentFromRow(row);
  }

  async listAgents(filter: { accountId?: string; connectionId?: string }): Promise<AgentRecord[]> {
    const where = filter.connectionId ? sql`connection_id = ${filter.connectionId}` : sql`account_id =
      ${filter.accountId ?? ''}`;
    return (await this.r.read(all<AgentRow>(sql`SELECT * FROM agents WHERE ${where}
      ORDER BY created_at, id`))).map(agentFromRow);
  }
}
