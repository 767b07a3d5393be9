/**
 * Routes of the e-mail-code login and the session (spec endpoints 1–3, plus
 * logout and a session read, which the spec leaves out).
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ServiceError } from '../../src/errors.js';
import { sha256Hex, timingSafeEqualStr } from '../../src/crypto/encoding.js';
import type { ServiceContext } from '../context.js';
import type { LoginCodeResult } from '../metrics.js';
import type { RateLimitHit } from '../store/types.js';
import { NoBody } from '../http/resources.js';
import {
  SESSION_ABSOLUTE_TTL_MS, SESSION_TTL_MS, clearSessionCookies, newCsrfToken, newSessionToken, setSessionCookies,
} from '../http/auth.js';

/** Login-code policy. */
export const CODE_POLICY = { digits: 6, ttlMs: 10 * 60_000, maxWrongTries: 5 } as const;

const EmailBody = Type.Object(
  { email: Type.String({ minLength: 3, maxLength: 254 }) }, { additionalProperties: false });
const VerifyBody = Type.Object({
  email: Type.String({ minLength: 3, maxLength: 254 }),
  code: Type.String({ minLength: 1, maxLength: 16 }),
}, { additionalProperties: false });

/** Normalizes an e-mail address (trim, lowercase) or refuses it. */
export function normalizeEmail(raw: string): string {
  const e = raw.trim().toLowerCase();
  if (!/^[^\s@<>(),;:"\\[\]]+@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/.test(
    e)) {
    throw new ServiceError('invalid_request', 'email is not a valid e-mail address.', { field: 'body.email' });
  }
  return e;
}

function codeHash(ctx: ServiceContext, email: string, code: string): string {
  return crypto.createHmac('sha256', ctx.keys.loginCode).update(`${email}\n${code}`).digest('hex');
}

/**
 * Starts a new session for the person `accountId` acting in `workspaceId` (null: their own),
 * ending `replaces`; sets the cookies and returns its expiry.
 */
async function startSession(ctx: ServiceContext, reply: import('fastify').FastifyReply, accountId: string,
  absoluteExpiresAt: number | null, replaces?: string, workspaceId: string | null = null): Promise<number> {
  const now = ctx.clock();
  const token = newSessionToken();
  const id = crypto.randomUUID();
  const absolute = absoluteExpiresAt ?? now + SESSION_ABSOLUTE_TTL_MS;
  const expiresAt = Math.min(now + SESSION_TTL_MS, absolute);
  await ctx.store.accounts.createSession(
    { id, tokenHash: sha256Hex(token), accountId, expiresAt, absoluteExpiresAt: absolute, endedAt: null,
      createdAt: now, workspaceId }, replaces);
  setSessionCookies(ctx, reply, token, newCsrfToken(ctx, id));
  return expiresAt;
}

/**
 * Rate limits derived from `SIDECAR_SEND_CODE_PER_MINUTE` (N, default 5): send-code N per minute
 * per client IP (IPv6 counted per /64) and 2N per hour per e-mail address; verify-code 6N per
 * minute per client IP. Codes sent over all addresses are capped by
 * `SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE`. With a code's 5 tries, one address meets at most 2N × 5
 * guesses per hour window, however many client addresses the caller has. The counters live in
 * the store (`hitRateLimit`), so no flood of other keys, restart or other replica resets them.
 */
export const RATE_POLICY = { sendsPerEmailPerHourFactor: 2, verifiesPerIpFactor: 6 } as const;

/** The rate-limit key of a client address: IPv4 as is, IPv6 by its /64 prefix. */
export function clientKey(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (!ip.includes(':')) return ip;
  const [head = '', tail] = ip.toLowerCase().split('::');
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':') + '::/64';
}

/** A 429 `rate_limited` answer with `Retry-After` (whole seconds, at least 1). */
function rateLimited(message: string, retryAfterMs: number): ServiceError {
  const retryAfter = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new ServiceError('rate_limited', `${message}; retry in ${retryAfter} s.`, { retry_after: retryAfter }, {
    'retry-after': String(retryAfter) });
}

/** Counts a hit on `key` (at most `max` per `windowMs`) in the store; refuses with 429 `rate_limited` over it. */
async function limit(ctx: ServiceContext, key: string, max: number, windowMs: number, what: string,
  result?: LoginCodeResult): Promise<RateLimitHit> {
  const rate = await ctx.store.accounts.hitRateLimit(key, max, windowMs, ctx.clock());
  if (!rate.allowed) {
    if (result) ctx.metrics.loginCodes.inc({ result });
    throw rateLimited(what, rate.retryAfterMs);
  }
  return rate;
}

/** The store key of the global send-code counter. */
export const GLOBAL_SEND_KEY = 'send-code:global';

const GLOBAL_MESSAGE = 'Too many sign-in codes are being sent right now';

/**
 * The cap on codes sent per minute over all addresses (`SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE`),
 * counted in the store (`GLOBAL_SEND_KEY`, shared by every replica). Once a hit was refused, the
 * window's end is remembered here and later requests are refused before any store work until
 * then: the window cannot send more codes anyway, and a flood costs no writes.
 */
class GlobalSendCap {
  private readonly ctx: ServiceContext;
  /** End of a window known to be over the cap (Unix ms). */
  private closedUntil = 0;
  constructor(ctx: ServiceContext) {
    this.ctx = ctx;
  }

  /** Refuses (429) while a window known to be full lasts. */
  refuseIfClosed(now: number): void {
    if (now >= this.closedUntil) return;
    this.ctx.metrics.loginCodes.inc({ result: 'global_limited' });
    throw rateLimited(GLOBAL_MESSAGE, this.closedUntil - now);
  }

  /**
   * Counts one code. Over the cap the address's hit (`emailKey`, `emailHit`) is given back, since
   * no code was sent; the first refusal of a window (over every replica: the one that counted
   * cap + 1) is logged at `warn`.
   */
  async hit(request: FastifyRequest, emailKey: string, emailHit: RateLimitHit, now: number): Promise<void> {
    const cap = this.ctx.config.sendCodeGlobalPerMinute;
    const rate = await this.ctx.store.accounts.hitRateLimit(GLOBAL_SEND_KEY, cap, 60_000, now);
    if (rate.allowed) return;
    this.closedUntil = Math.max(this.closedUntil, now + rate.retryAfterMs);
    this.ctx.metrics.loginCodes.inc({ result: 'global_limited' });
    if (rate.count === cap + 1) {
      request.log.warn({ cap, window_ends_at: new Date(now + rate.retryAfterMs).toISOString() },
        'login-code global cap reached (SIDECAR_SEND_CODE_GLOBAL_PER_MINUTE): send-code is refused for every '
          + 'address until the window ends');
    }
    await this.ctx.store.accounts.releaseRateLimit(emailKey, now + emailHit.retryAfterMs);
    throw rateLimited(GLOBAL_MESSAGE, rate.retryAfterMs);
  }
}

/** The routes of this file, each defined once (api/route.ts). */
export const AUTH_ROUTES = {
  sendLoginCode: defineRoute({
    method: 'POST', url: '/v1/auth/email/send-code', auth: 'none',
    schema: { body: EmailBody, tags: ['auth'] },
    operation: op('sendLoginCode', 'Send a sign-in code by e-mail (spec 4.1)',
      'Sends a 6-digit code, valid 10 minutes. An earlier unused code for the address stops working. Rate limited '
        + 'per client IP and per address.',
      S.SendCodeResult, ['rate_limited', 'service_unavailable']),
  }),
  verifyLoginCode: defineRoute({
    method: 'POST', url: '/v1/auth/email/verify-code', auth: 'none',
    schema: { body: VerifyBody, tags: ['auth'] },
    operation: op('verifyLoginCode', 'Exchange the code for a session (spec 4.2)',
      'Sets the `service_session` and `service_csrf` cookies; no token appears in the body. The first sign-in '
        + 'creates the account.',
      S.LoginResult, ['invalid_code', 'code_expired', 'code_used', 'code_locked', 'rate_limited']),
  }),
  refreshSession: defineRoute({
    method: 'POST', url: '/v1/auth/refresh', auth: 'session_csrf', permission: 'person',
    schema: { body: NoBody, tags: ['auth'] },
    operation: op('refreshSession', 'Renew the session (spec 4.3)',
      'Rotates both cookies and gives 15 more minutes (at most 12 hours after sign-in). Re-read `service_csrf` '
        + 'afterwards.', S.RefreshResult),
  }),
  logout: defineRoute({
    method: 'POST', url: '/v1/auth/logout', auth: 'session_csrf', permission: 'person',
    schema: { body: NoBody, tags: ['auth'] },
    operation: op('logout', 'End the session', 'Ends the session and clears both cookies.', S.LogoutResult),
  }),
  getSession: defineRoute({
    method: 'GET', url: '/v1/auth/session', auth: 'session', permission: 'person',
    schema: { tags: ['auth'] },
    operation: op('getSession', 'Read the session and account', 'The signed-in account and when the session expires.',
      S.Session),
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the login and session routes. */
export async function registerAuthRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  const perMinute = ctx.config.sendCodePerMinute;
  const globalCap = new GlobalSendCap(ctx);

  mount(app, AUTH_ROUTES.sendLoginCode, async (request) => {
    globalCap.refuseIfClosed(ctx.clock());
    await limit(ctx, `send-code:ip:${clientKey(request.ip)}`, perMinute, 60_000, 'Too many codes requested',
      'ip_limited');
    const email = normalizeEmail((request.body as { email: string }).email);
    const emailKey = `send-code:email:${email}`;
    const emailHit = await limit(ctx, emailKey, perMinute * RATE_POLICY.sendsPerEmailPerHourFactor, 3600_000,
      'Too many codes requested for this address', 'address_limited');
    await globalCap.hit(request, emailKey, emailHit, ctx.clock());
    const now = ctx.clock();
    const prev = await ctx.store.accounts.latestLoginCode(email);
    const resent = !!prev && prev.usedAt === null && prev.expiresAt > now;
    const code = String(crypto.randomInt(0, 10 ** CODE_POLICY.digits)).padStart(CODE_POLICY.digits, '0');
    await ctx.store.accounts.insertLoginCode({
      id: crypto.randomUUID(), email, codeHash: codeHash(ctx, email, code), attempts: 0,
      expiresAt: now + CODE_POLICY.ttlMs, usedAt: null, createdAt: now,
    });
    try {
      await ctx.mailer.sendLoginCode(email, code, CODE_POLICY.ttlMs / 60_000);
    } catch (err) {
      ctx.metrics.loginCodes.inc({ result: 'mail_failed' });
      request.log.error({ err: { message: (err as Error).message } }, 'login code e-mail could not be sent');
      throw new ServiceError('service_unavailable', 'The code could not be e-mailed; try again later.');
    }
    ctx.metrics.loginCodes.inc({ result: 'sent' });
    return { resent, status: 'code_sent' };
  });

  mount(app, AUTH_ROUTES.verifyLoginCode, async (request, reply) => {
    await limit(ctx, `verify-code:ip:${clientKey(request.ip)}`, perMinute * RATE_POLICY.verifiesPerIpFactor, 60_000,
      'Too many sign-in attempts');
    const body = request.body as { email: string; code: string };
    const email = normalizeEmail(body.email);
    const now = ctx.clock();
    const rec = await ctx.store.accounts.latestLoginCode(email);
    if (!rec) throw new ServiceError('invalid_code');
    if (rec.usedAt !== null) throw new ServiceError('code_used');
    if (rec.expiresAt <= now) throw new ServiceError('code_expired');
    // Reserve the try before comparing, so parallel guesses cannot exceed the limit.
    if (!(await ctx.store.accounts.reserveCodeAttempt(rec.id, CODE_POLICY.maxWrongTries))) throw new ServiceError(
      'code_locked');
    if (!/^\d{6}$/.test(body.code) || !timingSafeEqualStr(codeHash(ctx, email, body.code), rec.codeHash)) {
      throw new ServiceError('invalid_code', undefined, { tries_left: Math.max(0,
        CODE_POLICY.maxWrongTries - rec.attempts - 1) });
    }
    await ctx.store.accounts.releaseCodeAttempt(rec.id);
    if (!(await ctx.store.accounts.consumeLoginCode(rec.id, now))) throw new ServiceError('code_used');
    const account = await ctx.store.accounts.findOrCreateAccount(email, crypto.randomUUID(), now);
    const expiresAt = await startSession(ctx, reply, account.id, null);
    return { status: 'authenticated', onboarding_step: account.onboardingStep, session_expires_at: new Date(
      expiresAt).toISOString() };
  });

  mount(app, AUTH_ROUTES.refreshSession, async (request, reply) => {
    const s = request.session!;
    const old = await ctx.store.accounts.getSessionByTokenHash(sha256Hex(request.cookies.service_session ?? ''));
    const expiresAt = await startSession(ctx, reply, s.personId, old?.absoluteExpiresAt ?? null, s.sessionId,
      s.organisationId);
    return { status: 'refreshed', session_expires_at: new Date(expiresAt).toISOString() };
  });

  mount(app, AUTH_ROUTES.logout, async (request, reply) => {
    await ctx.store.accounts.endSession(request.session!.sessionId, ctx.clock());
    clearSessionCookies(ctx, reply);
    return { status: 'logged_out' };
  });

  mount(app, AUTH_ROUTES.getSession, async (request) => {
    const s = request.session!;
    const a = await ctx.store.accounts.getAccount(s.personId);
    if (!a) throw new ServiceError('auth_required');
    const org = s.organisationId === null ? undefined : await ctx.store.accounts.getAccount(s.organisationId);
    return {
      account_id: a.id, email: a.email, first_name: a.firstName, last_name: a.lastName, account_type: a.accountType,
      onboarding_step: a.onboardingStep, session_expires_at: new Date(s.expiresAt).toISOString(),
      workspace: org === undefined
        ? { workspace_id: a.id, kind: 'personal', name: null, role: 'owner' }
        : { workspace_id: org.id, kind: 'organization', name: org.orgName ?? null, role: s.role },
    };
  });
}
