/**
 * The store interface (types.ts), by subject: platforms, their connections
 * and API keys, and agents.
 */
import type { AuditEventRecord } from './audit.js';
import type { OutboxEventInput } from './outbox.js';

/** A platform and its connection, as registered. */
export interface PlatformRecord {
  id: string;
  accountId: string;
  name: string;
  description: string;
  surfaceType: string;
  publishState: string;
  defaultAllowedScopes: string[];
  callbackUrl: string | null;
  callbackDisabledAt: number | null;
  signingSecretEnc: Uint8Array;
  webhookSecretEnc: Uint8Array;
  expiresAt: number;
  createdAt: number;
}

/** A connection (created together with its platform). */
export interface ConnectionRecord {
  id: string;
  platformId: string;
  accountId: string;
  allowedScopes: string[];
  status: 'active' | 'removed';
  removedAt: number | null;
  createdAt: number;
}

/** An API key row (digest only). */
export interface ApiKeyRecord {
  id: string;
  connectionId: string;
  prefix: string;
  digest: string;
  status: 'active' | 'rotated' | 'removed';
  /** For rotated keys: end of the grace period (null = no grace). */
  validUntil: number | null;
  createdAt: number;
}

/** An agent with its custodial key. */
export interface AgentRecord {
  id: string;
  connectionId: string;
  accountId: string;
  name: string;
  agentType: string;
  custodyMode: string;
  publicKey: string;
  secretEnc: Uint8Array;
  createdAt: number;
}

/** A certificate revoked as a side effect (connection removal). */
export interface RevokedCert { certId: string; agentId: string }

/** A pending request denied as a side effect (connection removal). */
export interface DeniedRequest { requestId: string; agentId: string }

/** The members of a platform an edit sets (absent: unchanged). */
export interface PlatformEdit { name?: string; description?: string }

/**
 * How an edit ended: `updated` (with the platform before and after), `not_found` (no such platform
 * of the workspace) or `description_required` (a published platform's description cannot be emptied).
 */
export type PlatformEditOutcome =
  | { outcome: 'updated'; before: PlatformRecord; after: PlatformRecord }
  | { outcome: 'not_found' | 'description_required' };

/** Platforms, connections, API keys and agents. */
export interface PlatformStore {
  countPlatforms(accountId: string): Promise<number>;
  /**
   * Creates platform + connection + API key + `connection.created` outbox event + the `audits`
   * rows (of the platform's account) atomically, unless the account already has `maxPlatforms`
   * platforms (checked in the same transaction); returns false then, writing nothing.
   */
  createPlatform(
    p: PlatformRecord, c: ConnectionRecord, k: ApiKeyRecord, event: OutboxEventInput | null, maxPlatforms: number,
    audits: readonly AuditEventRecord[],
  ): Promise<boolean>;
  getPlatform(id: string): Promise<PlatformRecord | undefined>;
  listPlatforms(accountId: string): Promise<PlatformRecord[]>;
  /**
   * Sets the platform's name and/or description, if it is `accountId`'s, with the audit rows
   * `audit` builds from the platform before and after, in one transaction. A published platform
   * keeps a description: emptying it changes nothing (`description_required`).
   */
  updatePlatform(
    platformId: string, accountId: string, edit: PlatformEdit,
    audit: (before: PlatformRecord, after: PlatformRecord) => AuditEventRecord[],
  ): Promise<PlatformEditOutcome>;
  /**
   * Sets (or clears, `null`) the callback URL and re-enables a disabled callback. A published
   * platform keeps a callback: clearing it changes nothing and answers false.
   */
  setCallbackUrl(platformId: string, url: string | null): Promise<boolean>;
  /** Marks the callback disabled (receiver answered 410). */
  disableCallback(platformId: string, now: number): Promise<void>;
  getConnection(id: string): Promise<ConnectionRecord | undefined>;
  listConnections(accountId: string): Promise<ConnectionRecord[]>;
  /** The API key row with this prefix (any status). */
  getApiKeyByPrefix(prefix: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Rotates atomically: the active key becomes `rotated` (valid until
   * `graceUntil`, null = stops at once), `next` becomes active, and the event
   * and the audit rows built from the previous key's prefix are written. Returns
   * the previous key, or undefined (nothing written) when the connection is not active.
   */
  rotateApiKey(
    connectionId: string, next: ApiKeyRecord, graceUntil: number | null,
    event: (previousPrefix: string | null) => OutboxEventInput,
    audit: (previousPrefix: string | null) => AuditEventRecord[],
  ): Promise<ApiKeyRecord | undefined>;
  /**
   * Removes a connection: its keys stop working, its active certificates are
   * revoked, its pending requests are denied, and the events built by `events`
   * are enqueued and the audit rows built by `audit` (of one or more accounts)
   * appended, all atomically.
   * Returns the revoked certificates, or undefined (nothing written) if it was not active.
   */
  removeConnection(
    connectionId: string, now: number, events: (revoked: RevokedCert[], denied: DeniedRequest[]) => OutboxEventInput[],
    audit: (revoked: RevokedCert[], denied: DeniedRequest[]) => AuditEventRecord[],
  ): Promise<RevokedCert[] | undefined>;
  createAgent(a: AgentRecord): Promise<void>;
  getAgent(id: string): Promise<AgentRecord | undefined>;
  listAgents(filter: { accountId?: string; connectionId?: string }): Promise<AgentRecord[]>;
}
