/**
 * agent-authz gateway plugin: a Fastify plugin (built on @fastify/http-proxy)
 * that lets a request reach the upstream only after an explicit, verified
 * `allow` from the sidecar (spec 4.15). See docs/gateway.md.
 *
 * Per request, in an encapsulated context around the proxy routes:
 * 1. onRequest: normalize the path (400 `ambiguous_path`; 400
 *    `invalid_request` over `MAX_PATH_LENGTH`), look the route up (400
 *    `ambiguous_path` when the path without a trailing slash or ignoring case
 *    is routed differently, 403 `route_not_mapped`), read the proof header
 *    (403 `duplicate_proof_header`, 401 `proof_required` with a challenge, 403
 *    `proof_rejected` for a bundle that fails the strict structural parse,
 *    without calling verify); public routes skip the proof.
 * 2. body: kept as the raw Buffer (413 `body_too_large` over the limit).
 * 3. preHandler: derive the context, call verify, map the outcome.
 * 4. handler: forward exactly the normalized path + original query + raw body
 *    with rewritten headers, behind the fail-open tripwire; the response gets
 *    the gateway's `X-Request-Id`.
 */

import fp from 'fastify-plugin';
import httpProxy from '@fastify/http-proxy';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, errorBody } from '../src/errors.js';
import { resolveGatewayOptions } from './options.js';
import type { GatewayOptions, ResolvedGatewayOptions } from './options.js';
import { normalizeRequestTarget } from '../src/path.js';
import type { RequestTarget } from '../src/path.js';
import { SUPPORTED_METHODS } from './routes.js';
import type { RouteMatch } from './routes.js';
import { decodeProofJson, readProofHeader } from './proof.js';
import { deriveAmountCurrency, deriveClientIp, deriveTenant } from './context.js';
import { sha256Hex } from '../src/crypto/encoding.js';
import type { VerifyContext } from '../src/protocol.js';
import { SidecarClient } from './verify-client.js';
import { mapVerifyResult, verifyResultLabel } from './outcome.js';
import { countRequest, guardForward } from './metrics.js';
import { upstreamRequestHeaders, upstreamResponseHeaders } from './headers.js';
import type { ForwardDecision } from './headers.js';

export * from './options.js';
export { createGatewayMetrics, METRIC_PREFIX, VERIFY_BUCKETS, UPSTREAM_BUCKETS } from './metrics.js';
export { normalizeExposition } from '../src/prometheus.js';
export type { GatewayMetrics } from './metrics.js';
export { SUPPORTED_METHODS, compileRoutes, RouteTable } from './routes.js';
export type { RouteEntry, RouteMatch, RouteResolution } from './routes.js';
export { normalizePath, normalizeRequestTarget, MAX_PATH_LENGTH } from '../src/path.js';
export { MAX_PROOF_HEADER_LENGTH } from './proof.js';
export { PROOF_HEADER } from '../src/protocol.js';
export { DECISION_HEADERS } from './headers.js';
export { gatewayFrameworkErrors, gatewayClientErrorHandler } from './framework-errors.js';

interface RequestState {
  target?: RequestTarget;
  route?: RouteMatch;
  /** JSON text of the bundle that passed the strict pre-check. */
  bundleJson?: string;
  clientIp?: string | undefined;
  trustedPeer?: boolean;
  decision?: ForwardDecision;
  outcome?: [outcome: string, reason: string];
  forwardStart?: number;
}

const EMPTY = Buffer.alloc(0);

/** The metric `reason` of a refusal: the cause (503), the reject reason (403 proof_rejected), else the code. */
function refusalReason(err: ServiceError): string {
  const extra = err.extra ?? {};
  if (err.code === 'verify_unavailable' && typeof extra.cause === 'string') return extra.cause;
  if (err.code === 'proof_rejected' && typeof extra.reason === 'string') return extra.reason;
  return err.code;
}

function toServiceError(error: FastifyError | Error, request: FastifyRequest): ServiceError {
  if (error instanceof ServiceError) return error;
  const status = (error as FastifyError).statusCode ?? 500;
  if ((error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) return new ServiceError('body_too_large');
  if (status === 415) return new ServiceError('unsupported_media_type');
  if (status >= 400 && status < 500) return new ServiceError('invalid_request');
  request.log.error({ err: error }, 'gateway: unexpected error');
  return new ServiceError('internal_error');
}

async function gatewayPlugin(fastify: FastifyInstance, rawOptions: GatewayOptions): Promise<void> {
  const opts: ResolvedGatewayOptions = resolveGatewayOptions(rawOptions);
  const { metrics, routes } = opts;
  const sidecar = new SidecarClient({
    url: opts.sidecarUrl,
    apiKey: opts.apiKey,
    verifyTimeoutMs: opts.verifyTimeoutMs,
    challengeTimeoutMs: opts.challengeTimeoutMs,
    connections: opts.sidecarConnections,
  });
  fastify.addHook('onClose', async () => sidecar.close());
  const states = new WeakMap<FastifyRequest, RequestState>();
  const stateOf = (request: FastifyRequest): RequestState => {
    let state = states.get(request);
    if (state === undefined) states.set(request, (state = {}));
    return state;
  };

  async function onRequest(request: FastifyRequest): Promise<void> {
    const state = stateOf(request);
    const target = normalizeRequestTarget(request.raw.url ?? '');
    state.target = target;
    const resolution = routes.resolve(request.method, target.path);
    if (resolution.kind === 'ambiguous') {
      throw new ServiceError('ambiguous_path', resolution.spelling === 'trailing_slash'
        ? 'The request path ends with "/" and the path without it is routed differently.'
        : 'The request path is routed differently when letter case is ignored.');
    }
    if (resolution.kind === 'none') throw new ServiceError('route_not_mapped');
    const route = resolution.route;
    state.route = route;
    if (route.scope === undefined) return; // public route
    const header = readProofHeader(request.raw);
    if (header.kind === 'duplicate') throw new ServiceError('duplicate_proof_header');
    if (header.kind === 'missing') {
      const challenge = await sidecar.challenge(request.id);
      let www = `ServiceProof realm="agent-authz", scope="${route.scope}"`;
      if (challenge !== undefined) www += `, challenge="${challenge}"`;
      const extra = challenge === undefined ? { required_scope: route.scope } : { required_scope: route.scope, challenge };
      throw new ServiceError('proof_required', undefined, extra, { 'www-authenticate': www });
    }
    state.bundleJson = decodeProofJson(header.value).json;
  }

  async function preHandler(request: FastifyRequest): Promise<void> {
    const state = stateOf(request);
    const { route, target, bundleJson } = state;
    if (route === undefined || target === undefined) throw new ServiceError('internal_error');
    const peer = deriveClientIp(request.raw.socket.remoteAddress, request.headers['x-forwarded-for'], opts.trustedProxies);
    state.clientIp = peer.clientIp;
    state.trustedPeer = peer.trustedPeer;
    if (route.scope === undefined) {
      state.decision = { kind: 'public' };
      return;
    }
    if (bundleJson === undefined) throw new ServiceError('internal_error');
    const body = Buffer.isBuffer(request.body) ? request.body : EMPTY;
    const tenant = deriveTenant(opts.context.tenant, request.headers.host, request.headers, peer.trustedPeer);
    const money = deriveAmountCurrency(body, request.headers['content-type'], route.amountPointer, route.currencyPointer);
    const context: VerifyContext = {
      method: request.method,
      path: target.path,
      ...(peer.clientIp === undefined ? {} : { client_ip: peer.clientIp }),
      ...(tenant === undefined ? {} : { tenant }),
      ...money,
      body_sha256: sha256Hex(body),
    };
    const started = performance.now();
    const result = await sidecar.verify({ proofBundleJson: bundleJson, required_scope: route.scope, context }, request.id);
    const outcome = mapVerifyResult(result, route.scope);
    metrics.verifyDuration.observe({ result: verifyResultLabel(result, outcome) }, (performance.now() - started) / 1000);
    if (outcome.kind === 'refuse') throw outcome.error;
    state.decision = { kind: 'allow', scope: outcome.scope, agentId: outcome.agentId, certId: outcome.certId };
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
      stateOf(request).outcome = [String(err.status), refusalReason(err)];
      void reply.code(err.status).headers({ ...err.headers, 'cache-control': 'no-store', 'x-request-id': request.id })
        .type('application/json; charset=utf-8').send(err.toBody());
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
      httpMethods: [...SUPPORTED_METHODS],
      disableRequestLogging: true,
      destroyAgent: true,
      replyOptions: { rewriteHeaders: (headers, request) => upstreamResponseHeaders(headers, request?.id) },
      undici: { connections: 128, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: opts.upstreamTimeoutMs, bodyTimeout: opts.upstreamTimeoutMs },
      handler: (request, reply, _dest, options) => {
        const state = stateOf(request);
        const { decision, target } = state;
        // Tripwire: only an explicit allow (or a public route) may be forwarded.
        if (!guardForward(metrics, decision?.kind) || decision === undefined || target === undefined) {
          throw new ServiceError('internal_error');
        }
        const body = Buffer.isBuffer(request.body) ? request.body : undefined;
        const contentType = request.headers['content-type'];
        state.outcome = decision.kind === 'allow' ? ['allowed', 'authorized'] : ['public', 'public'];
        state.forwardStart = performance.now();
        const facts = {
          requestId: request.id,
          clientIp: state.clientIp,
          trustedPeer: state.trustedPeer === true,
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
 * The gateway plugin. Register it on a Fastify server created with
 * `http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }` (proof headers are large)
 * and, ideally, `frameworkErrors: gatewayFrameworkErrors`. It owns the
 * catch-all routes of the context it is registered in.
 */
export const agentAuthzGateway = fp(gatewayPlugin, { fastify: '5.x', name: 'agent-authz-gateway' });
export default agentAuthzGateway;
