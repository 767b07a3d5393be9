/**
 * The request headers the upstream receives.
 *
 * Removed from what the client sent:
 * - every `X-Service-*` header (the proof, and any client copy of the
 *   decision headers below: the upstream can trust all `X-Service-*` it sees);
 * - hop-by-hop headers (`Connection` and the headers it names, `Keep-Alive`,
 *   `Proxy-Connection`, `Proxy-Authorization`, `TE`, `Trailer`,
 *   `Transfer-Encoding`, `Upgrade`) and `Expect`;
 * - `Forwarded`, `X-Real-IP`, `X-Forwarded-For`, `X-Forwarded-Host`, and
 *   `X-Forwarded-Proto` / `X-Forwarded-Port` unless the peer is a trusted proxy;
 * - the tenant header (when a header tenant rule is configured) unless the
 *   peer is a trusted proxy;
 * - `Content-Length` / `Content-Type` when no body is forwarded (GET, HEAD);
 * - the method and URL override headers of override.ts (`X-HTTP-Method-Override`,
 *   `X-HTTP-Method`, `X-Method-Override`, `X-Original-URL`, `X-Rewrite-URL`),
 *   in every spelling (only reached with `overrideHeaders: 'strip'`);
 * - `Mcp-Session-Id` in every spelling: the client's is a session token of the
 *   gateway, and the gateway sets the upstream's own id itself on MCP routes
 *   (mcp/session.ts); no other route passes one.
 *
 * Set by the gateway:
 * - `X-Service-Decision`: `allow` (verified) or `public` (public route);
 * - on allow: `X-Service-Scope` (the required scope), and `X-Service-Agent-Id`
 *   / `X-Service-Cert-Id` when verify returned them;
 * - `X-Forwarded-For`: exactly the derived client IP (absent if none);
 * - `X-Forwarded-Host`: the Host the gateway received; `X-Forwarded-Proto`:
 *   the gateway's protocol unless a trusted proxy sent one;
 * - `X-Request-Id`: the gateway's request id (the same one sent to verify);
 * - `Host`: the upstream's host (set by the proxy).
 *
 * Names are checked as CGI/WSGI-style servers read them (lower-cased, `_` as
 * `-`, see {@link canonicalHeaderName}): `X_Service_Decision`,
 * `X_Forwarded_For`, `Transfer_Encoding` and the like are removed like their
 * dash spelling. Underscore spellings of `X-Forwarded-*` (any), of
 * `X-Forwarded-Proto` / `-Port` and the tenant header (even from a trusted
 * proxy), of `Host`, `Content-Length` and `Content-Type` are always removed.
 *
 * Responses: hop-by-hop headers of the upstream's response are dropped, and
 * `X-Request-Id` is set to the gateway's request id (an upstream value is
 * replaced); the rest is passed to the client unchanged.
 */

import { overrideHeaderName } from './override.js';

/**
 * Names of the headers the gateway sets on forwarded requests (lowercase).
 * The upstream can trust every `X-Service-*` header it receives when it is
 * reachable only through the gateway (clients' copies are stripped).
 *
 * @example
 * ```ts
 * // in the upstream (any Node server behind the gateway)
 * const agent = request.headers[DECISION_HEADERS.agentId];
 * if (request.headers[DECISION_HEADERS.decision] !== 'allow') throw new Error('not through the gateway');
 * ```
 */
export const DECISION_HEADERS = {
  decision: 'x-service-decision',
  scope: 'x-service-scope',
  agentId: 'x-service-agent-id',
  certId: 'x-service-cert-id',
  requestId: 'x-request-id',
  /** Set with decision `shadow`: `<status> <code>[; reason=<reason>]` of the refusal it would have been. */
  shadowRefusal: 'x-service-shadow-refusal',
} as const;

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'expect', 'http2-settings'];
const FORWARDING = ['forwarded', 'x-real-ip', 'x-forwarded-for', 'x-forwarded-host'];
/** Set by the gateway on MCP routes only (mcp/session.ts); the client's copy is never forwarded. */
const MCP_SESSION = 'mcp-session-id';
const FORWARDING_TRUSTED_ONLY = ['x-forwarded-proto', 'x-forwarded-port'];
/** Names whose underscore spelling is dropped (on top of the lists above, `x-forwarded-*` and the tenant header). */
const UNDERSCORE_DROPPED = ['host', 'content-length', 'content-type'];

/** What the gateway decided for the request being forwarded. */
export interface ForwardDecision {
  readonly kind: 'allow' | 'public' | 'shadow';
  readonly scope?: string | undefined;
  readonly agentId?: string | undefined;
  readonly certId?: string | undefined;
  /** `shadow`: the refusal it would have been (`X-Service-Shadow-Refusal`, shadow.ts). */
  readonly shadowRefusal?: string | undefined;
}

/** Facts about the received request needed to rewrite its headers. */
export interface ForwardFacts {
  readonly requestId: string;
  readonly clientIp: string | undefined;
  readonly trustedPeer: boolean;
  readonly host: string | undefined;
  readonly protocol: string;
  readonly tenantHeader: string | undefined;
  readonly hasBody: boolean;
  readonly hadContentType: boolean;
}

type Headers = Record<string, string | string[] | number | undefined>;

/**
 * A header name as CGI/WSGI-style servers (and many frameworks behind them)
 * see it: lower-cased, with `_` read as `-` (`X_Service_Scope` and
 * `X-Service-Scope` both become `HTTP_X_SERVICE_SCOPE`).
 */
export function canonicalHeaderName(name: string): string {
  return name.toLowerCase().replace(/_/g, '-');
}

/**
 * Rewrites the headers prepared by the proxy (a copy of the client's plus
 * `host`, `content-length`, `content-type`) into what the upstream receives.
 */
export function upstreamRequestHeaders(prepared: Headers, decision: ForwardDecision, facts: ForwardFacts): Headers {
  const out: Headers = {};
  const connection = prepared.connection;
  const named = typeof connection === 'string' ? connection.split(',').map((s) => canonicalHeaderName(s.trim())) : [];
  for (const [rawName, value] of Object.entries(prepared)) {
    const lower = rawName.toLowerCase();
    // Every check runs on the CGI reading of the name, so `X_Service_Decision` is stripped like `X-Service-Decision`.
    const name = canonicalHeaderName(rawName);
    if (value === undefined || name.startsWith('x-service-') || HOP_BY_HOP.includes(name) || named.includes(name)) {
      continue;
    }
    if (FORWARDING.includes(name) || name === DECISION_HEADERS.requestId || name === MCP_SESSION
      || overrideHeaderName(name) !== undefined) continue;
    if (name !== lower) {
      // An underscore spelling of a header the gateway sets or vets is never passed on, even from a trusted proxy.
      if (name.startsWith('x-forwarded-') || FORWARDING_TRUSTED_ONLY.includes(name) || name === facts.tenantHeader ||
        UNDERSCORE_DROPPED.includes(name)) continue;
    }
    if (!facts.trustedPeer && (FORWARDING_TRUSTED_ONLY.includes(name) || name === facts.tenantHeader)) continue;
    if (!facts.hasBody && (name === 'content-length' || name === 'content-type')) continue;
    if (facts.hasBody && name === 'content-type' && !facts.hadContentType) continue;
    out[lower] = value;
  }
  out[DECISION_HEADERS.decision] = decision.kind;
  if (decision.kind === 'allow') {
    if (decision.scope !== undefined) out[DECISION_HEADERS.scope] = decision.scope;
    if (decision.agentId !== undefined) out[DECISION_HEADERS.agentId] = decision.agentId;
    if (decision.certId !== undefined) out[DECISION_HEADERS.certId] = decision.certId;
  }
  if (decision.kind === 'shadow' && decision.shadowRefusal !== undefined) {
    out[DECISION_HEADERS.shadowRefusal] = decision.shadowRefusal;
  }
  out[DECISION_HEADERS.requestId] = facts.requestId;
  if (facts.clientIp !== undefined) out['x-forwarded-for'] = facts.clientIp;
  if (facts.host !== undefined) out['x-forwarded-host'] = facts.host;
  if (out['x-forwarded-proto'] === undefined) out['x-forwarded-proto'] = facts.protocol;
  return out;
}

const RESPONSE_HOP_BY_HOP = [
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade',
];

/**
 * Rewrites an upstream response's headers for the client: drops hop-by-hop
 * headers (and those named in `Connection`), also in their underscore
 * spelling, and any `X-Request-Id` the upstream sent; with `requestId`, sets
 * `X-Request-Id` to the gateway's request id (the one verify saw).
 */
export function upstreamResponseHeaders<H extends Record<string, unknown>>(headers: H, requestId?: string): H {
  const connection = headers.connection;
  const named = typeof connection === 'string' ? connection.split(',').map((s) => canonicalHeaderName(s.trim())) : [];
  const out: Record<string, unknown> = {};
  for (const [rawName, value] of Object.entries(headers)) {
    const name = canonicalHeaderName(rawName);
    if (!RESPONSE_HOP_BY_HOP.includes(name) && !named.includes(name) && name !== DECISION_HEADERS.requestId) {
      out[rawName] = value;
    }
  }
  if (requestId !== undefined) out[DECISION_HEADERS.requestId] = requestId;
  return out as H;
}
