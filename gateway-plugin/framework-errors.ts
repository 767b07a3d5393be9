/**
 * Server-level answers of a Fastify server hosting the gateway, for requests
 * that never reach the plugin's hooks, built on the sidecar's shared module
 * (runtime/client-error.ts) so both services refuse them the same way:
 *
 * - Node's HTTP parser refuses malformed requests (a NUL or bare LF in a
 *   header, folded headers, conflicting Content-Length, a bad chunk size, an
 *   unknown method, non-ASCII in the target): 400 `invalid_request`; a header
 *   block or URL over `maxHeaderSize`: 431 `headers_too_large`;
 * - an `Expect` header other than `100-continue`: 417 `expectation_failed`,
 *   and `CONNECT` (which Node hands to no route; without an answer it just
 *   closes the connection): 403 `route_not_mapped` (the plugins install both
 *   themselves, see {@link installServerAnswers});
 * - Fastify's router refuses a URL it cannot decode (`/a%zz`): 400
 *   `ambiguous_path` (the gateway's path rule; the sidecar says
 *   `invalid_request`), or a path parameter over its length limit: 400
 *   `invalid_request`;
 * - a method Fastify's router does not know (`PROPFIND`, `LINK`, ...): 403
 *   `route_not_mapped` (`gatewayNotFound`; in forward-auth mode 404
 *   `route_not_found`).
 *
 * Every one is `{error:{code,message,status}}` with `Cache-Control: no-store`
 * and an `X-Request-Id`, and, given the gateway's metrics, is counted in
 * `agent_authz_gateway_requests_total`. None ever reaches the upstream.
 */

import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ERRORS, errorBody } from '../src/errors.js';
import type { ErrorCode } from '../src/errors.js';
import { answerClientError, answerConnect, answerExpectationFailed, frameworkErrorCode } from '../runtime/client-error.js';
import { installLingeringClose } from '../runtime/linger.js';
import { installUnusedConnectionClose } from '../runtime/unused.js';
import { countRequest } from './metrics.js';
import type { GatewayMetrics } from './metrics.js';

/** Counts a refusal with `code` when metrics are given. */
function counter(metrics: GatewayMetrics | undefined): (code: ErrorCode) => void {
  return (code) => {
    if (metrics !== undefined) countRequest(metrics, String(ERRORS[code].status), code);
  };
}

/** Sends the refusal `code` (message optional) with the gateway's refusal headers. */
function refuse(reply: FastifyReply, request: FastifyRequest, code: ErrorCode, message?: string): void {
  void reply.code(ERRORS[code].status).header('cache-control', 'no-store').header('x-request-id', request.id)
    .type('application/json; charset=utf-8').send(errorBody(code, message));
}

/**
 * Creates a `frameworkErrors` handler: an undecodable URL is 400
 * `ambiguous_path`, an over-long path parameter 400 `invalid_request`. With
 * `metrics`, the refusal is counted in `agent_authz_gateway_requests_total`.
 *
 * @example
 * ```ts
 * const metrics = createGatewayMetrics();
 * const app = Fastify({ frameworkErrors: gatewayFrameworkErrors(metrics), clientErrorHandler: gatewayClientErrors(metrics) });
 * ```
 */
export function gatewayFrameworkErrors(metrics?: GatewayMetrics) {
  const count = counter(metrics);
  return function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    const shared = frameworkErrorCode(error.code);
    const [code, message] = error.code === 'FST_ERR_BAD_URL' ? ['ambiguous_path' as const, undefined] : [shared.code, shared.message];
    count(code);
    refuse(reply, request, code, message);
  };
}

/**
 * Creates a `clientErrorHandler` for requests Node's HTTP parser refuses:
 * writes 400 `invalid_request` (431 `headers_too_large` for a header block or
 * URL over the size limit) in the service's error shape with
 * `Cache-Control: no-store` and an `X-Request-Id`, and closes the connection.
 * With `metrics`, the refusal is counted.
 *
 * @example
 * ```ts
 * const metrics = createGatewayMetrics();
 * const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }, clientErrorHandler: gatewayClientErrors(metrics) });
 * ```
 */
export function gatewayClientErrors(metrics?: GatewayMetrics): (err: NodeJS.ErrnoException, socket: Socket) => void {
  const count = counter(metrics);
  return (err, socket) => answerClientError(err, socket, count);
}

/**
 * Creates a not-found handler for the server hosting the gateway plugin: a
 * request no route takes (in practice a method Fastify's router does not
 * know, such as `PROPFIND`; every method it knows reaches the plugin) is 403
 * `route_not_mapped`, with the refusal headers, counted with `metrics`.
 *
 * @example
 * ```ts
 * app.setNotFoundHandler(gatewayNotFound(metrics));
 * ```
 */
export function gatewayNotFound(metrics?: GatewayMetrics): (request: FastifyRequest, reply: FastifyReply) => void {
  return notFoundAnswer('route_not_mapped', metrics);
}

/** A not-found handler answering `code` (`route_not_mapped`, or `route_not_found` for the forward-auth endpoint). */
export function notFoundAnswer(code: 'route_not_mapped' | 'route_not_found', metrics?: GatewayMetrics): (request: FastifyRequest, reply: FastifyReply) => void {
  const count = counter(metrics);
  return (request, reply) => {
    count(code);
    refuse(reply, request, code);
  };
}

/**
 * Makes `server` answer an unsupported `Expect` header with 417
 * `expectation_failed` in the error shape instead of Node's bare 417, and a
 * `CONNECT` request with 403 `route_not_mapped` instead of closing the
 * connection, both counted with `metrics`. Each only when nothing listens for
 * that event yet (an application's own handling, or a gateway plugin
 * registered before, wins). And closes a connection whose request body was
 * not read to its end (a 413, an early refusal) with a lingering close
 * (runtime/linger.ts), so the client still sending it reads the answer.
 * Closing the server also closes connections that never sent a byte
 * (runtime/unused.ts: an aborted SSE stream leaves one), instead of waiting for them.
 */
export function installServerAnswers(server: Server, metrics?: GatewayMetrics): void {
  const count = counter(metrics);
  installLingeringClose(server);
  installUnusedConnectionClose(server);
  if (server.listenerCount('checkExpectation') === 0) answerExpectationFailed(server, count);
  if (server.listenerCount('connect') === 0) answerConnect(server, 'route_not_mapped', 'CONNECT is not proxied.', count);
}
