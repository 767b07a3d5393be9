/**
 * Authentication for the sidecar's routes: the session cookie, the signed
 * double-submit CSRF token bound to the session, and the platform API key
 * (checked by `auth/api-key.ts`, which the decision pipeline uses too).
 *
 * Each route declares `config.auth` (`none`, `session`, `session_csrf`,
 * `api_key`); one `onRequest` hook enforces it before the body is parsed.
 */
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../src/errors.js';
import { b64urlEncode, sha256Hex, timingSafeEqualStr } from '../../src/crypto/encoding.js';
import { API_KEY_HEADER } from '../../src/protocol.js';
import { authenticateApiKey } from '../auth/api-key.js';
import type { ApiKeyAuth } from '../auth/api-key.js';
import type { ServiceContext } from '../context.js';
import { PERMISSIONS, can } from '../../src/roles.js';
import type { Permission, Role } from '../../src/roles.js';

/**
 * What a session route needs: a permission of the session's role in its workspace (src/roles.ts),
 * or `person` for what a signed-in person does for themselves (their session, profile,
 * workspaces and invitations), in any workspace and role.
 */
export type RoutePermission = Permission | 'person';

/** The session cookie (HttpOnly; the spec names only the CSRF cookie, so this name is ours). */
export const SESSION_COOKIE = 'service_session';
/** The CSRF cookie, readable by the page, echoed in {@link CSRF_HEADER} (double submit). */
export const CSRF_COOKIE = 'service_csrf';
/** The header that must repeat the CSRF cookie on cookie-authenticated writes. */
export const CSRF_HEADER = 'x-service-csrf';

/** Session lifetime (spec: 15 minutes), renewed by refresh. */
export const SESSION_TTL_MS = 15 * 60_000;
/** Absolute session lifetime: refresh cannot extend a login beyond this. */
export const SESSION_ABSOLUTE_TTL_MS = 12 * 3600_000;

/** What a route needs. */
export type AuthMode = 'none' | 'session' | 'session_csrf' | 'api_key';

/**
 * The authenticated session of a request. `accountId` is the workspace it acts in (the
 * person's own account, or an organisation they belong to: what every workspace-scoped route
 * reads and writes); `personId` is who signed in; `role` is theirs in that workspace (in their
 * own: `owner`).
 */
export interface SessionAuth {
  accountId: string;
  personId: string;
  /** The organisation the session acts in, or null in the person's own workspace. */
  organisationId: string | null;
  role: Role;
  sessionId: string;
  expiresAt: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    session: SessionAuth | undefined;
    apiKey: ApiKeyAuth | undefined;
  }
  interface FastifyContextConfig {
    auth?: AuthMode;
    /** What a session route needs of the session's role (api/route.ts `RouteSpec.permission`). */
    permission?: RoutePermission;
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
  const base = { personId: s.accountId, sessionId: s.id, expiresAt: s.expiresAt };
  const orgId = s.workspaceId ?? null;
  if (orgId === null) return { ...base, accountId: s.accountId, organisationId: null, role: 'owner' };
  // A removal ends the member's sessions in the organisation; this covers a removal racing the read.
  const m = await ctx.store.organisations.membership(orgId, s.accountId);
  if (m === undefined) {
    throw new ServiceError('auth_required', 'You are no longer a member of this organisation; sign in again.');
  }
  return { ...base, accountId: orgId, organisationId: orgId, role: m.role };
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

/** Installs the `onRequest` hook that enforces each route's `config.auth`. */
export function installAuth(app: FastifyInstance, ctx: ServiceContext): void {
  app.decorateRequest('session', undefined);
  app.decorateRequest('apiKey', undefined);
  // A route that forgets to say how it authenticates must not silently become public.
  app.addHook('onRoute', (route) => {
    const config = route.config as { auth?: unknown; permission?: unknown } | undefined;
    const mode = config?.auth;
    if (mode !== 'none' && mode !== 'session' && mode !== 'session_csrf' && mode !== 'api_key') {
      throw new TypeError(`route ${String(route.method)} ${route.url}: config.auth must be none, session, session_csrf or api_key`);
    }
    // A session route that forgets to say what it needs of the role must not be open to every role.
    const p = config?.permission;
    const known = p === 'person' || (typeof p === 'string' && Object.hasOwn(PERMISSIONS, p));
    if ((mode === 'session' || mode === 'session_csrf') && !known) {
      throw new TypeError(`route ${String(route.method)} ${route.url}: a session route needs config.permission`);
    }
  });
  const authenticate = async (request: FastifyRequest, mode: string): Promise<void> => {
    if (mode === 'api_key') {
      request.apiKey = await authenticateApiKey(ctx, request.headers[API_KEY_HEADER]);
      return;
    }
    const session = await authenticateSession(ctx, request);
    if (mode === 'session_csrf') checkCsrf(ctx, request, session);
    const permission = request.routeOptions.config.permission;
    if (permission !== undefined && permission !== 'person' && !can(session.role, permission)) {
      throw new ServiceError('role_forbidden', `Your role in this organisation (${session.role}) does not allow this.`,
        { role: session.role, permission });
    }
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
