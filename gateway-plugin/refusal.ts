/**
 * What a refusal looks like on the wire, shared by the proxy and the
 * forward-auth endpoint (so both answer with the same status and body).
 *
 * - Plain routes: `{error:{code,message,status,…}}` with the error's headers
 *   (`WWW-Authenticate` on 401).
 * - POSTs to an MCP or A2A route: a JSON-RPC 2.0 error response carrying the
 *   message's `id` (null when it could not be read), a JSON-RPC error code
 *   ({@link jsonRpcErrorCode}), and the service error in `error.data` plus
 *   `reason` (the decision or refusal reason) and `tool` (for tool calls).
 *   The HTTP status is the same as on plain routes (401, 403, 503, …).
 */

import type { FastifyError, FastifyRequest } from 'fastify';
import { ServiceError } from '../src/errors.js';
import type { McpFacts } from './mcp/message.js';

/** JSON-RPC error codes of MCP refusals (server-defined range -32000…-32099 for 401/403). */
export const JSONRPC_ERROR_CODES = {
  parseError: -32700,
  invalidRequest: -32600,
  internalError: -32603,
  unauthorized: -32001,
  forbidden: -32003,
} as const;

/**
 * JSON-RPC error codes of A2A refusals that differ from MCP's: A2A defines -32001…-32009 itself
 * (-32001 is `TaskNotFoundError`), so 401 and 403 take -32041 and -32043, an unknown method is
 * JSON-RPC's -32601, a refused push URL -32602 (invalid params), and an unknown task A2A's own -32001.
 */
export const A2A_JSONRPC_ERROR_CODES = {
  unauthorized: -32041,
  forbidden: -32043,
  methodNotFound: -32601,
  invalidParams: -32602,
  taskNotFound: -32001,
} as const;

/** The JSON-RPC error code of an A2A refusal of `err` (`parsed`: the body was JSON). */
function a2aErrorCode(err: ServiceError, parsed: boolean): number {
  if (err.code === 'a2a_task_not_found') return A2A_JSONRPC_ERROR_CODES.taskNotFound;
  if (err.code === 'a2a_method_not_mapped') return A2A_JSONRPC_ERROR_CODES.methodNotFound;
  if (err.code === 'a2a_push_url_refused') return A2A_JSONRPC_ERROR_CODES.invalidParams;
  if (err.status === 401) return A2A_JSONRPC_ERROR_CODES.unauthorized;
  if (err.status === 403) return A2A_JSONRPC_ERROR_CODES.forbidden;
  return jsonRpcErrorCode(err.status, parsed);
}

/** A refusal ready to send. */
export interface Refusal {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
}

/** The JSON-RPC error code for a refusal with HTTP `status` (`parsed`: the body was JSON). */
export function jsonRpcErrorCode(status: number, parsed: boolean): number {
  if (status === 401) return JSONRPC_ERROR_CODES.unauthorized;
  if (status === 403) return JSONRPC_ERROR_CODES.forbidden;
  if (status >= 500) return JSONRPC_ERROR_CODES.internalError;
  return status === 400 && !parsed ? JSONRPC_ERROR_CODES.parseError : JSONRPC_ERROR_CODES.invalidRequest;
}

/**
 * The refusal for `err`; with `rpc` (a POST to an MCP or A2A route) as a JSON-RPC error response
 * (A2A: with `method` in `error.data`, and A2A's codes).
 */
export function renderRefusal(err: ServiceError, rpc: McpFacts | undefined): Refusal {
  const headers = { ...err.headers, 'cache-control': 'no-store' };
  const body = err.toBody();
  if (rpc === undefined) return { status: err.status, headers, body };
  const reason = typeof err.extra?.reason === 'string' ? err.extra.reason : err.code;
  const data = {
    ...body.error, reason,
    ...(rpc.tool === undefined ? {} : { tool: rpc.tool }),
    ...(rpc.method === undefined ? {} : { method: rpc.method }),
  };
  const code = rpc.protocol === 'a2a' ? a2aErrorCode(err, rpc.parsed) : jsonRpcErrorCode(err.status, rpc.parsed);
  const error = { code, message: err.message, data };
  return { status: err.status, headers, body: { jsonrpc: '2.0', id: rpc.id, error } };
}

/** The metric `reason` of a refusal: the cause (503), the reject reason (403 proof_rejected), else the code. */
export function refusalReason(err: ServiceError): string {
  const extra = err.extra ?? {};
  if (err.code === 'verify_unavailable' && typeof extra.cause === 'string') return extra.cause;
  if (err.code === 'proof_rejected' && typeof extra.reason === 'string') return extra.reason;
  return err.code;
}

/**
 * Maps anything thrown while handling a request to a {@link ServiceError}: an upstream body idle
 * before its first byte is 502 `upstream_unavailable` (cause `upstream_timeout`); unexpected ones are logged, 500.
 */
export function toServiceError(error: FastifyError | Error, request: FastifyRequest): ServiceError {
  if (error instanceof ServiceError) return error;
  // The upstream's answer stalled before its first byte (mcp/stream.ts): the documented 502, not a 500.
  const code = (error as { code?: unknown }).code;
  if (code === 'UPSTREAM_IDLE' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new ServiceError('upstream_unavailable', undefined, { cause: 'upstream_timeout' });
  }
  const status = (error as FastifyError).statusCode ?? 500;
  if ((error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
    return new ServiceError('body_too_large');
  }
  if (status === 415) return new ServiceError('unsupported_media_type');
  if (status >= 400 && status < 500) return new ServiceError('invalid_request');
  request.log.error({ err: error }, 'gateway: unexpected error');
  return new ServiceError('internal_error');
}
