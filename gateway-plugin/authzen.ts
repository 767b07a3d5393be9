/**
 * The gateway's AuthZEN mode (`decisionApi: 'authzen'`, docs/authzen.md and
 * docs/gateway.md): the same verify request sent as an AuthZEN 1.0 proof
 * verification to `POST /access/v1/evaluation`, and its answer read back as
 * the verify answer `outcome.ts` maps, so both modes give the same outcome:
 *
 * | AuthZEN answer | read as |
 * |---|---|
 * | 200 `decision: true` | 200 `allow` with the context's reason |
 * | 200 `decision: false` with a `reason` | 200 `deny`, reason, constraint, approval id |
 * | 200 `decision: false` with an `error` | that error, with its status (a refused proof) |
 * | 503 `evaluation_indeterminate` | 200 `indeterminate` with its reason |
 * | anything else | as it is (401, 402, 400, 5xx: refused or unavailable) |
 */
import { AUTHZEN_PATHS, SUBJECT_TYPE } from '../src/authzen.js';
import type { VerifyContext, VerifyRequest } from '../src/protocol.js';

/** The AuthZEN evaluation path the gateway posts to. */
export const AUTHZEN_EVALUATION_PATH = AUTHZEN_PATHS.evaluation;
/** The AuthZEN action search path (the `tools/list` filter, mcp/tools-filter.ts). */
export const AUTHZEN_SEARCH_ACTION_PATH = AUTHZEN_PATHS.searchAction;

/** The agent a proof bundle (JSON text or value) speaks for, or an empty string (the sidecar refuses it). */
function agentOf(bundle: unknown): string {
  let b = bundle;
  if (typeof b === 'string') {
    try { b = JSON.parse(b) as unknown; } catch { return ''; }
  }
  const id = (b as { agent_id?: unknown } | null)?.agent_id;
  return typeof id === 'string' ? id : '';
}

/** The AuthZEN evaluation body of a verify request (`bundleJson`: the bundle as JSON text). */
export function authzenBody(request: Omit<VerifyRequest, 'proof_bundle'>, bundleJson: string): string {
  const ctx: VerifyContext = { ...request.context };
  const { method, path } = ctx;
  const resource = method !== undefined && path !== undefined ? { type: 'http', id: `${method} ${path}` }
    : { type: 'any', id: '*' };
  if (resource.type === 'http') { delete ctx.method; delete ctx.path; }
  const head = JSON.stringify({ subject: { type: SUBJECT_TYPE, id: agentOf(bundleJson) },
    action: { name: request.required_scope }, resource });
  const facts = JSON.stringify(ctx).slice(1, -1);
  return `${head.slice(0, -1)},"context":{${facts}${facts ? ',' : ''}"proof":${bundleJson}}}`;
}

/** An AuthZEN answer read as the verify answer (status and body) `outcome.ts` maps. */
export function fromAuthzen(status: number, body: string): { status: number; body: string } {
  let j: { decision?: unknown; context?: Record<string, unknown>; error?: Record<string, unknown> };
  try { j = JSON.parse(body) as typeof j; } catch { return { status, body }; }
  if (status === 503 && j?.error?.code === 'evaluation_indeterminate') {
    return { status: 200, body: JSON.stringify({ decision: 'indeterminate', decision_reason: j.error.reason,
      ...(typeof j.error.decision_id === 'string' ? { decision_id: j.error.decision_id } : {}) }) };
  }
  if (status !== 200 || typeof j?.decision !== 'boolean') return { status, body };
  const c = j.context ?? {};
  const error = c.error as { status?: unknown } | undefined;
  if (j.decision === false && error !== undefined) {
    return { status: typeof error.status === 'number' ? error.status : 503, body: JSON.stringify({ error }) };
  }
  return { status: 200, body: JSON.stringify({
    decision: j.decision ? 'allow' : 'deny', decision_reason: c.reason,
    ...(c.constraint !== undefined ? { constraint: c.constraint } : {}),
    ...(c.approval_id !== undefined ? { approval_id: c.approval_id } : {}),
    ...(c.decision_id !== undefined ? { decision_id: c.decision_id } : {}),
  }) };
}
