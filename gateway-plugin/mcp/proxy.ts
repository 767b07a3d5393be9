/**
 * The reverse proxy's side of MCP sessions (mcp/session.ts): the upstream's
 * `Mcp-Session-Id` on an answer becomes a session token bound to the agent
 * the request was verified for (with the session key, `X-Service-Session-Key`,
 * when the token is new), a session ends on the upstream's acceptance of a
 * DELETE or its 404, and an answer over the body limit is answered to the
 * server as an error (mcp/answer.ts). Each MCP route has its own session
 * binding ({@link sessionsByRoute}); an answer on a session may be read past
 * the limit when its session proof matches ({@link answerOverflow}, mcp/body.ts).
 */

import type { FastifyReply, FastifyRequest } from 'fastify';
import { DECISION_HEADERS, canonicalHeaderName } from '../headers.js';
import type { Admission, GatewayVerdict } from '../verdict.js';
import type { RouteMatch } from '../routes.js';
import { answerOnBehalf } from './answer.js';
import type { McpAnswerTooLarge, OverflowCheck } from './body.js';
import { MCP_SESSION_HEADER, McpSessions, SESSION_KEY_HEADER } from './session.js';

/** The session binding of each MCP route, made on first use with `secret` (`undefined` for other routes). */
export function sessionsByRoute(secret: Uint8Array): (route: RouteMatch) => McpSessions | undefined {
  const byRoute = new Map<number, McpSessions>();
  return (route) => {
    if (route.mcp === undefined) return undefined;
    let sessions = byRoute.get(route.index);
    if (sessions === undefined) {
      sessions = new McpSessions(secret, route.pattern, route.mcp.sessionTtlMs);
      byRoute.set(route.index, sessions);
    }
    return sessions;
  };
}

/**
 * The protocol's part of the upstream request headers: the upstream's own session id on a session; and
 * uncompressed answers where the gateway reads them: A2A answers for the tasks they name (a2a/answer.ts),
 * filtered tools/list answers (mcp/tools-filter.ts).
 */
export function protocolRequestHeaders<H extends Record<string, unknown>>(
  out: H, admission: Admission | undefined, filtered: boolean,
): H {
  const session = admission?.session;
  const headers = out as Record<string, unknown>;
  if (session !== undefined) headers[MCP_SESSION_HEADER] = session.upstreamId;
  if (admission?.route.a2a !== undefined || filtered) headers['accept-encoding'] = 'identity';
  return out;
}

/** How an answer over the limit may still be read: on a session, with the client's session proof (mcp/body.ts). */
export function answerOverflow(
  admission: Admission | undefined, proof: string | string[] | undefined,
): OverflowCheck | undefined {
  const { session, sessions } = admission ?? {};
  if (session === undefined || sessions === undefined || typeof proof !== 'string') return undefined;
  return { key: sessions.answerKey(session.token), proof, maxBytes: admission?.route.mcp?.answerOverflowBytes };
}

/** Rewrites the session headers of an upstream answer (see the file header). */
export function rewriteSessionHeaders(
  method: string,
  admission: Admission,
  decision: GatewayVerdict | undefined,
  reply: FastifyReply,
  status: number,
): void {
  const { session, sessions } = admission;
  // Only the gateway hands out session keys; an underscore spelling of the session id is not the upstream's session.
  reply.removeHeader(SESSION_KEY_HEADER);
  for (const name of Object.keys(reply.getHeaders())) {
    if (name !== MCP_SESSION_HEADER && canonicalHeaderName(name) === MCP_SESSION_HEADER) reply.removeHeader(name);
  }
  if (sessions === undefined) return;
  if (session !== undefined && ((method === 'DELETE' && status >= 200 && status < 300) || status === 404)) {
    sessions.end(session);
  }
  const upstreamId = reply.getHeader(MCP_SESSION_HEADER);
  if (upstreamId === undefined) return;
  if (session !== undefined && upstreamId === session.upstreamId) {
    reply.header(MCP_SESSION_HEADER, session.token);
    return;
  }
  const agentId = decision?.kind === 'allow' ? decision.agentId : undefined;
  const token = agentId === undefined || typeof upstreamId !== 'string'
    ? undefined
    : sessions.mint(agentId, upstreamId, admission.target.path);
  if (token === undefined) {
    // A session the gateway cannot bind to an agent is not handed out.
    reply.removeHeader(MCP_SESSION_HEADER);
    return;
  }
  // The session key is for the agent alone: no cache keeps the answer that carries it.
  reply
    .header(MCP_SESSION_HEADER, token)
    .header(SESSION_KEY_HEADER, sessions.answerKey(token))
    .header('cache-control', 'no-store');
}

/** A route that is not an MCP route passes no session id (nor session key) back to the client, in any spelling. */
export function stripSessionHeaders(reply: FastifyReply): void {
  for (const name of Object.keys(reply.getHeaders())) {
    const canonical = canonicalHeaderName(name);
    if (canonical === MCP_SESSION_HEADER || canonical === SESSION_KEY_HEADER) reply.removeHeader(name);
  }
}

/** Sends the server a JSON-RPC error for the request an over-limit answer was for, in the answer's session. */
export function answerServer(
  upstream: string,
  request: FastifyRequest,
  admission: Admission,
  err: McpAnswerTooLarge,
): void {
  const { session, route, target } = admission;
  if (session === undefined || route.scope === undefined) return;
  const headers: Record<string, string> = {
    [MCP_SESSION_HEADER]: session.upstreamId,
    [DECISION_HEADERS.decision]: 'allow',
    [DECISION_HEADERS.scope]: route.scope,
    [DECISION_HEADERS.agentId]: session.agentId,
    [DECISION_HEADERS.requestId]: request.id,
  };
  const version = request.headers['mcp-protocol-version'];
  if (typeof version === 'string') headers['mcp-protocol-version'] = version;
  const url = `${upstream}${target.path}${target.query === undefined ? '' : `?${target.query}`}`;
  void answerOnBehalf(url, headers, err.answerId, err.limit, request.log);
}
