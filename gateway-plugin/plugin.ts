/**
 * The gateway plugin: a Fastify reverse proxy (built on @fastify/http-proxy)
 * that lets a request reach the upstream only after an explicit, verified
 * `allow` from the sidecar (spec 4.15). See docs/gateway.md.
 *
 * Per request, in an encapsulated context around the proxy routes:
 * 1. onRequest: {@link DecisionPipeline.admit} (path, route, proof header of
 *    plain protected routes; see pipeline.ts).
 * 2. body: kept as the raw Buffer (413 `body_too_large` over the limit: the
 *    route's MCP limit or `bodyLimit`; mcp/body.ts).
 * 3. preHandler: {@link DecisionPipeline.verdict} (context, verify, outcome;
 *    MCP messages).
 * 4. handler (forward.ts): forward exactly the normalized path + original query + raw body
 *    with rewritten headers, behind the fail-open tripwire; the response gets
 *    the gateway's `X-Request-Id`, and its body is forwarded chunk by chunk
 *    with an idle limit (SSE headers flushed at once; mcp/stream.ts). MCP
 *    session ids are swapped for session tokens bound to the agent both ways
 *    (mcp/session.ts, mcp/proxy.ts). The answer to an allowed A2A message is
 *    read as it passes for the tasks it names, recorded as the agent's
 *    (a2a/tasks.ts). A shadow-mode route's would-be refusal is
 *    forwarded too, logged, counted and marked for the upstream (shadow.ts).
 * Refusals are rendered by refusal.ts (JSON-RPC errors on MCP routes). Each
 * request's state is a decorator of the proxy's context (forward.ts).
 */

import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { ServiceError } from '../src/errors.js';
import { resolveGatewayOptions } from './options.js';
import type { GatewayOptions, ResolvedGatewayOptions } from './options.js';
import { DecisionPipeline } from './pipeline.js';
import type { PipelineRequest } from './pipeline.js';
import { SidecarClient } from './verify-client.js';
import { refusalReason, renderRefusal, toServiceError } from './refusal.js';
import { countAnswer } from './metrics.js';
import { upstreamResponseHeaders } from './headers.js';
import { installServerAnswers } from './framework-errors.js';
import { McpAnswerTooLarge, readLimitedBody } from './mcp/body.js';
import { SESSION_PROOF_HEADER } from './mcp/session.js';
import { answerOverflow, answerServer, sessionsByRoute } from './mcp/proxy.js';
import { toolsListFilter } from './mcp/tools-filter.js';
import { taskOwnersByRoute } from './a2a/answer.js';
import { STATE, forwarding, stateOf } from './forward.js';

const EMPTY = Buffer.alloc(0);

/** The pipeline's view of a request the proxy received. */
function requestFacts(request: FastifyRequest): PipelineRequest {
  return {
    id: request.id,
    method: request.method,
    rawUrl: request.raw.url ?? '',
    rawHeaders: request.raw.rawHeaders,
    headers: request.headers,
    host: request.headers.host,
    peerAddress: request.raw.socket.remoteAddress,
  };
}

async function gatewayPlugin(fastify: FastifyInstance, rawOptions: GatewayOptions): Promise<void> {
  const opts: ResolvedGatewayOptions = resolveGatewayOptions(rawOptions);
  const { metrics } = opts;
  const sidecar = new SidecarClient({
    url: opts.sidecarUrl, apiKey: opts.apiKey, verifyTimeoutMs: opts.verifyTimeoutMs, decisionApi: opts.decisionApi,
    challengeTimeoutMs: opts.challengeTimeoutMs, connections: opts.sidecarConnections,
  });
  fastify.addHook('onClose', async () => sidecar.close());
  installServerAnswers(fastify.server, metrics);
  const sessionSecret = opts.mcpSessionSecret ?? randomBytes(32);
  if (opts.mcpSessionSecret === undefined && rawOptions.routes.some((r) => r.mcp !== undefined)) {
    fastify.log.warn('gateway: no MCP session secret configured (mcpSessionSecret / mcp_session_secret_env): '
      + 'a random one is used, '
      + 'so MCP sessions end on restart and do not work across replicas (docs/mcp.md#sessions)');
  }
  const sessionsFor = sessionsByRoute(sessionSecret);
  const tasksFor = taskOwnersByRoute();
  const pipeline = new DecisionPipeline(opts, sidecar, sessionsFor, tasksFor,
    { upstreamTimeoutMs: opts.upstreamTimeoutMs });
  async function onRequest(request: FastifyRequest): Promise<void> {
    const state = stateOf(request);
    state.facts = requestFacts(request);
    state.admission = await pipeline.admit(state.facts);
  }

  async function preHandler(request: FastifyRequest): Promise<void> {
    const state = stateOf(request);
    const { facts, admission } = state;
    if (facts === undefined || admission === undefined) throw new ServiceError('internal_error');
    const body = Buffer.isBuffer(request.body) ? request.body : EMPTY;
    state.decision = await pipeline.verdict(facts, admission, body);
    state.toolsFilter = await toolsListFilter(sidecar, admission, state.decision, request.id);
  }

  /**
   * Reads a body with its route's limit; an MCP answer over it may still be read to answer the server
   * (mcp/body.ts).
   */
  function parseBody(
    request: FastifyRequest, payload: Readable, done: (err: Error | null, body?: Buffer) => void,
  ): void {
    const admission = stateOf(request).admission;
    const limit = admission?.route.mcp?.bodyLimit ?? admission?.route.a2a?.bodyLimit ?? opts.bodyLimit;
    const overflow = answerOverflow(admission, request.headers[SESSION_PROOF_HEADER]);
    readLimitedBody(payload, request.headers['content-length'], limit, overflow, done);
  }

  const handler = forwarding(opts, sidecar, tasksFor);

  await fastify.register(async (scope) => {
    scope.decorateRequest(STATE, null);
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (request, payload, done) =>
      parseBody(request, payload as unknown as Readable, done));
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      const err = toServiceError(error, request);
      const state = stateOf(request);
      state.outcome = [String(err.status), refusalReason(err)];
      const refusal = renderRefusal(err, state.admission?.mcp);
      void reply.code(refusal.status).headers({ ...refusal.headers, 'x-request-id': request.id })
        .type('application/json; charset=utf-8').send(refusal.body);
      // An MCP answer over the limit: the server gets an error for its request, so nothing waits for it
      // (mcp/answer.ts).
      if (err instanceof McpAnswerTooLarge && state.admission !== undefined) {
        answerServer(opts.upstream, request, state.admission, err);
      }
    });
    scope.addHook('onRequest', onRequest);
    scope.addHook('preHandler', preHandler);
    scope.addHook('onResponse', (request, reply, done) => {
      const state = stateOf(request);
      if (state.outcome !== undefined) countAnswer(metrics, state.outcome, reply.statusCode, state.forwardStart);
      done();
    });
    await scope.register(httpProxy, {
      upstream: opts.upstream,
      proxyPayloads: false,
      internalRewriteLocationHeader: false,
      // Every method the server knows (TRACE, QUERY, ... too) reaches the pipeline, which refuses the unmapped ones.
      httpMethods: fastify.supportedMethods,
      disableRequestLogging: true,
      destroyAgent: true,
      replyOptions: { rewriteHeaders: (headers, request) => upstreamResponseHeaders(headers, request?.id) },
      // The body's idle limit is the gateway's own (forwardBody: upstream_timeout_ms, or an MCP route's
      // stream idle limit for SSE).
      undici: {
        connections: 128, pipelining: 1, keepAliveTimeout: 30_000,
        headersTimeout: opts.upstreamTimeoutMs, bodyTimeout: 0,
      },
      handler,
    });
  });
}

/**
 * The gateway plugin: a reverse proxy that forwards a request to `upstream`
 * only after the sidecar's verify answered `allow` for the route's scope.
 * Register it on a Fastify server created with
 * `http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }` (proof headers are
 * large) and, ideally, `frameworkErrors: gatewayFrameworkErrors(metrics)` and
 * `clientErrorHandler: gatewayClientErrors(metrics)`. It owns the catch-all
 * routes (every method the server knows) of the context it is registered in,
 * and answers an unsupported `Expect` header with 417 in the error shape. Options are
 * validated at registration (a path-named `TypeError` on misuse).
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import {
 *   agentAuthzGateway, createGatewayMetrics, GATEWAY_MAX_HEADER_SIZE, gatewayClientErrors, gatewayFrameworkErrors,
 * } from 'agent-authz/gateway';
 *
 * const metrics = createGatewayMetrics();
 * const app = Fastify({
 *   http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE },
 *   frameworkErrors: gatewayFrameworkErrors(metrics),
 *   clientErrorHandler: gatewayClientErrors(metrics),
 * });
 * await app.register(agentAuthzGateway, {
 *   upstream: 'http://127.0.0.1:8080',
 *   sidecarUrl: 'http://127.0.0.1:8700',
 *   apiKey: process.env.GATEWAY_API_KEY!,
 *   metrics,
 *   routes: [
 *     { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
 *     {
 *       method: 'POST', path: '/v1/payments', scope: 'payments:send',
 *       context: { amount: '/amount', currency: '/currency' },
 *     },
 *   ],
 * });
 * await app.listen({ port: 8443 });
 * ```
 */
export const agentAuthzGateway = fp(gatewayPlugin, { fastify: '5.x', name: 'agent-authz-gateway' });
