/**
 * The gateway plugin: a Fastify reverse proxy (built on @fastify/http-proxy)
 * that lets a request reach the upstream only after an explicit, verified
 * `allow` from the sidecar (spec 4.15). See docs/gateway.md.
 *
 * Per request, in an encapsulated context around the proxy routes:
 * 1. onRequest: {@link DecisionPipeline.admit} (path, route, proof header of
 *    plain protected routes; see pipeline.ts).
 * 2. body: kept as the raw Buffer (413 `body_too_large` over the limit).
 * 3. preHandler: {@link DecisionPipeline.decide} (context, verify, outcome;
 *    MCP messages).
 * 4. handler: forward exactly the normalized path + original query + raw body
 *    with rewritten headers, behind the fail-open tripwire; the response gets
 *    the gateway's `X-Request-Id`. A shadow-mode route's would-be refusal is
 *    forwarded too, logged, counted and marked for the upstream (shadow.ts).
 * Refusals are rendered by refusal.ts (JSON-RPC errors on MCP routes).
 */

import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, errorBody } from '../src/errors.js';
import { resolveGatewayOptions } from './options.js';
import type { GatewayOptions, ResolvedGatewayOptions } from './options.js';
import { DecisionPipeline } from './pipeline.js';
import type { Admission, Decision, PipelineRequest } from './pipeline.js';
import { SidecarClient } from './verify-client.js';
import { refusalReason, renderRefusal, toServiceError } from './refusal.js';
import { countRequest, countShadow, guardForward } from './metrics.js';
import { logShadow } from './shadow.js';
import { upstreamRequestHeaders, upstreamResponseHeaders } from './headers.js';
import { installServerAnswers } from './framework-errors.js';

interface RequestState {
  facts?: PipelineRequest;
  admission?: Admission;
  decision?: Decision;
  outcome?: [outcome: string, reason: string];
  forwardStart?: number;
}

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
    url: opts.sidecarUrl,
    apiKey: opts.apiKey,
    verifyTimeoutMs: opts.verifyTimeoutMs,
    challengeTimeoutMs: opts.challengeTimeoutMs,
    connections: opts.sidecarConnections,
  });
  fastify.addHook('onClose', async () => sidecar.close());
  installServerAnswers(fastify.server, metrics);
  const pipeline = new DecisionPipeline(opts, sidecar);
  const states = new WeakMap<FastifyRequest, RequestState>();
  const stateOf = (request: FastifyRequest): RequestState => {
    let state = states.get(request);
    if (state === undefined) states.set(request, (state = {}));
    return state;
  };

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
    state.decision = await pipeline.decide(facts, admission, body);
  }

  function onUpstreamError(request: FastifyRequest, reply: FastifyReply, error: Error): void {
    const timeout = (error as FastifyError).statusCode === 504;
    const cause = timeout ? 'upstream_timeout' : 'upstream_error';
    stateOf(request).outcome = ['502', 'upstream_unavailable'];
    request.log.warn({ cause }, 'gateway: upstream failed');
    reply.code(502).header('cache-control', 'no-store').header('x-request-id', request.id).send(errorBody('upstream_unavailable', undefined, { cause }));
  }

  await fastify.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: opts.bodyLimit }, (_req, body, done) => done(null, body));
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      const err = toServiceError(error, request);
      const state = stateOf(request);
      state.outcome = [String(err.status), refusalReason(err)];
      const refusal = renderRefusal(err, state.admission?.mcp);
      void reply.code(refusal.status).headers({ ...refusal.headers, 'x-request-id': request.id })
        .type('application/json; charset=utf-8').send(refusal.body);
    });
    scope.addHook('onRequest', onRequest);
    scope.addHook('preHandler', preHandler);
    scope.addHook('onResponse', async (request, reply) => {
      const state = states.get(request);
      if (state?.outcome === undefined) return;
      countRequest(metrics, state.outcome[0], state.outcome[1]);
      if (state.forwardStart !== undefined) {
        const statusClass = `${Math.floor(reply.statusCode / 100)}xx`;
        metrics.upstreamDuration.observe({ status_class: statusClass }, (performance.now() - state.forwardStart) / 1000);
      }
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
      undici: { connections: 128, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: opts.upstreamTimeoutMs, bodyTimeout: opts.upstreamTimeoutMs },
      handler: (request, reply, _dest, options) => {
        const state = stateOf(request);
        const { decision } = state;
        const target = state.admission?.target;
        // Tripwire: only an explicit allow (or a public route) may be forwarded.
        if (!guardForward(metrics, decision?.kind) || decision === undefined || target === undefined) {
          throw new ServiceError('internal_error');
        }
        const body = Buffer.isBuffer(request.body) ? request.body : undefined;
        const contentType = request.headers['content-type'];
        if (decision.kind === 'shadow') {
          countShadow(metrics, decision.route, decision.reason);
          logShadow(request.log, decision);
          state.outcome = ['shadow', decision.reason];
        } else state.outcome = decision.kind === 'allow' ? ['allowed', 'authorized'] : ['public', 'public'];
        state.forwardStart = performance.now();
        const facts = {
          requestId: request.id,
          clientIp: decision.clientIp,
          trustedPeer: decision.trustedPeer,
          host: request.headers.host,
          protocol: request.protocol,
          tenantHeader: opts.context.tenant?.kind === 'header' ? opts.context.tenant.header : undefined,
          hasBody: body !== undefined,
          hadContentType: contentType !== undefined,
        };
        return reply.from(target.path, {
          ...options,
          ...(body === undefined ? {} : { body, contentType: contentType ?? 'application/octet-stream' }),
          queryString: () => target.query ?? '',
          timeout: opts.upstreamTimeoutMs,
          retryDelay: () => null,
          rewriteRequestHeaders: (_req, headers) => upstreamRequestHeaders({ ...headers }, decision, facts) as typeof headers,
          onError: (errReply, { error }) => onUpstreamError(request, errReply as FastifyReply, error),
        });
      },
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
 * import { agentAuthzGateway, createGatewayMetrics, GATEWAY_MAX_HEADER_SIZE, gatewayClientErrors, gatewayFrameworkErrors } from 'agent-authz/gateway';
 *
 * const metrics = createGatewayMetrics();
 * const app = Fastify({
 *   http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }, frameworkErrors: gatewayFrameworkErrors(metrics), clientErrorHandler: gatewayClientErrors(metrics),
 * });
 * await app.register(agentAuthzGateway, {
 *   upstream: 'http://127.0.0.1:8080',
 *   sidecarUrl: 'http://127.0.0.1:8700',
 *   apiKey: process.env.GATEWAY_API_KEY!,
 *   metrics,
 *   routes: [
 *     { method: 'GET', path: '/v1/items/:id', scope: 'data:read' },
 *     { method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } },
 *   ],
 * });
 * await app.listen({ port: 8443 });
 * ```
 */
export const agentAuthzGateway = fp(gatewayPlugin, { fastify: '5.x', name: 'agent-authz-gateway' });
