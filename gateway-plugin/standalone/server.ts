/**
 * Builds the standalone gateway server from a config object, without
 * listening (tests use {@link buildGateway} directly; only main.ts listens).
 *
 * The main listener serves liveness (always 200 while up), readiness (200 only
 * while the sidecar's `GET /readyz` answers 200, else 503
 * `verify_unavailable` with cause `sidecar_not_ready`; 503 with cause
 * `shutting_down` from the start of a close), and everything else through the
 * gateway plugin, or (config `mode: forward_auth`) the forward-auth endpoints
 * (mode.ts). Why the gateway is not ready (sidecar unreachable, too slow, not
 * ready itself; a refused API key at startup) is logged by `sidecar-check.ts`,
 * whenever the answer changes. Metrics are served on a separate listener (default
 * 127.0.0.1:9464/metrics), closed together with the main one: `app.close()`
 * closes it after the main listener's connections are done.
 */

import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { errorBody } from '../../src/errors.js';
import { GATEWAY_MAX_HEADER_SIZE, DEFAULT_CHALLENGE_TIMEOUT_MS } from '../options.js';
import { createGatewayMetrics } from '../metrics.js';
import type { GatewayMetrics } from '../metrics.js';
import { gatewayClientErrors, gatewayFrameworkErrors, notFoundAnswer } from '../framework-errors.js';
import { resolveConfig } from './config.js';
import type { GatewayConfig } from './config.js';
import { collectGatewayDefaultMetrics } from '../metrics.js';
import { resolveMode } from './mode.js';
import { SidecarCheck } from './sidecar-check.js';
import type { StartupCheck } from './sidecar-check.js';

/** A built, not yet listening, standalone gateway. */
export interface GatewayServer {
  /** The gateway's Fastify server (use `app.inject()` or `listen()`). */
  readonly app: FastifyInstance;
  /** The metrics server, or `undefined` when metrics are disabled. */
  readonly metricsApp: FastifyInstance | undefined;
  /** The gateway's metrics. */
  readonly metrics: GatewayMetrics;
  /** The validated configuration. */
  readonly config: GatewayConfig;
  /** Starts both listeners; resolves to their base URLs. */
  listen(): Promise<{ url: string; metricsUrl: string | undefined }>;
  /**
   * Checks the sidecar's readiness and the API key once and logs the result (why the gateway
   * is not ready); while the sidecar is not ready, looks again every 5 s until it is.
   */
  checkSidecar(): Promise<StartupCheck>;
  /** Stops both listeners and closes sidecar/upstream connections (same as `app.close()`). */
  close(): Promise<void>;
}

function baseUrl(app: FastifyInstance): string {
  const address = app.server.address();
  if (address === null || typeof address === 'string') return String(address);
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/**
 * Validates `rawConfig` (as parsed from the config file) and builds the
 * gateway. `env` supplies the API key variable. Throws a path-named
 * `TypeError` on bad config.
 */
export async function buildGateway(rawConfig: unknown, env: NodeJS.ProcessEnv = process.env): Promise<GatewayServer> {
  const config = resolveConfig(rawConfig, env);
  const metrics = createGatewayMetrics();
  const mode = resolveMode(config, metrics);
  const resolved = mode.resolved;

  const app = Fastify({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel },
    http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE },
    requestIdHeader: false,
    genReqId: () => randomUUID(),
    bodyLimit: resolved.bodyLimit,
    frameworkErrors: gatewayFrameworkErrors(metrics),
    clientErrorHandler: gatewayClientErrors(metrics),
    // During a graceful shutdown (main.ts), requests already on a connection are forwarded and
    // answered normally (with `Connection: close`) instead of Fastify's bare 503.
    return503OnClosing: false,
  });
  const sidecarCheck = new SidecarCheck({
    url: resolved.sidecarUrl,
    apiKey: resolved.apiKey,
    timeoutMs: config.plugin.challengeTimeoutMs ?? DEFAULT_CHALLENGE_TIMEOUT_MS,
    log: app.log,
  });
  app.addHook('onClose', async () => sidecarCheck.close());
  // Readiness fails from the start of a close, so load balancers stop sending traffic.
  let shuttingDown = false;
  app.addHook('preClose', async () => { shuttingDown = true; });
  // Methods Fastify's router does not know (PROPFIND, ...) end here; every other request reaches the mode's plugin.
  app.setNotFoundHandler(notFoundAnswer(mode.notFound, metrics));
  await mode.register(app);

  let metricsApp: FastifyInstance | undefined;
  if (config.metrics !== false) {
    collectGatewayDefaultMetrics(metrics.registry);
    const m = Fastify({ logger: false, requestIdHeader: false, genReqId: () => randomUUID() });
    const path = config.metrics.path;
    m.get(path, async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.exposition()));
    metricsApp = m;
    // onClose hooks run after the main listener's connections are done: scrapes (and probes on
    // the metrics listener) keep working during a graceful shutdown, and one app.close() (main.ts) stops both listeners.
    app.addHook('onClose', async () => m.close());
  }
  const healthApp = config.health.listener === 'metrics' ? metricsApp : app;
  if (healthApp !== undefined && config.health.livenessPath !== undefined) {
    healthApp.get(config.health.livenessPath, async (request, reply) => reply.header('x-request-id', request.id).send({ status: 'ok' }));
  }
  if (healthApp !== undefined && config.health.readinessPath !== undefined) {
    healthApp.get(config.health.readinessPath, async (request, reply) => {
      void reply.header('x-request-id', request.id);
      if (shuttingDown) {
        return reply.code(503).header('cache-control', 'no-store').send(
          errorBody('verify_unavailable', 'The gateway is shutting down.', { cause: 'shutting_down' }));
      }
      const readiness = await sidecarCheck.readiness(request.id);
      sidecarCheck.report(readiness);
      if (readiness.ready) return { status: 'ready' };
      return reply.code(503).header('cache-control', 'no-store').send(
        errorBody('verify_unavailable', 'The sidecar is not ready.', { cause: 'sidecar_not_ready' }));
    });
  }

  return {
    app,
    metricsApp,
    metrics,
    config,
    async listen() {
      await app.listen({ host: config.listen.host, port: config.listen.port });
      let metricsUrl: string | undefined;
      if (metricsApp !== undefined && config.metrics !== false) {
        await metricsApp.listen({ host: config.metrics.host, port: config.metrics.port });
        metricsUrl = baseUrl(metricsApp) + config.metrics.path;
      }
      return { url: baseUrl(app), metricsUrl };
    },
    checkSidecar: () => sidecarCheck.checkAtStartup(),
    async close() {
      await app.close();
    },
  };
}
