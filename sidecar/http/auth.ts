/**
 * Authentication for the sidecar's routes: the session cookie, the signed
 * double-submit CSRF token bound to the session, and the platform API key.
 *
 * Each route declares `config.auth` (`none`, `session`, `session_csrf`,
 * `api_key`); one `onRequest` hook enforces it before the body is parsed.
 */
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../src/errors.js';
import { b64urlEncode, sha256Hex, timingSafeEqualStr } from '../../src/crypto/encoding.js';
import type { ServiceContext } from '../context.js';

/** The session cookie (HttpOnly; the spec names only the CSRF cookie, so this name is ours). */
export const SESSION_COOKIE = 'service_session';
/** The CSRF cookie, readable by the page, echoed in {@link CSRF_HEADER} (double submit). */
export const CSRF_COOKIE = 'service_csrf';
/** The header that must repeat the CSRF cookie on cookie-authenticated writes. */
export const CSRF_HEADER = 'x-service-csrf';
/** The header that carries a platform API key. */
export const API_KEY_HEADER = 'x-service-api-key';

/** Session lifetime (spec: 15 minutes), renewed by refresh. */
export const SESSION_TTL_MS = 15 * 60_000;
/** Absolute session lifetime: refresh cannot extend a login beyond this. */
export const SESSION_ABSOLUTE_TTL_MS = 12 * 3600_000;

/** What a route needs. */
export type AuthMode = 'none' | 'session' | 'session_csrf' | 'api_key';

/** The authenticated account of a session request. */
export interface SessionAuth { accountId: string; sessionId: string; expiresAt: number }
/** The authenticated connection of an API-key request. */
export interface ApiKeyAuth { connectionId: string; platformId: string; accountId: string; keyId: string }

declare module 'fastify' {
  interface FastifyRequest {
    session: SessionAuth | undefined;
    apiKey: ApiKeyAuth | undefined;
  }
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
}

/** A new opaque session token (256 bits). */
export function newSessionToken(): string {
  return b64urlEncode(crypto.randomBytes(32));
}

/** A CSRF token bound to the session: `<nonce>.<HMAC(key, sessionId.nonce)>`. */
export function newCsrfToken(ctx: ServiceContext, sessionId: string): string {
  const nonce = b64urlEncode(crypto.randomBytes(16));
  return `${nonce}.${csrfMac(ctx, sessionId, nonce)}`;
}

function csrfMac(ctx: ServiceContext, sessionId: string, nonce: string): string {
  return b64urlEncode(crypto.createHmac('sha256', ctx.keys.csrf).update(`${sessionId}.${nonce}`).digest());
}

/** Sets both session cookies. `Secure` unless configured for plain-HTTP development on loopback. */
export function setSessionCookies(ctx: ServiceContext, reply: FastifyReply, token: string, csrf: string): void {
  const common = { path: '/', sameSite: 'strict' as const, secure: !ctx.config.insecureCookies, maxAge: SESSION_ABSOLUTE_TTL_MS / 1000 };
  void reply.setCookie(SESSION_COOKIE, token, { ...common, httpOnly: true });
  void reply.setCookie(CSRF_COOKIE, csrf, { ...common, httpOnly: false });
}

/** Clears both session cookies. */
export function clearSessionCookies(ctx: ServiceContext, reply: FastifyReply): void {
  const common = { path: '/', sameSite: 'strict' as const, secure: !ctx.config.insecureCookies };
  void reply.clearCookie(SESSION_COOKIE, { ...common, httpOnly: true });
  void reply.clearCookie(CSRF_COOKIE, common);
}

async function authenticateSession(ctx: ServiceContext, request: FastifyRequest): Promise<SessionAuth> {
  const token = request.cookies[SESSION_COOKIE];
  if (!token || token.length > 128) throw new ServiceError('auth_required');
  const s = await ctx.store.accounts.getSessionByTokenHash(sha256Hex(token));
  const now = ctx.clock();
  if (!s || s.endedAt !== null) throw new ServiceError('auth_required');
  if (s.expiresAt <= now || s.absoluteExpiresAt <= now) throw new ServiceError('auth_required', 'The session has expired; sign in again.');
  return { accountId: s.accountId, sessionId: s.id, expiresAt: s.expiresAt };
}

function checkCsrf(ctx: ServiceContext, request: FastifyRequest, session: SessionAuth): void {
  const header = request.headers[CSRF_HEADER];
  const cookie = request.cookies[CSRF_COOKIE];
  if (typeof header !== 'string' || header === '' || !cookie) throw new ServiceError('csrf_required');
  if (header.length > 256 || !timingSafeEqualStr(header, cookie)) throw new ServiceError('csrf_invalid');
  const dot = header.indexOf('.');
  if (dot <= 0) throw new ServiceError('csrf_invalid');
  if (!timingSafeEqualStr(header.slice(dot + 1), csrfMac(ctx, session.sessionId, header.slice(0, dot)))) throw new ServiceError('csrf_invalid');
}

/** API key shape: `aak_<12 hex prefix>_<43 base64url secret>`. */
const API_KEY_RE = /^(aak_[0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;

/** HMAC-SHA256 of an API key under the pepper derived from the master key (32 raw bytes). */
function apiKeyMac(ctx: ServiceContext, key: string): Buffer {
  return crypto.createHmac('sha256', ctx.keys.apiKey).update(key).digest();
}

/** Digest of an API key under the pepper derived from the master key (hex, as stored). */
export function apiKeyDigest(ctx: ServiceContext, key: string): string {
  return apiKeyMac(ctx, key).toString('hex');
}

/** A new API key with its public prefix (`aak_<hex>`) and digest. */
export function newApiKey(ctx: ServiceContext): { key: string; prefix: string; digest: string } {
  const prefix = `aak_${crypto.randomBytes(6).toString('hex')}`;
  const key = `${prefix}_${b64urlEncode(crypto.randomBytes(32))}`;
  return { key, prefix, digest: apiKeyDigest(ctx, key) };
}

/** Compared against when no key row exists, so that case costs the same. */
const NO_DIGEST = Buffer.alloc(32);
const HEX_DIGEST_RE = /^[0-9a-f]{64}$/;

/**
 * Authenticates an API key: unknown, removed and rotated-out keys all get the same 401.
 * A success is cached by key digest for a few seconds (`ctx.caches.apiKeys`, never past the
 * key's validity); rotation and removal drop a connection's entries before they return.
 */
export async function authenticateApiKey(ctx: ServiceContext, key: unknown): Promise<ApiKeyAuth> {
  if (typeof key !== 'string') throw new ServiceError('invalid_api_key');
  const m = API_KEY_RE.exec(key);
  if (!m) throw new ServiceError('invalid_api_key');
  const digest = apiKeyMac(ctx, key);
  const cacheKey = digest.toString('base64');
  const cache = ctx.caches.apiKeys;
  const hit = cache.get(cacheKey, ctx.clock());
  if (hit) return hit;
  const generation = cache.generation;
  const row = await ctx.store.platforms.getApiKeyByPrefix(m[1]!);
  // Compare even when no row exists, so timing does not reveal known prefixes: two raw
  // 32-byte HMAC digests, compared in constant time.
  const stored = row && HEX_DIGEST_RE.test(row.digest) ? Buffer.from(row.digest, 'hex') : NO_DIGEST;
  const ok = crypto.timingSafeEqual(digest, stored);
  if (!row || !ok || stored === NO_DIGEST) throw new ServiceError('invalid_api_key');
  const now = ctx.clock();
  // Active keys live until their lifetime ends; rotated keys only through their grace period.
  const live = (row.status === 'active' && (row.validUntil === null || row.validUntil > now))
    || (row.status === 'rotated' && row.validUntil !== null && row.validUntil > now);
  if (!live) throw new ServiceError('invalid_api_key');
  const conn = await ctx.store.platforms.getConnection(row.connectionId);
  if (!conn || conn.status !== 'active') throw new ServiceError('invalid_api_key');
  const auth: ApiKeyAuth = { connectionId: conn.id, platformId: conn.platformId, accountId: conn.accountId, keyId: row.id };
  cache.set(cacheKey, auth, row.validUntil, generation);
  return auth;
}

/** Installs the `onRequest` hook that enforces each route's `config.auth`. */
export function installAuth(app: FastifyInstance, ctx: ServiceContext): void {
  app.decorateRequest('session', undefined);
  app.decorateRequest('apiKey', undefined);
  // A route that forgets to say how it authenticates must not silently become public.
  app.addHook('onRoute', (route) => {
    const mode = (route.config as { auth?: unknown } | undefined)?.auth;
    if (mode !== 'none' && mode !== 'session' && mode !== 'session_csrf' && mode !== 'api_key') {
      throw new TypeError(`route ${String(route.method)} ${route.url}: config.auth must be none, session, session_csrf or api_key`);
    }
  });
  const authenticate = async (request: FastifyRequest, mode: string): Promise<void> => {
    if (mode === 'api_key') {
      request.apiKey = await authenticateApiKey(ctx, request.headers[API_KEY_HEADER]);
      return;
    }
    const session = await authenticateSession(ctx, request);
    if (mode === 'session_csrf') checkCsrf(ctx, request, session);
    request.session = session;
  };
  // Callback style: routes with auth 'none' (verify authenticates inside decide()) cost no promise.
  app.addHook('onRequest', (request, _reply, done) => {
    const mode = request.routeOptions.config.auth ?? 'none';
    if (mode === 'none') { done(); return; }
    // A rejection with a falsy reason must still refuse: done(undefined) would carry on unauthenticated.
    authenticate(request, mode).then(() => done(), (err: unknown) => done(err instanceof Error ? err : new Error(`authentication failed: ${String(err)}`)));
  });
}
