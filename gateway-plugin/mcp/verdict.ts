/**
 * Stage 2 of the decision pipeline (pipeline.ts) for a POST to an MCP route:
 * the JSON-RPC message decides the scope. A tool call needs its tool's scope
 * (403 `tool_not_mapped` for a tool not in the table) and sends the tool as
 * `context.tool`; public methods pass without a proof; anything else needs
 * the route's scope. On a session (mcp/session.ts), an answer to a server
 * request or a public method may be proved by the session key instead
 * (`X-Service-Session-Proof`, no verify); a tool in shadow mode is forwarded
 * whatever verify says (shadow.ts).
 */

import { ServiceError } from '../../src/errors.js';
import { sha256Hex } from '../../src/crypto/encoding.js';
import type { VerifyContext } from '../../src/protocol.js';
import { isPublicMethod, TOOLS_CALL } from './config.js';
import { readMcpMessage, toolContext } from './message.js';
import { SESSION_PROOF_HEADER } from './session.js';
import { queryContext } from '../verdict.js';
import type { Admission, GatewayVerdict, Peer, PipelineRequest, VerdictSteps } from '../verdict.js';

/** The verdict of a POST to an MCP route (see the file header). Throws a {@link ServiceError} unless it passes. */
export async function mcpVerdict(
  steps: VerdictSteps, req: PipelineRequest, admission: Admission, body: Buffer | undefined, peer: Peer,
): Promise<GatewayVerdict> {
  const { route, target } = admission;
  const mcp = route.mcp;
  if (mcp === undefined || route.scope === undefined || admission.mcp === undefined) {
    throw new ServiceError('internal_error');
  }
  if (body === undefined) throw new ServiceError('body_not_forwarded');
  const message = readMcpMessage(body, req.headers['content-type'], admission.mcp);
  if (admission.sessionError !== undefined) throw admission.sessionError;
  const base = steps.peerContext(req, peer);
  // Members left undefined are dropped when the verify body is serialized.
  let scope = route.scope;
  let toolShadow = false;
  const query = queryContext(target.query);
  let context: VerifyContext = { method: req.method, path: target.path, ...base, ...query };
  if (message.method === TOOLS_CALL) {
    const tool = message.tool === undefined ? undefined : mcp.tools.get(message.tool);
    if (tool === undefined || message.arguments === undefined) throw new ServiceError('tool_not_mapped');
    scope = tool.scope;
    toolShadow = tool.mode === 'shadow' && route.mode !== 'shadow';
    const args = toolContext(tool, message.arguments);
    context = {
      method: req.method,
      path: tool.resourcePointer === undefined ? target.path : args.path,
      client_ip: base.client_ip,
      tenant: tool.tenantPointer === undefined ? base.tenant : args.tenant,
      amount: args.amount,
      currency: args.currency,
      // The tool itself: operation-bound proofs of tool calls bind it, approvals show it (docs/proofs.md).
      tool: message.tool,
      ...query,
    };
  } else if (message.method !== undefined && isPublicMethod(mcp, message.method)) {
    // On a session, a public method is its agent's too (no other agent may cancel its calls):
    // the session proof, or a proof below.
    if (admission.session === undefined) return { kind: 'public', ...peer };
    if (req.headers[SESSION_PROOF_HEADER] !== undefined) return sessionProved(req, admission, body, peer);
  } else if (message.kind === 'response' && req.headers[SESSION_PROOF_HEADER] !== undefined) {
    return sessionProved(req, admission, body, peer);
  }
  const decide = async (): Promise<GatewayVerdict> => {
    const bundleJson = await steps.readProof(req, scope, route.mode !== 'shadow' && !toolShadow);
    return steps.verify(bundleJson, scope, { ...context, body_sha256: sha256Hex(body) }, req.id, peer);
  };
  if (!toolShadow) return decide();
  // A tool in shadow mode: its call is forwarded whatever verify says (its arguments were read above).
  try {
    return await decide();
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return steps.shadowVerdict(req, admission, err);
  }
}

/**
 * An answer or public method proved by the session key handed to the session's agent:
 * allowed as that agent, without verify.
 */
function sessionProved(req: PipelineRequest, admission: Admission, body: Buffer, peer: Peer): GatewayVerdict {
  const { session, sessions, route } = admission;
  const proof = req.headers[SESSION_PROOF_HEADER];
  if (session === undefined || sessions === undefined || route.scope === undefined) {
    throw new ServiceError('mcp_session_forbidden',
      'A session proof needs the Mcp-Session-Id of a session this gateway bound.');
  }
  if (typeof proof !== 'string' || !sessions.checkAnswer(session.token, proof, body)) {
    throw new ServiceError('mcp_session_forbidden', 'The session proof does not match this session and message.');
  }
  return { kind: 'allow', scope: route.scope, agentId: session.agentId, certId: undefined, ...peer };
}
