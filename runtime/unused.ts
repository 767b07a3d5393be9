/**
 * Closing connections that never sent a byte, shared by the sidecar and the
 * gateway. Node's HTTP server counts a fresh connection as active until its
 * first request is complete (so `headersTimeout` applies to a client that
 * connects and sends nothing), and `server.closeIdleConnections()` skips
 * active connections. A close (`server.close()`, Fastify's `app.close()`)
 * then waits for such a connection until the client closes it: `server.close()`
 * also stops the timer that enforces `headersTimeout`, so nothing on the
 * server's side ends it.
 *
 * Such connections are common: undici (the global `fetch` of Node), when a
 * request whose response is still streaming is aborted (an MCP client closing
 * its GET stream, any cancelled download), destroys that connection, opens a
 * new one for the aborted request, and then drops the request, leaving a
 * connection that never carries a request (nodejs/undici#5845). The gateway's
 * close then took about 70 s.
 *
 * {@link installUnusedConnectionClose} makes `closeIdleConnections()` also
 * destroy every connection that has not received a byte: it has no request to
 * lose. Node's `server.close()` calls it, and so do the idle sweeps of a
 * graceful shutdown (runtime/shutdown.ts: after its drain, like idle
 * keep-alive connections). A connection that received part of a request is
 * left to finish (or to the shutdown's deadline).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const installed = new WeakSet<Server>();

/**
 * Makes `server.closeIdleConnections()` (and so `server.close()`) also destroy
 * the connections that have not received a byte (see the file header).
 * Installing twice does nothing.
 */
export function installUnusedConnectionClose(server: Server): void {
  if (installed.has(server)) return;
  installed.add(server);
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    closeIdle();
    for (const socket of open) {
      if (socket.bytesRead === 0 && !socket.destroyed) socket.destroy();
    }
  };
}
