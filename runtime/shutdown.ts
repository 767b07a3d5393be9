/**
 * Graceful shutdown of a Fastify server process, shared by both entry points
 * (the sidecar, `sidecar/main.ts`, and the standalone gateway,
 * `gateway-plugin/standalone/main.ts`). On the first SIGTERM or SIGINT:
 *
 * 1. `onClosing` runs (synchronously), then `app.close()` starts: the
 *    listener stops accepting (new connections are refused), `preClose` hooks
 *    run (readiness routes flip to 503 there), and every response sent from
 *    then on carries `Connection: close`;
 * 2. keep-alive connections that are idle stay open for a short drain
 *    ({@link IDLE_DRAIN_MS}, at most a quarter of the timeout): a request that
 *    a client is just sending on one is answered instead of reset. Node's own
 *    `server.close()` would destroy them at once, racing such clients into
 *    ECONNRESET. After the drain, connections in a lingering close
 *    (linger.ts) and idle connections are closed (idle ones closed
 *    again every {@link IDLE_SWEEP_MS}, for connections whose last response
 *    went out before the signal and so without `Connection: close`);
 * 3. in-flight requests finish; then the `onClose` hooks run (the server's
 *    own cleanup: stores, workers, outbound connection pools, extra
 *    listeners) and the process exits 0.
 *
 * When `timeoutMs` passes first, the remaining connections are cut, the close
 * gets {@link FORCE_EXIT_GRACE_MS} more, and the process exits 1 (also when
 * the close then completes). A second signal during the shutdown exits 1 at
 * once. An error from `app.close()` exits 1.
 *
 * The server should be built with `return503OnClosing: false`, so requests
 * that arrive on an open connection during the shutdown are answered normally
 * rather than with Fastify's bare 503.
 */
import type { FastifyInstance } from 'fastify';
import { destroyLingering } from './linger.js';

/** Extra time after the shutdown deadline (connections cut) before the process exits anyway. */
export const FORCE_EXIT_GRACE_MS = 2_000;
/** How long idle keep-alive connections stay open at the start of a shutdown (capped at a quarter of the timeout). */
export const IDLE_DRAIN_MS = 1_000;
/** After the drain, how often connections that became idle are closed. */
export const IDLE_SWEEP_MS = 250;

/** Options of {@link installGracefulShutdown}. */
export interface GracefulShutdownOptions {
  /** Bound of the whole shutdown (drain, in-flight requests, `onClose` hooks), in ms. */
  readonly timeoutMs: number;
  /** Name of the service, logged as `service` with every shutdown log line. */
  readonly name: string;
  /**
   * Called once, synchronously, when the first signal arrives, before
   * `app.close()`: e.g. to flag readiness as shutting down from the very
   * first moment. An exception is logged, not propagated.
   */
  readonly onClosing?: () => void;
}

/**
 * Installs SIGTERM/SIGINT handlers that close `app` gracefully and then exit
 * the process (see the file header for the sequence and the exit codes).
 * Also adds an `onSend` hook to `app` (the `Connection: close` header during
 * the shutdown), so call it before `app.listen()` / `app.ready()`.
 * Call it at most once per process, from an entry point only: it calls
 * `process.exit`.
 */
export function installGracefulShutdown(app: FastifyInstance, opts: GracefulShutdownOptions): void {
  const { timeoutMs, name } = opts;
  let closing = false;
  let forced = false;
  // Responses sent during the shutdown tell the client not to reuse the connection.
  app.addHook('onSend', async (_request, reply) => {
    if (closing) void reply.header('connection', 'close');
  });

  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) {
      app.log.warn({ service: name, signal }, 'second signal during shutdown: exiting now');
      process.exit(1);
    }
    closing = true;
    const started = Date.now();
    app.log.info({ service: name, signal, timeout_ms: timeoutMs }, 'shutting down: no new connections; finishing in-flight requests');
    try {
      opts.onClosing?.();
    } catch (err) {
      app.log.error({ service: name, err }, 'shutdown: onClosing failed');
    }

    const deadline = setTimeout(() => {
      forced = true;
      app.log.error({ service: name, timeout_ms: timeoutMs }, 'graceful shutdown timed out: closing remaining connections');
      app.server.closeAllConnections();
      setTimeout(() => {
        app.log.error({ service: name }, 'shutdown did not complete; exiting');
        process.exit(1);
      }, FORCE_EXIT_GRACE_MS).unref();
    }, timeoutMs);
    deadline.unref();

    keepIdleConnectionsFor(app, Math.min(IDLE_DRAIN_MS, Math.floor(timeoutMs / 4)));

    app.close().then(() => {
      clearTimeout(deadline);
      app.log.info({ service: name, duration_ms: Date.now() - started, forced }, 'shutdown complete');
      process.exit(forced ? 1 : 0);
    }, (err: unknown) => {
      app.log.error({ service: name, err }, 'error during shutdown');
      process.exit(1);
    });
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

/**
 * Keeps `app`'s idle keep-alive connections open for `drainMs` although the
 * server is closing: Node's `server.close()` calls `closeIdleConnections()`,
 * which is a no-op until the drain ends. Then idle connections are closed,
 * and again every {@link IDLE_SWEEP_MS} until the process exits.
 */
function keepIdleConnectionsFor(app: FastifyInstance, drainMs: number): void {
  const server = app.server;
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {};
  setTimeout(() => {
    server.closeIdleConnections = closeIdle;
    closeIdle();
    // Connections still discarding a refused request's body (runtime/linger.ts) got their answer during the drain.
    destroyLingering();
    setInterval(closeIdle, IDLE_SWEEP_MS).unref();
  }, drainMs).unref();
}
