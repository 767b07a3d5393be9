/**
 * Platform API keys: their format, their digest under the master key's
 * pepper, authentication, and the short cache of successful authentications.
 *
 * Used by the HTTP auth hook (`http/auth.ts`, routes with `config.auth:
 * 'api_key'`) and by the decision pipeline's first stage (verify
 * authenticates inside `decide()`, so a bad key is 401 whatever the body).
 * It depends on nothing of either: only on the narrow {@link ApiKeyDeps}, which
 * the service context satisfies.
 */
import crypto from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { ServiceError } from '../../src/errors.js';
import { b64urlEncode } from '../../src/crypto/encoding.js';
import type { PlatformStore } from '../store/types.js';

/** The authenticated connection of an API-key request. */
export interface ApiKeyAuth { connectionId: string; platformId: string; accountId: string; keyId: string }

/** Cached authentications (entries). */
export const API_KEY_CACHE_SIZE = 10_000;

/** How long a successful API-key authentication is reused (ms, monotonic time). */
export const API_KEY_CACHE_TTL_MS = 5_000;

interface ApiKeyEntry {
  readonly auth: ApiKeyAuth;
  /** The key's own end of life (service clock, ms): its lifetime, or a rotated key's grace. */
  readonly validUntil: number | null;
  /** End of the cache lifetime (`performance.now()` ms). */
  readonly until: number;
}

/**
 * Successful API-key authentications by key digest, for {@link API_KEY_CACHE_TTL_MS}
 * and never past the key's `validUntil`. Rotation and connection removal call
 * {@link invalidateConnection} before they return; an authentication that read the
 * store before such a call is not cached after it (generation check). Failures are
 * never cached.
 */
export class ApiKeyCache {
  private readonly entries = new LRUCache<string, ApiKeyEntry>({ max: API_KEY_CACHE_SIZE });
  private gen = 0;
  /** While true (the store's change feed is down), nothing is cached or served from the cache. */
  suspended = false;

  /** Bumped by every invalidation; pass the value read before the store lookup to {@link set}. */
  get generation(): number {
    return this.gen;
  }

  /** The cached authentication for `digest`, if still fresh and the key still valid at `now` (service clock). */
  get(digest: string, now: number): ApiKeyAuth | undefined {
    if (this.suspended) return undefined;
    const e = this.entries.get(digest);
    if (!e) return undefined;
    if (performance.now() >= e.until || (e.validUntil !== null && e.validUntil <= now)) {
      this.entries.delete(digest);
      return undefined;
    }
    return e.auth;
  }

  /** Caches a successful authentication, unless an invalidation happened since `generation` was read. */
  set(digest: string, auth: ApiKeyAuth, validUntil: number | null, generation: number): void {
    if (generation !== this.gen || this.suspended) return;
    this.entries.set(digest, { auth, validUntil, until: performance.now() + API_KEY_CACHE_TTL_MS });
  }

  /** Drops every cached key of a connection (rotation, removal). */
  invalidateConnection(connectionId: string): void {
    this.gen++;
    for (const [k, e] of this.entries.entries()) if (e.auth.connectionId === connectionId) this.entries.delete(k);
  }

  /** Drops everything. */
  clear(): void {
    this.gen++;
    this.entries.clear();
  }
}

/** What API-key work needs from the service (the service context has all of it). */
export interface ApiKeyDeps {
  /** `apiKey`: the HMAC pepper derived from the master key. */
  readonly keys: { readonly apiKey: KeyObject };
  readonly store: { readonly platforms: Pick<PlatformStore, 'getApiKeyByPrefix' | 'getConnection'> };
  /** Service clock (Unix ms). */
  readonly clock: () => number;
  readonly caches: { readonly apiKeys: ApiKeyCache };
}

/** API key shape: `aak_<12 hex prefix>_<43 base64url secret>`. */
const API_KEY_RE = /^(aak_[0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;

/** HMAC-SHA256 of an API key under the pepper derived from the master key (32 raw bytes). */
function apiKeyMac(deps: Pick<ApiKeyDeps, 'keys'>, key: string): Buffer {
  return crypto.createHmac('sha256', deps.keys.apiKey).update(key).digest();
}

/** Digest of an API key under the pepper derived from the master key (hex, as stored). */
export function apiKeyDigest(deps: Pick<ApiKeyDeps, 'keys'>, key: string): string {
  return apiKeyMac(deps, key).toString('hex');
}

/** A new API key with its public prefix (`aak_<hex>`) and digest. */
export function newApiKey(deps: Pick<ApiKeyDeps, 'keys'>): { key: string; prefix: string; digest: string } {
  const prefix = `aak_${crypto.randomBytes(6).toString('hex')}`;
  const key = `${prefix}_${b64urlEncode(crypto.randomBytes(32))}`;
  return { key, prefix, digest: apiKeyDigest(deps, key) };
}

/** Compared against when no key row exists, so that case costs the same. */
const NO_DIGEST = Buffer.alloc(32);
const HEX_DIGEST_RE = /^[0-9a-f]{64}$/;

/**
 * Authenticates an API key: unknown, removed and rotated-out keys all get the same 401
 * (`invalid_api_key`). A success is cached by key digest for a few seconds (never past the
 * key's validity); rotation and removal drop a connection's entries before they return.
 * A store failure rejects with the store's error.
 */
export async function authenticateApiKey(deps: ApiKeyDeps, key: unknown): Promise<ApiKeyAuth> {
  if (typeof key !== 'string') throw new ServiceError('invalid_api_key');
  const m = API_KEY_RE.exec(key);
  if (!m) throw new ServiceError('invalid_api_key');
  const digest = apiKeyMac(deps, key);
  const cacheKey = digest.toString('base64');
  const cache = deps.caches.apiKeys;
  const hit = cache.get(cacheKey, deps.clock());
  if (hit) return hit;
  const generation = cache.generation;
  const row = await deps.store.platforms.getApiKeyByPrefix(m[1]!);
  // Compare even when no row exists, so timing does not reveal known prefixes: two raw
  // 32-byte HMAC digests, compared in constant time.
  const stored = row && HEX_DIGEST_RE.test(row.digest) ? Buffer.from(row.digest, 'hex') : NO_DIGEST;
  const ok = crypto.timingSafeEqual(digest, stored);
  if (!row || !ok || stored === NO_DIGEST) throw new ServiceError('invalid_api_key');
  const now = deps.clock();
  // Active keys live until their lifetime ends; rotated keys only through their grace period.
  const live = (row.status === 'active' && (row.validUntil === null || row.validUntil > now))
    || (row.status === 'rotated' && row.validUntil !== null && row.validUntil > now);
  if (!live) throw new ServiceError('invalid_api_key');
  const conn = await deps.store.platforms.getConnection(row.connectionId);
  if (!conn || conn.status !== 'active') throw new ServiceError('invalid_api_key');
  const auth: ApiKeyAuth = { connectionId: conn.id, platformId: conn.platformId, accountId: conn.accountId, keyId: row.id };
  cache.set(cacheKey, auth, row.validUntil, generation);
  return auth;
}
