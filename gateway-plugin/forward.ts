/**
 * The reverse proxy's forwarding step (plugin.ts, step 4): each request's
 * state, the @fastify/http-proxy handler behind the fail-open tripwire, the
 * upstream request's headers (headers.ts, mcp/proxy.ts), and the upstream's
 * answer: session ids (mcp/proxy.ts), the idempotency ledger's recording
 * (ledger.ts), the tools/list filter (mcp/tools-filter.ts), the A2A task
 * record (a2a/answer.ts), and the body forwarded chunk by chunk with its idle
 * limit (mcp/stream.ts); or 502 `upstream_unavailable` when the upstream failed.
 *
 * Everything here is made once per gateway: the `reply.from` options are one
 * object for every request without a body, and the per-request facts are read
 * from the request's state, so no closure is made per request.
 */

import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { pipeline as pipeStreams } from 'node:stream';
import type { Readable } from 'node:stream';
import { ServiceError, errorBody } from '../src/errors.js';
import type { ResolvedGatewayOptions } from './options.js';
import type { Admission, GatewayVerdict, PipelineRequest } from './verdict.js';
import type { SidecarClient } from './verify-client.js';
import { countShadow, guardForward } from './metrics.js';
import { logShadow } from './shadow.js';
import { upstreamRequestHeaders } from './headers.js';
import { forwardBody, isEventStream } from './mcp/stream.js';
import { protocolRequestHeaders, rewriteSessionHeaders, stripSessionHeaders } from './mcp/proxy.js';
import { filterToolsAnswer } from './mcp/tools-filter.js';
import type { ToolsFilter } from './mcp/tools-filter.js';
import { a2aAnswer } from './a2a/answer.js';
import type { TaskOwners } from './a2a/tasks.js';
import type { RouteMatch } from './routes.js';
import { notDelivered, recordingBody, releaseClaim, replayAnswer } from './ledger.js';

/** What the gateway knows of a request as it passes its steps. */
export interface RequestState {
  facts?: PipelineRequest;
  admission?: Admission;
  decision?: GatewayVerdict;
  outcome?: [outcome: string, reason: string];
  forwardStart?: number;
  /** The idempotency claim of a keyed request being forwarded (ledger.ts records or releases it). */
  claimId?: string;
  /** An allowed `tools/list` on a route that filters it: the tools the agent may call (mcp/tools-filter.ts). */
  toolsFilter?: ToolsFilter;
}

/** The request decorator that holds its {@link RequestState} (declared on the proxy's context, plugin.ts). */
export const STATE = Symbol('agent-authz-gateway-state');

/** The state of `request` (made on first use). */
export function stateOf(request: FastifyRequest): RequestState {
  const holder = request as unknown as Record<typeof STATE, RequestState | null>;
  return holder[STATE] ??= {};
}

/** The options of `reply.from` (@fastify/reply-from). */
type FromOptions = NonNullable<Parameters<FastifyReply['from']>[1]>;
/** The handler option of @fastify/http-proxy. */
type ProxyHandler = (request: FastifyRequest, reply: FastifyReply, dest: string, options: FromOptions) => unknown;

/** The log line of an upstream answer that sent nothing for its idle limit. */
function logIdle(request: FastifyRequest, idleMs: number, sse: boolean): void {
  request.log.info({ idle_ms: idleMs, sse }, 'gateway: upstream idle');
}

/** The forwarding step of one gateway (see the file header): the handler for @fastify/http-proxy. */
export function forwarding(
  opts: ResolvedGatewayOptions, sidecar: SidecarClient, tasksFor: (route: RouteMatch) => TaskOwners | undefined,
): ProxyHandler {
  const { metrics } = opts;
  const tenantHeader = opts.context.tenant?.kind === 'header' ? opts.context.tenant.header : undefined;

  function onUpstreamError(request: FastifyRequest, reply: FastifyReply, error: Error): void {
    const timeout = (error as FastifyError).statusCode === 504;
    const cause = timeout ? 'upstream_timeout' : 'upstream_error';
    const state = stateOf(request);
    state.outcome = ['502', 'upstream_unavailable'];
    // Not delivered (the connection failed): the key is free for the agent's retry. After anything
    // else (a timeout, a reset) the upstream may have acted; the claim holds the key until its lease ends.
    if (state.claimId !== undefined && notDelivered(error)) releaseClaim(sidecar, request, state.claimId);
    request.log.warn({ cause }, 'gateway: upstream failed');
    reply.code(502).header('cache-control', 'no-store').header('x-request-id', request.id)
      .send(errorBody('upstream_unavailable', undefined, { cause }));
  }

  /** The upstream answered: session ids, then the body, chunk by chunk with its idle limit. */
  function onUpstreamResponse(
    request: FastifyRequest, reply: FastifyReply, res: { statusCode: number; stream: Readable },
  ): void {
    const { admission, decision, claimId, toolsFilter } = stateOf(request);
    if (admission?.sessions !== undefined) {
      rewriteSessionHeaders(request.method, admission, decision, reply, res.statusCode);
    }
    else stripSessionHeaders(reply);
    const sse = isEventStream(reply.getHeader('content-type'));
    const route = admission?.route;
    const streamIdle = route?.mcp?.streamIdleMs ?? route?.a2a?.streamIdleMs;
    const idleMs = sse ? streamIdle ?? opts.upstreamTimeoutMs : opts.upstreamTimeoutMs;
    const onIdle = (): void => logIdle(request, idleMs, sse);
    const recorded = claimId === undefined ? res.stream : recordingBody(sidecar, request, reply, res, claimId);
    const filtered = toolsFilter !== undefined && res.statusCode === 200;
    if (filtered) reply.removeHeader('content-length');
    const body = filtered ? pipeStreams(recorded, filterToolsAnswer(toolsFilter, sse), () => undefined) : recorded;
    void reply.send(forwardBody(a2aAnswer(tasksFor, admission, decision, sse, body), reply.raw, sse, idleMs, onIdle));
  }

  /** The upstream request's headers (headers.ts), with the protocol's (mcp/proxy.ts). */
  function rewriteRequestHeaders(request: FastifyRequest, headers: Record<string, unknown>): Record<string, unknown> {
    const { decision, admission, toolsFilter } = stateOf(request);
    if (decision === undefined) throw new ServiceError('internal_error');
    const out = upstreamRequestHeaders(headers as Parameters<typeof upstreamRequestHeaders>[0], decision, {
      requestId: request.id, clientIp: decision.clientIp, trustedPeer: decision.trustedPeer,
      host: request.headers.host, protocol: request.protocol, tenantHeader,
      hasBody: Buffer.isBuffer(request.body), hadContentType: request.headers['content-type'] !== undefined,
    });
    return protocolRequestHeaders(out, admission, toolsFilter !== undefined);
  }

  /** The reply-from options of every forward (replyOptions of @fastify/http-proxy and ours), made once. */
  let forwardOptions: FromOptions | undefined;
  const fromOptions = (options: FromOptions): FromOptions => forwardOptions ??= {
    ...options, retryDelay: () => null,
    // Exactly the normalized path (reply.from's source) and the original query.
    queryString: (_search, _url, request) => stateOf(request as FastifyRequest).admission?.target.query ?? '',
    rewriteRequestHeaders: (request, headers) =>
      rewriteRequestHeaders(request as FastifyRequest, headers) as typeof headers,
    onResponse: (request, reply, res) =>
      onUpstreamResponse(request as FastifyRequest, reply as FastifyReply, res as never),
    onError: (reply, { error }) => onUpstreamError(reply.request as FastifyRequest, reply as FastifyReply, error),
  };

  return (request, reply, _dest, options) => {
    const state = stateOf(request);
    const { decision } = state;
    const target = state.admission?.target;
    // Tripwire: only an explicit allow (or a public route) may be forwarded.
    if (!guardForward(metrics, decision?.kind) || decision === undefined || target === undefined) {
      throw new ServiceError('internal_error');
    }
    if (decision.kind === 'allow' && decision.idempotency?.status === 'replay') {
      state.outcome = ['replayed', 'authorized'];
      return replayAnswer(reply, decision.idempotency.response, request.id);
    }
    if (decision.kind === 'allow' && decision.idempotency?.status === 'claimed') {
      state.claimId = decision.idempotency.claimId;
    }
    if (decision.kind === 'shadow') {
      countShadow(metrics, decision.route, decision.reason);
      logShadow(request.log, decision);
      state.outcome = ['shadow', decision.reason];
    } else state.outcome = decision.kind === 'allow' ? ['allowed', 'authorized'] : ['public', 'public'];
    state.forwardStart = performance.now();
    const body = Buffer.isBuffer(request.body) ? request.body : undefined;
    const base = fromOptions(options);
    const contentType = request.headers['content-type'] ?? 'application/octet-stream';
    return reply.from(target.path, body === undefined ? base : { ...base, body, contentType });
  };
}
