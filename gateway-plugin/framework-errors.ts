/**
 * Server-level error handlers for a Fastify server hosting the gateway.
 *
 * Some requests never reach the plugin's hooks: Fastify's router refuses a
 * URL it cannot decode (`FST_ERR_BAD_URL`, for example `/a%zz`), and Node's
 * HTTP parser refuses malformed requests (raw control characters, non-ASCII
 * in the target, oversized headers). These handlers give those refusals the
 * service's `{error:{code,message,status}}` body. They never reach the
 * upstream either way; the standalone server installs both.
 */

import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ERRORS, errorBody } from '../src/errors.js';
import type { ErrorCode } from '../src/errors.js';
import { countRequest } from './metrics.js';
import type { GatewayMetrics } from './metrics.js';

/**
 * Creates a `frameworkErrors` handler: an undecodable URL is 400
 * `ambiguous_path`, other framework errors 400 `invalid_request`. With
 * `metrics`, the refusal is counted in `agent_authz_gateway_requests_total`.
 *
 * @example
 * ```ts
 * const metrics = createGatewayMetrics();
 * const app = Fastify({ frameworkErrors: gatewayFrameworkErrors(metrics), clientErrorHandler: gatewayClientErrorHandler });
 * ```
 */
export function gatewayFrameworkErrors(metrics?: GatewayMetrics) {
  return function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    const code: ErrorCode = error.code === 'FST_ERR_BAD_URL' ? 'ambiguous_path' : 'invalid_request';
    if (metrics !== undefined) countRequest(metrics, String(ERRORS[code].status), code);
    void reply.code(ERRORS[code].status).header('cache-control', 'no-store').header('x-request-id', request.id)
      .type('application/json; charset=utf-8').send(errorBody(code));
  };
}

/**
 * A `clientErrorHandler` for requests Node's HTTP parser refuses: answers 400
 * `invalid_request` in the service's error shape and closes the connection.
 *
 * @example
 * ```ts
 * const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }, clientErrorHandler: gatewayClientErrorHandler });
 * ```
 */
export function gatewayClientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT' && socket.writable) {
    const message = err.code === 'HPE_HEADER_OVERFLOW' ? 'The request headers are too large.' : undefined;
    const body = JSON.stringify(errorBody('invalid_request', message));
    socket.write(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}
