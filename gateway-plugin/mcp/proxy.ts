/**
 * The reverse proxy's side of MCP sessions (mcp/session.ts): the upstream's
 * `Mcp-Session-Id` on an answer becomes a session token bound to the agent
 * the request was verified for (with the session key, `X-Service-Session-Key`,
 * when the token is new), a session ends on the upstream's acceptance of a
 * DELETE or its 404, and an answer over the body limit is answered to the
 * server as an error (mcp/answer.ts).
 */

import type { FastifyReply, FastifyRequest } from 'fastify';
import { DECISION_HEADERS, canonicalHeaderName } from '../headers.js';
import type { Admission, GatewayVerdict } from '../pipeline.js';
import { answerOnBehalf } from './answer.js';
import type { McpAnswerTooLarge } from './body.js';
import { MCP_SESSION_HEADER, SESSION_KEY_HEADER } from './session.js';

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
