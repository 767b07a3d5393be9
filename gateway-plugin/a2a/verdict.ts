/**
 * Stage 2 of the decision pipeline (pipeline.ts) for a POST to an A2A route:
 * the A2A request's method (or declared skill) decides the scope (403
 * `a2a_method_not_mapped` for an unknown method, 400 `a2a_push_url_refused`
 * for a push URL the SSRF rules refuse; a2a/message.ts), and once verify
 * allowed, every task it names must be one the verified agent created (404
 * `a2a_task_not_found`; a2a/tasks.ts). A method in shadow mode on an
 * enforcing route (`a2a.shadow`) is forwarded whatever the decision.
 */

import { ServiceError } from '../../src/errors.js';
import { sha256Hex } from '../../src/crypto/encoding.js';
import type { VerifyContext } from '../../src/protocol.js';
import { a2aScope, readA2aMessage } from './message.js';
import { queryContext } from '../verdict.js';
import type { Admission, GatewayVerdict, Peer, PipelineRequest, VerdictSteps } from '../verdict.js';

/** The verdict of a POST to an A2A route (see the file header). Throws a {@link ServiceError} unless it passes. */
export async function a2aVerdict(
  steps: VerdictSteps, req: PipelineRequest, admission: Admission, body: Buffer | undefined, peer: Peer,
): Promise<GatewayVerdict> {
  const { route, target } = admission;
  if (route.a2a === undefined || admission.mcp === undefined) throw new ServiceError('internal_error');
  if (body === undefined) throw new ServiceError('body_not_forwarded');
  const message = readA2aMessage(body, req.headers['content-type'], admission.mcp);
  const scope = a2aScope(route.a2a, message);
  // A method in shadow mode on an enforcing route (`a2a.shadow`): forwarded whatever the decision.
  const methodShadow = route.mode !== 'shadow' && route.a2a.shadowMethods.has(message.method);
  const decide = async (): Promise<GatewayVerdict> => {
    const bundleJson = await steps.readProof(req, scope, route.mode !== 'shadow' && !methodShadow);
    const context: VerifyContext = {
      method: req.method, path: target.path, ...steps.peerContext(req, peer), ...queryContext(target.query),
      body_sha256: sha256Hex(body),
    };
    const decision = await steps.verify(bundleJson, scope, context, req.id, peer);
    if (decision.kind === 'allow') {
      const owners = steps.tasks(route);
      for (const taskId of message.taskIds) {
        const owner = owners?.owner(taskId);
        if (owner === undefined || owner !== decision.agentId) throw new ServiceError('a2a_task_not_found');
      }
    }
    return decision;
  };
  if (!methodShadow) return decide();
  try {
    return await decide();
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return steps.shadowVerdict(req, admission, err);
  }
}
