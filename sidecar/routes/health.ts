/**
 * Liveness, readiness and metrics endpoints of the sidecar (no auth, served
 * on the main port, logged only at warn and above; `/metrics` moves to its own
 * listener when `SIDECAR_METRICS_LISTEN` is set, see {@link buildMetricsServer}):
 *
 * - `GET /healthz`: 200 `{status:"ok"}` while the process serves requests;
 * - `GET /readyz`: 200 `{status:"ready",schema_version}` when the store
 *   answers and every migration is applied; otherwise 503
 *   `{status:"not_ready",reason}` with reason `store_unavailable`,
 *   `migrations_pending` or `shutting_down` (from the first moment of a
 *   graceful shutdown, so load balancers stop sending traffic);
 * - `GET /metrics`: Prometheus text format (docs/operations.md lists every
 *   metric family).
 *
 * Health answers carry `Cache-Control: no-store`.
 */
import { defineRoute, mount, op } from '../api/route.js';
import type { RouteSpec } from '../api/route.js';
import * as S from '../api/schemas.js';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { errorBody } from '../../src/errors.js';
import { normalizeExposition } from '../../src/prometheus.js';
import type { ServiceContext } from '../context.js';

/** Paths of the operational endpoints. */
export const HEALTH_PATHS = { liveness: '/healthz', readiness: '/readyz', metrics: '/metrics' } as const;

/** The health routes, each defined once (api/route.ts); `GET /metrics` is not in the document. */
export const HEALTH_ROUTES = {
  getLiveness: defineRoute({
    method: 'GET', url: HEALTH_PATHS.liveness, auth: 'none',
    schema: { tags: ['operations'], summary: 'Liveness: the process serves requests.' },
    operation: op('getLiveness', 'Liveness', 'Answers 200 while the process serves requests.', S.Liveness),
  }),
  getReadiness: defineRoute({
    method: 'GET', url: HEALTH_PATHS.readiness, auth: 'none',
    schema: { tags: ['operations'], summary: 'Readiness: the store answers and every migration is applied.' },
    operation: {
      ...op('getReadiness', 'Readiness',
        'Answers 200 when the store answers and every migration is applied; 503 `{status:"not_ready",reason}` '
        + 'otherwise (store_unavailable, migrations_pending, shutting_down).', S.Readiness),
      responses: { 503: S.NotReady },
    },
  }),
} as const satisfies Record<string, RouteSpec>;

/** Registers the health and metrics routes. */
export async function registerHealthRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  let shuttingDown = false;
  app.addHook('preClose', async () => { shuttingDown = true; });

  mount(app, HEALTH_ROUTES.getLiveness, async (_request, reply) => {
    void reply.header('cache-control', 'no-store');
    return { status: 'ok' };
  }, { logLevel: 'warn' });

  mount(app, HEALTH_ROUTES.getReadiness, async (request, reply) => {
    void reply.header('cache-control', 'no-store');
    if (shuttingDown) return reply.code(503).send({ status: 'not_ready', reason: 'shutting_down' });
    try {
      const p = await ctx.store.ping();
      if (!p.ok) return reply.code(503).send(
        { status: 'not_ready', reason: 'migrations_pending', schema_version: p.schemaVersion,
          expected_version: p.expectedVersion });
      return { status: 'ready', schema_version: p.schemaVersion };
    } catch (err) {
      request.log.warn({ err: { message: (err as Error).message } }, 'readiness: the store does not answer');
      return reply.code(503).send({ status: 'not_ready', reason: 'store_unavailable' });
    }
  }, { logLevel: 'warn' });

  if (ctx.config.metricsListen === null) registerMetricsRoute(app, ctx);
}

function registerMetricsRoute(app: FastifyInstance, ctx: ServiceContext): void {
  app.get(HEALTH_PATHS.metrics, {
    schema: { tags: ['operations'], hide: true },
    config: { auth: 'none' }, logLevel: 'warn',
  }, async (_request, reply) => {
    const body = normalizeExposition(await ctx.metrics.registry.metrics());
    return reply.type(ctx.metrics.registry.contentType).header('cache-control', 'no-store').send(body);
  });
}

/**
 * The separate metrics listener (`SIDECAR_METRICS_LISTEN`): `GET /metrics` only, anything else
 * 404 in the API's error shape. Not listening yet: main.ts listens, and closing the main server
 * closes it after the main server's own connections are done (scrapes work during a graceful
 * shutdown).
 */
export async function buildMetricsServer(ctx: ServiceContext): Promise<FastifyInstance> {
  const m = Fastify({ logger: false });
  m.setNotFoundHandler((_request, reply) => { void reply.code(404).header('cache-control', 'no-store').send(errorBody(
    'not_found')); });
  registerMetricsRoute(m, ctx);
  await m.ready();
  return m;
}
