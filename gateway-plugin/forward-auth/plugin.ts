/**
 * The forward-auth endpoint: decisions for a proxy you already run (Envoy
 * ext_authz HTTP service, NGINX auth_request, Traefik ForwardAuth, Caddy
 * forward_auth) instead of proxying through the gateway. docs/forward-auth.md.
 *
 * Each check request runs the gateway's own pipeline (pipeline.ts: route
 * table, proof extraction, context derivation, outcome table) on the
 * original request the proxy describes (flavors.ts), and is answered:
 * - allow (or a public route / MCP method): 200 with the decision headers
 *   (`X-Service-Decision`, `X-Service-Scope`, `X-Service-Agent-Id`,
 *   `X-Service-Cert-Id`, `X-Request-Id`) for the proxy to copy upstream;
 * - anything else: the same status and body the proxy mode sends (refusal.ts),
 *   mapped for NGINX's auth_request (flavors.ts).
 * The answer passes the fail-open tripwire first, as a forwarded request does.
 */

import fp from 'fastify-plugin';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../src/errors.js';
import { DECISION_HEADERS } from '../headers.js';
import { countRequest, countShadow, guardForward } from '../metrics.js';
import { logShadow } from '../shadow.js';
import { installServerAnswers } from '../framework-errors.js';
import { DecisionPipeline } from '../pipeline.js';
import type { Admission, GatewayVerdict, PipelineRequest } from '../pipeline.js';
import { refusalReason, renderRefusal, toServiceError } from '../refusal.js';
import { SidecarClient } from '../verify-client.js';
import { FLAVORS, forwardedBody, originalRequest, refusalForFlavor } from './flavors.js';
import type { Flavor } from './flavors.js';
import { resolveForwardAuthOptions } from './options.js';
import type { ForwardAuthOptions } from './options.js';

/** Reads a body Fastify left unparsed (GET/HEAD check requests with a body, Traefik `forwardBody`), up to `limit` bytes. */
async function unparsedBody(request: FastifyRequest, limit: number): Promise<Buffer | undefined> {
  const length = request.headers['content-length'];
  if ((length === undefined || length === '0') && request.headers['transfer-encoding'] === undefined) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new ServiceError('body_too_large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function decisionHeaders(decision: GatewayVerdict, requestId: string): Record<string, string> {
  const headers: Record<string, string> = { [DECISION_HEADERS.decision]: decision.kind, [DECISION_HEADERS.requestId]: requestId, 'cache-control': 'no-store' };
  if (decision.kind === 'allow') {
    headers[DECISION_HEADERS.scope] = decision.scope;
    if (decision.agentId !== undefined) headers[DECISION_HEADERS.agentId] = decision.agentId;
    if (decision.certId !== undefined) headers[DECISION_HEADERS.certId] = decision.certId;
  }
  if (decision.kind === 'shadow') headers[DECISION_HEADERS.shadowRefusal] = decision.shadowRefusal;
  return headers;
}

async function forwardAuthPlugin(fastify: FastifyInstance, rawOptions: ForwardAuthOptions): Promise<void> {
  const opts = resolveForwardAuthOptions(rawOptions);
  const { metrics } = opts;
  const sidecar = new SidecarClient({
    url: opts.sidecarUrl,
    apiKey: opts.apiKey,
    verifyTimeoutMs: opts.verifyTimeoutMs,
    decisionApi: opts.decisionApi,
    challengeTimeoutMs: opts.challengeTimeoutMs,
    connections: opts.sidecarConnections,
  });
  fastify.addHook('onClose', async () => sidecar.close());
  installServerAnswers(fastify.server, metrics);
  const pipeline = new DecisionPipeline(opts, sidecar);
  const admissions = new WeakMap<FastifyRequest, Admission>();

  function refuse(flavor: Flavor, error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const err = toServiceError(error, request);
    // A connection the HTTP parser already closed got its refusal from the client-error answer (counted there).
    if (request.raw.socket?.destroyed !== true) countRequest(metrics, String(err.status), refusalReason(err));
    const refusal = renderRefusal(err, admissions.get(request)?.mcp);
    const text = JSON.stringify(refusal.body);
    const mapped = refusalForFlavor(flavor, refusal.status, text);
    return reply.code(mapped.status).headers({ ...refusal.headers, ...mapped.headers, 'x-request-id': request.id })
      .type('application/json; charset=utf-8').send(text);
  }

  async function respond(flavor: Flavor, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    try {
      const rawUrl = request.raw.url ?? '';
      const envoyBase = `${opts.prefix}/envoy`;
      if (flavor === 'envoy' && !rawUrl.startsWith(`${envoyBase}/`)) throw new ServiceError('invalid_request',
        `The check request path must start with ${envoyBase}/.`);
      const original = originalRequest(flavor, request, rawUrl.slice(envoyBase.length));
      const facts: PipelineRequest = {
        id: request.id,
        method: original.method,
        rawUrl: original.rawUrl,
        rawHeaders: request.raw.rawHeaders,
        headers: request.headers,
        host: original.host,
        peerAddress: request.raw.socket.remoteAddress,
      };
      const admission = await pipeline.admit(facts);
      admissions.set(request, admission);
      const received = Buffer.isBuffer(request.body) ? request.body : await unparsedBody(request, opts.bodyLimit);
      const decision = await pipeline.verdict(facts, admission, forwardedBody(original, received));
      // Tripwire: only an explicit allow (or a public route) may be answered 200.
      if (!guardForward(metrics, decision.kind)) throw new ServiceError('internal_error');
      if (decision.kind === 'shadow') {
        countShadow(metrics, decision.route, decision.reason);
        logShadow(request.log, decision);
        countRequest(metrics, 'shadow', decision.reason);
      } else countRequest(metrics, decision.kind === 'allow' ? 'allowed' : 'public', decision.kind === 'allow' ? 'authorized' : 'public');
      return reply.code(200).headers(decisionHeaders(decision, request.id)).send();
    } catch (err) {
      return refuse(flavor, err as Error, request, reply);
    }
  }

  await fastify.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: opts.bodyLimit }, (_req, body, done) => done(null, body));
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      const flavor = (request.routeOptions.config as { flavor?: Flavor }).flavor ?? 'caddy';
      void refuse(flavor, error, request, reply);
    });
    for (const flavor of FLAVORS) {
      scope.route({
        method: fastify.supportedMethods,
        url: flavor === 'envoy' ? `${opts.prefix}/envoy/*` : `${opts.prefix}/${flavor}`,
        exposeHeadRoute: false,
        config: { flavor },
        handler: (request, reply) => respond(flavor, request, reply),
      });
    }
  });
}

/**
 * The forward-auth endpoint: register it on a Fastify server that your proxy
 * (Envoy ext_authz, NGINX auth_request, Traefik ForwardAuth, Caddy
 * forward_auth) calls for each request. It answers 200 with the decision
 * headers only on an explicit allow, and every refusal with the same status
 * and body the gateway proxy sends. docs/forward-auth.md has a working config
 * for each proxy.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { agentAuthzForwardAuth, GATEWAY_MAX_HEADER_SIZE } from 'agent-authz/gateway';
 *
 * const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE } });
 * await app.register(agentAuthzForwardAuth, {
 *   sidecarUrl: 'http://127.0.0.1:8700',
 *   apiKey: process.env.GATEWAY_API_KEY!,
 *   trustedProxies: ['127.0.0.1'],
 *   routes: [{ method: 'GET', path: '/v1/items/:id', scope: 'data:read' }],
 * });
 * await app.listen({ host: '127.0.0.1', port: 8090 });   // nginx: proxy_pass http://127.0.0.1:8090/forward-auth/nginx;
 * ```
 */
export const agentAuthzForwardAuth = fp(forwardAuthPlugin, { fastify: '5.x', name: 'agent-authz-forward-auth' });
