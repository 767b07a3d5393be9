/**
 * The sidecar's entry point (`npm start`): reads the configuration from the
 * environment, builds the server, listens, and shuts down gracefully on
 * SIGTERM/SIGINT (stop accepting, finish in-flight requests within
 * `SIDECAR_SHUTDOWN_TIMEOUT_MS`, stop the webhook worker, close the database).
 */
import { ConfigError, loadConfig } from './config.ts';
import { buildServer } from './server.ts';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agent-authz sidecar: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const app = await buildServer(config);
  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      app.log.error('graceful shutdown timed out; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    app.close().then(() => process.exit(0), (err: unknown) => {
      app.log.error({ err }, 'error during shutdown');
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  await app.listen({ host: config.host, port: config.port });
}

main().catch((err: unknown) => {
  process.stderr.write(`agent-authz sidecar: failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
