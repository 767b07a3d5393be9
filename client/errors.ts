/**
 * The typed error of the agent-side client: a refusal by the gateway (or
 * forward-auth proxy) in front of the API, or a failure of the sidecar calls
 * that make the proof (challenge, present).
 *
 * Gateway refusals are recognized by their body: the service error shape
 * `{error:{code,message,status}}` (or, on MCP routes, a JSON-RPC error whose
 * `error.data` has that shape) with one of the gateway's codes and the
 * response's status. Anything else is the API's own answer and is returned
 * to the caller as a normal `Response`.
 */

import { GATEWAY_ERROR_CODES } from '../src/errors.js';
import type { AgentOperation } from './operation.js';

/**
 * Codes only the gateway (or the forward-auth endpoint) sends: a response with one of them is a
 * refusal. The gateway part of the error table (`GATEWAY_ERRORS` of src/errors.ts, which imports nothing).
 */
export const GATEWAY_REFUSAL_CODES: ReadonlySet<string> = new Set<string>(GATEWAY_ERROR_CODES);

/**
 * Where a refusal came from: the API's gateway, or the sidecar while making the proof.
 *
 * @example
 * ```ts
 * if (err instanceof AgentAuthzError && err.source === 'sidecar') console.error('no proof could be made:', err.code);
 * ```
 */
export type AgentAuthzErrorSource = 'gateway' | 'sidecar';

/**
 * The state of the step-up approval a refusal names: `pending` (still undecided when the
 * client stopped waiting, or not waited for), `denied`, `expired` or `used` (docs/api.md).
 *
 * @example
 * ```ts
 * if (err instanceof AgentAuthzError && err.approvalState === 'denied') console.log(`denied: ${err.note ?? 'no note'}`);
 * ```
 */
export type ApprovalState = 'pending' | 'granted' | 'denied' | 'expired' | 'used';

/** Facts about a refused request that are not in its error body (internal; see {@link AgentAuthzError}). */
interface AgentAuthzErrorExtra {
  requestId?: string | undefined;
  jsonRpcId?: string | number | null | undefined;
  operation?: AgentOperation | undefined;
  approvalId?: string | undefined;
  approvalState?: ApprovalState | undefined;
  note?: string | undefined;
}

/**
 * A refused request or a failed proof: `code` is the error code (see
 * docs/errors.md), `reason` the decision reason (`not_delegated`,
 * `constraint_denied`, the verify reason of `proof_rejected` such as
 * `invalid_challenge`, `approval_required`, …), `constraint` the constraint
 * that did not hold; for step-up approvals `approvalId`, `approvalState` and
 * the person's `note` (reason `approval_denied` / `approval_expired` /
 * `approval_used` once a wait ended so).
 *
 * @example
 * ```ts
 * try {
 *   await agentFetch('https://api.example.com/v1/payments', { method: 'POST', body });
 * } catch (err) {
 *   if (err instanceof AgentAuthzError && err.reason === 'constraint_denied') console.log(`over the limit (${err.constraint})`);
 *   else throw err;
 * }
 * ```
 */
export class AgentAuthzError extends Error {
  /** The error code, e.g. `not_delegated`, `proof_rejected`, `no_active_delegation`. */
  readonly code: string;
  /** HTTP status of the refusal (of the sidecar call for `source: 'sidecar'`). */
  readonly status: number;
  /** The decision or refusal reason: `error.reason` when given, else the code. */
  readonly reason: string;
  /** With `constraint_denied`: the constraint that did not hold (e.g. `max_amount`). */
  readonly constraint: string | undefined;
  /** The MCP tool of a refused `tools/call`. */
  readonly tool: string | undefined;
  /** The JSON-RPC id of a refused MCP message. */
  readonly jsonRpcId: string | number | null | undefined;
  /** The gateway's `X-Request-Id` (to find the decision in its and the sidecar's logs). */
  readonly requestId: string | undefined;
  /** `gateway`: the API's gateway refused; `sidecar`: the proof could not be made. */
  readonly source: AgentAuthzErrorSource;
  /** The operation that was refused. */
  readonly operation: AgentOperation | undefined;
  /**
   * The step-up approval the refusal names (reasons `approval_required`, `approval_denied`,
   * `approval_expired`, `approval_used`): from `error.approval_id` or `X-Service-Approval-Id`.
   */
  readonly approvalId: string | undefined;
  /** The approval's state when the client gave up: `pending` (not waited for, or the wait ended), `denied`, `expired`, `used`. */
  readonly approvalState: ApprovalState | undefined;
  /** The account holder's note with a denied approval. */
  readonly note: string | undefined;
  /** The error object as received (`{code, message, status, …}`). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(source: AgentAuthzErrorSource, status: number, details: Record<string, unknown>, extra: AgentAuthzErrorExtra = {}) {
    const code = typeof details.code === 'string' ? details.code : 'service_unavailable';
    super(typeof details.message === 'string' ? `${code}: ${details.message}` : code);
    this.name = 'AgentAuthzError';
    this.code = code;
    this.status = status;
    this.reason = typeof details.reason === 'string' ? details.reason : code;
    this.constraint = typeof details.constraint === 'string' ? details.constraint : undefined;
    this.tool = typeof details.tool === 'string' ? details.tool : undefined;
    this.jsonRpcId = extra.jsonRpcId;
    this.requestId = extra.requestId;
    this.source = source;
    this.operation = extra.operation;
    this.approvalId = typeof details.approval_id === 'string' ? details.approval_id : extra.approvalId;
    this.approvalState = extra.approvalState ?? (this.approvalId !== undefined && this.reason === 'approval_required' ? 'pending' : undefined);
    this.note = extra.note;
    this.details = details;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The service error inside a response body (plain or JSON-RPC), with the JSON-RPC id, or `undefined`. */
export function serviceErrorOf(body: unknown): { error: Record<string, unknown>; jsonRpcId: string | number | null | undefined } | undefined {
  if (!isObject(body) || !isObject(body.error)) return undefined;
  if (body.jsonrpc === '2.0') {
    const id = body.id;
    const jsonRpcId = typeof id === 'string' || typeof id === 'number' || id === null ? id : undefined;
    return isObject(body.error.data) ? { error: body.error.data, jsonRpcId } : undefined;
  }
  return { error: body.error, jsonRpcId: undefined };
}

/** The gateway refusal in a response (status and parsed body), or `undefined` for the API's own answers. */
export function gatewayRefusal(status: number, body: unknown): { error: Record<string, unknown>; jsonRpcId: string | number | null | undefined } | undefined {
  const found = serviceErrorOf(body);
  if (found === undefined) return undefined;
  const { code, status: bodyStatus } = found.error;
  return typeof code === 'string' && GATEWAY_REFUSAL_CODES.has(code) && bodyStatus === status ? found : undefined;
}
