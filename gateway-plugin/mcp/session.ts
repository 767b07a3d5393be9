/**
 * MCP sessions bound to the agent that opened them (docs/mcp.md#sessions).
 *
 * The upstream's `Mcp-Session-Id` never reaches the client. On an answer that
 * carries one, the gateway hands out its own session id, a token
 *
 * ```text
 * s1.<agent id, base64url>
 *   .<upstream session id, AES-256-GCM, base64url>
 *   .<issued at, ms base36>
 *   .<HMAC-SHA256, base64url>
 * ```
 *
 * MACed under a key derived (HKDF) from the gateway's MCP session secret
 * (`mcpSessionSecret`, config `mcp_session_secret_env`: a secret only the
 * gateway holds, never the sidecar API key its agents share) and the route's
 * path pattern. Every replica configured with the same secret reads it
 * without shared state and a restart keeps it; without a configured secret
 * each process draws a random one (sessions then end with the process and do
 * not cross replicas). A token cannot be forged, moved to another agent or
 * MCP route (or, on a pattern with `:param` or `*`, another request path),
 * or dated in the future (more than {@link MAX_CLOCK_SKEW_MS}). The token
 * carries the upstream's id encrypted (AES-256-GCM, a third HKDF output, a
 * random 12-byte IV): a token does not reveal it. Each later request on the
 * session is mapped back to the upstream's id, and refused unless the agent
 * its proof was verified for is the token's agent.
 *
 * With the token, the client gets `X-Service-Session-Key` (once, on the
 * answer that opened the session): HMAC(answer key, token), the answer key
 * an HKDF output separate from the token MAC's. Answers to
 * the server's requests (JSON-RPC responses) may then carry
 * `X-Service-Session-Proof: base64url(HMAC-SHA256(session key, body))`
 * instead of a full proof: no challenge, present or verify per answer, and
 * only the agent that received the session key can compute it.
 *
 * A session ends on a DELETE the upstream accepted, or the upstream's 404 for
 * it; the gateway then remembers its upstream id as ended (bounded by count and by
 * the token's lifetime) and refuses it with 404 `mcp_session_not_found`. A
 * token older than its route's `session_ttl_ms` is refused the same way.
 */

import {
  createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual,
} from 'node:crypto';
import { ServiceError } from '../../src/errors.js';
import { canonicalHeaderName } from '../headers.js';

/** The answer header that hands the session key to the agent that opened the session. */
export const SESSION_KEY_HEADER = 'x-service-session-key';
/** The request header of an answer's session proof. */
export const SESSION_PROOF_HEADER = 'x-service-session-proof';
/** The MCP session header. */
export const MCP_SESSION_HEADER = 'mcp-session-id';
/** Most ended sessions remembered per gateway (oldest forgotten first; the upstream's 404 covers the rest). */
export const MAX_ENDED_SESSIONS = 100_000;

/** How far in the future a token's issue time may be (clocks of replicas differ a little). */
export const MAX_CLOCK_SKEW_MS = 60_000;
/** Fewest bytes of a configured session secret. */
export const MIN_SESSION_SECRET_BYTES = 32;

const PREFIX = 's1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const B64URL = /^[A-Za-z0-9_-]+$/;
/** MCP: a session id is visible ASCII. */
const SESSION_ID = /^[\x21-\x7e]{1,1024}$/;

/** An opened token: who the session belongs to and the upstream's id. */
export interface SessionBinding {
  readonly token: string;
  readonly agentId: string;
  readonly upstreamId: string;
  readonly issuedAt: number;
}

function b64(value: string | Buffer): string {
  return Buffer.from(value).toString('base64url');
}

function unb64(value: string): string | undefined {
  if (!B64URL.test(value)) return undefined;
  const text = Buffer.from(value, 'base64url').toString('utf8');
  return b64(text) === value ? text : undefined;
}

/** The session binding of one MCP route (its keys, its set of ended sessions). */
export class McpSessions {
  readonly #tokenKey: Buffer;
  readonly #answerKey: Buffer;
  readonly #idKey: Buffer;
  readonly #ttlMs: number;
  /** Ended sessions: SHA-256 of the upstream id → when its last token expires. */
  readonly #ended = new Map<string, number>();
  readonly #now: () => number;
  /** The route's pattern has `:param` or `*`: a token is good on the concrete path it was issued on only. */
  readonly #bindPath: boolean;

  /**
   * `secret`: the gateway's MCP session secret (at least {@link MIN_SESSION_SECRET_BYTES} bytes; never the API key);
   * `route`: the route's path pattern; `ttlMs`: a token's lifetime.
   */
  constructor(secret: Uint8Array, route: string, ttlMs: number, now: () => number = Date.now) {
    if (secret.length < MIN_SESSION_SECRET_BYTES) {
      throw new TypeError(`McpSessions: secret must be at least ${MIN_SESSION_SECRET_BYTES} bytes`);
    }
    const derive = (use: string): Buffer => Buffer.from(
      hkdfSync('sha256', secret, 'agent-authz mcp session v2', `${use} route ${route}`, 32),
    );
    this.#tokenKey = derive('token mac');
    this.#answerKey = derive('answer key');
    this.#idKey = derive('upstream id aead');
    this.#ttlMs = ttlMs;
    this.#now = now;
    this.#bindPath = route.split('/').some((segment) => segment === '*' || segment.startsWith(':'));
  }

  #mac(text: string, path: string): string {
    return createHmac('sha256', this.#tokenKey).update(this.#bindPath ? `${text}\n${path}` : text).digest('base64url');
  }

  /**
   * A token binding the upstream's session id to `agentId` (and, on a route pattern with `:param` or `*`, to the
   * normalized request `path`); `undefined` when the upstream's id is not an MCP session id.
   */
  mint(agentId: string, upstreamId: string, path = ''): string | undefined {
    if (!SESSION_ID.test(upstreamId)) return undefined;
    const agent = b64(agentId);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#idKey, iv).setAAD(Buffer.from(agent));
    const sealed = Buffer.concat([iv, cipher.update(upstreamId, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    const body = `${PREFIX}.${agent}.${b64(sealed)}.${this.#now().toString(36)}`;
    return `${body}.${this.#mac(body, path)}`;
  }

  /** The upstream id sealed in a token part, or `undefined`. */
  #unseal(agent: string, part: string): string | undefined {
    if (!B64URL.test(part)) return undefined;
    const sealed = Buffer.from(part, 'base64url');
    if (b64(sealed) !== part || sealed.length <= IV_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#idKey, sealed.subarray(0, IV_BYTES))
        .setAAD(Buffer.from(agent));
      decipher.setAuthTag(sealed.subarray(-TAG_BYTES));
      const id = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, -TAG_BYTES)), decipher.final()])
        .toString('utf8');
      return SESSION_ID.test(id) ? id : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The binding of `token` on `path`, or `undefined` when it is not one of ours, was altered, has ended, expired or is
   * dated ahead.
   */
  open(token: string, path = ''): SessionBinding | undefined {
    const parts = token.split('.');
    if (parts.length !== 5 || parts[0] !== PREFIX) return undefined;
    const body = parts.slice(0, 4).join('.');
    const expected = Buffer.from(this.#mac(body, path));
    const given = Buffer.from(parts[4] ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const agentId = unb64(parts[1] ?? '');
    const upstreamId = this.#unseal(parts[1] ?? '', parts[2] ?? '');
    const issuedAt = /^[0-9a-z]{1,12}$/.test(parts[3] ?? '') ? parseInt(parts[3] ?? '', 36) : NaN;
    if (agentId === undefined || upstreamId === undefined || !Number.isSafeInteger(issuedAt)) return undefined;
    const now = this.#now();
    if (now - issuedAt > this.#ttlMs || issuedAt - now > MAX_CLOCK_SKEW_MS || this.#ended.has(endedKey(upstreamId))) {
      return undefined;
    }
    return { token, agentId, upstreamId, issuedAt };
  }

  /** The session key handed to the agent with `token`. */
  answerKey(token: string): string {
    return createHmac('sha256', this.#answerKey).update(token).digest('base64url');
  }

  /** True when `proof` is the session proof of `body` under the token's session key. */
  checkAnswer(token: string, proof: string, body: Buffer): boolean {
    const key = Buffer.from(this.answerKey(token), 'base64url');
    const expected = Buffer.from(createHmac('sha256', key).update(body).digest('base64url'));
    const given = Buffer.from(proof);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /** Ends the session: every token of its upstream id is refused from now on (until the last could have expired). */
  end(binding: SessionBinding): void {
    const now = this.#now();
    for (const [key, expires] of this.#ended) {
      if (this.#ended.size < MAX_ENDED_SESSIONS && expires > now) break;
      this.#ended.delete(key);
    }
    const key = endedKey(binding.upstreamId);
    this.#ended.delete(key);
    this.#ended.set(key, now + MAX_CLOCK_SKEW_MS + this.#ttlMs);
  }
}

function endedKey(upstreamId: string): string {
  return createHash('sha256').update(upstreamId).digest('base64url');
}

/**
 * The `Mcp-Session-Id` a request carries (`undefined`: none). Two of them, or one spelled with `_`
 * (read as the same header by CGI/WSGI-style servers), are 400 `mcp_session_header_invalid`.
 */
export function sessionHeaderOf(rawHeaders: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (canonicalHeaderName(name) !== MCP_SESSION_HEADER) continue;
    if (value !== undefined || name.toLowerCase() !== MCP_SESSION_HEADER) {
      throw new ServiceError('mcp_session_header_invalid');
    }
    value = rawHeaders[i + 1] ?? '';
  }
  return value;
}

/**
 * The session proof of `body` for an agent holding `sessionKey` (the client side of {@link McpSessions.checkAnswer}).
 */
export function sessionProof(sessionKey: string, body: Uint8Array): string {
  return createHmac('sha256', Buffer.from(sessionKey, 'base64url')).update(body).digest('base64url');
}
