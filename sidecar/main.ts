/**
 * The sidecar's entry point (`npm start`, `agent-authz-sidecar`): reads the
 * configuration from the environment, builds the server, listens, and shuts
 * down gracefully on SIGTERM/SIGINT:
 *
 * 1. stop accepting connections; `/readyz` answers 503 from the first
 *    moment of the shutdown. Every response sent from then on carries
 *    `Connection: close`. Keep-alive connections that are idle are kept for
 *    {@link IDLE_DRAIN_MS} (a request arriving on one is still answered,
 *    instead of the client seeing a reset), then closed;
 * 2. wait for in-flight requests, at most `SIDECAR_SHUTDOWN_TIMEOUT_MS` in all;
 * 3. stop the webhook worker (an in-flight delivery finishes, or is aborted
 *    and its lease released so another instance can retry it);
 * 4. close the database (WAL checkpoint), then exit 0.
 *
 * When the deadline passes first, remaining connections are cut, the close
 * is given {@link FORCE_EXIT_GRACE_MS} more, and the process exits 1. A second
 * signal during the shutdown exits 1 at once. Exit code 2: bad configuration.
 */
import { ConfigError, loadConfig } from './config.ts';
import type { SidecarConfig } from './config.ts';
import { buildServer } from './server.ts';
import type { SidecarServer } from './server.ts';

/** Extra time after the shutdown deadline (connections cut) before the process exits anyway. */
const FORCE_EXIT_GRACE_MS = 2_000;
/** How long idle keep-alive connections stay open at the start of a shutdown (capped at a quarter of the timeout). */
const IDLE_DRAIN_MS = 1_000;

function readConfig(): SidecarConfig {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agent-authz sidecar: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

/** Installs the SIGTERM/SIGINT handlers that close `app` gracefully. */
function installShutdown(app: SidecarServer, config: SidecarConfig): void {
  let closing = false;
  let forced = false;
  // Responses sent during the shutdown tell the client not to reuse the connection.
  app.addHook('onSend', async (_request, reply) => { if (closing) void reply.header('connection', 'close'); });
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) {
      app.log.warn({ signal }, 'second signal during shutdown: exiting now');
      process.exit(1);
    }
    closing = true;
    const started = Date.now();
    app.log.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'shutting down: no new connections; finishing in-flight requests');
    const deadline = setTimeout(() => {
      forced = true;
      app.log.error({ timeout_ms: config.shutdownTimeoutMs }, 'graceful shutdown timed out: closing remaining connections');
      app.server.closeAllConnections();
      setTimeout(() => {
        app.log.error('shutdown did not complete; exiting');
        process.exit(1);
      }, FORCE_EXIT_GRACE_MS).unref();
    }, config.shutdownTimeoutMs);
    deadline.unref();
    // Node's server.close() destroys idle keep-alive sockets at once, racing clients that are
    // sending their next request on one (they would see a reset). Keep them for a short drain:
    // requests on them are answered (with Connection: close); sockets still idle are closed after.
    const server = app.server;
    const closeIdle = server.closeIdleConnections.bind(server);
    server.closeIdleConnections = () => {};
    setTimeout(() => {
      server.closeIdleConnections = closeIdle;
      closeIdle();
      // A response whose headers were already out when the signal came has no Connection: close.
      setInterval(closeIdle, 250).unref();
    }, Math.min(IDLE_DRAIN_MS, Math.floor(config.shutdownTimeoutMs / 4))).unref();
    app.close().then(() => {
      clearTimeout(deadline);
      app.log.info({ duration_ms: Date.now() - started, forced }, 'shutdown complete');
      process.exit(forced ? 1 : 0);
    }, (err: unknown) => {
      app.log.error({ err }, 'error during shutdown');
      process.exit(1);
    });
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

async function main(): Promise<void> {
  const config = readConfig();
  const app = await buildServer(config);
  process.on('uncaughtException', (err) => {
    app.log.fatal({ err }, 'uncaught exception; exiting');
    process.exit(1);
  });
  process.on('unhandledRejection', (err) => {
    app.log.fatal({ err }, 'unhandled promise rejection; exiting');
    process.exit(1);
  });
  installShutdown(app, config);
  await app.listen({ host: config.host, port: config.port });
  app.log.info({
    host: config.host, port: (app.server.address() as { port: number } | null)?.port ?? config.port,
    data_dir: config.dataDir, production: config.production, log_level: config.logLevel,
    mailer: config.smtpUrl ? 'smtp' : 'development-log', audit_retention_days: config.auditRetentionDays,
    challenge_retention_hours: config.challengeRetentionHours, shutdown_timeout_ms: config.shutdownTimeoutMs,
  }, 'agent-authz sidecar ready');
}

main().catch((err: unknown) => {
  process.stderr.write(`agent-authz sidecar: failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
