/**
 * Liveness, readiness and metrics endpoints of the sidecar:
 * `GET /healthz` (the process serves), `GET /readyz` (the store answers and
 * every migration is applied) and `GET /metrics` (Prometheus text format).
 */
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../context.ts';

/** Registers the health and metrics routes. */
export async function registerHealthRoutes(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  app.get('/healthz', { schema: { tags: ['operations'] }, config: { auth: 'none' }, logLevel: 'warn' }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { tags: ['operations'] }, config: { auth: 'none' }, logLevel: 'warn' }, async (_request, reply) => {
    try {
      const p = await ctx.store.ping();
      if (!p.ok) return reply.code(503).send({ status: 'not_ready', reason: 'migrations_pending', schema_version: p.schemaVersion, expected_version: p.expectedVersion });
      return { status: 'ready', schema_version: p.schemaVersion };
    } catch {
      return reply.code(503).send({ status: 'not_ready', reason: 'store_unavailable' });
    }
  });

  app.get('/metrics', { schema: { tags: ['operations'], hide: true }, config: { auth: 'none' }, logLevel: 'warn' }, async (_request, reply) => {
    const body = await ctx.metrics.registry.metrics();
    return reply.type(ctx.metrics.registry.contentType).send(body);
  });
}
