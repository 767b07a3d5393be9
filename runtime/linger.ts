/**
 * Lingering close, shared by the sidecar and the gateway (issue 35), after
 * nginx's `lingering_close`. A server that refuses a request before reading
 * its body (413 over the body limit, 431 over the header limit, an early 401)
 * answers and closes while the client may still be sending. Closing a socket
 * with unread bytes in its receive queue makes the kernel send a TCP reset,
 * and the reset discards the answer on the client's side before it is read:
 * the client sees `ECONNRESET` or `EPIPE` instead of its 413.
 *
 * A lingering close instead half-closes (`FIN` after the answer's bytes), then
 * keeps reading and discarding what the client still sends until the client
 * closes its side, and only then closes. It is bounded, so a client cannot
 * hold the connection open with it: {@link LINGER_BOUNDS} — at most
 * {@link LingerBounds.timeMs} in all, at most {@link LingerBounds.idleMs}
 * without a byte, at most {@link LingerBounds.maxBytes} discarded; past any
 * bound the socket is destroyed (the reset the lingering close was avoiding,
 * for a client that is far out of bounds).
 *
 * {@link installLingeringClose} applies it to every response Node's HTTP
 * server ends with `Connection: close` while the request's body was not read
 * to its end; `answerClientError` (client-error.ts) applies it after a
 * refusal written straight to the socket.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

/** Bounds of one lingering close. */
export interface LingerBounds {
  /** Longest a connection lingers in all, in ms. */
  readonly timeMs: number;
  /** Longest it lingers without receiving a byte, in ms. */
  readonly idleMs: number;
  /** Most bytes read and discarded while lingering. */
  readonly maxBytes: number;
}

/**
 * The default bounds, nginx's (`lingering_time 30s`, `lingering_timeout 5s`): 30 s in all, 5 s
 * without a byte, and 16 MiB. (With 1 s without a byte, 4 % of 1 MiB bodies sent by a client on a
 * 2-core machine under load still ended in EPIPE.) A graceful shutdown cuts lingering connections
 * when its idle drain ends ({@link destroyLingering}, runtime/shutdown.ts).
 */
export const LINGER_BOUNDS: LingerBounds = Object.freeze({ timeMs: 30_000, idleMs: 5_000, maxBytes: 16 * 1024 * 1024 });

/** How often a lingering socket's progress is checked against its bounds, in ms. */
const CHECK_MS = 100;

const lingering = new Set<Socket>();
const installed = new WeakSet<Server>();
/** The request a socket is currently serving (for {@link installLingeringClose}). */
const current = new WeakMap<Socket, IncomingMessage>();

function noop(): void { /* discard */ }

/** Whether `socket` is in a lingering close (started by {@link lingerClose}). */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket);
}

/**
 * Closes `socket` with a lingering close: ends its writable side (the bytes
 * already written go out, then `FIN`), keeps reading and discarding until the
 * peer closes, and destroys it at the first of the peer's close or a bound.
 * Calling it again on the same socket does nothing.
 */
export function lingerClose(socket: Socket, bounds: LingerBounds = LINGER_BOUNDS): void {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  socket.on('error', noop);
  // The peer's FIN (its body ended, or it gave up): nothing more to discard.
  socket.once('end', () => socket.destroy());
  // Bytes the HTTP parser does not take any more (after a parse error) are read and dropped here.
  socket.on('data', noop);
  socket.end();
  socket.resume();
  const start = Date.now();
  const startBytes = socket.bytesRead;
  let lastBytes = startBytes;
  let lastProgress = start;
  const timer = setInterval(() => {
    const now = Date.now();
    const read = socket.bytesRead;
    if (read !== lastBytes) { lastBytes = read; lastProgress = now; }
    if (now - start >= bounds.timeMs || now - lastProgress >= bounds.idleMs || read - startBytes > bounds.maxBytes) {
      socket.destroy();
    }
  }, CHECK_MS);
  timer.unref();
  socket.once('close', () => { clearInterval(timer); lingering.delete(socket); });
}

/** Destroys every connection in a lingering close (a shutdown: their answers went out already); returns how many. */
export function destroyLingering(): number {
  const n = lingering.size;
  for (const socket of lingering) socket.destroy();
  lingering.clear();
  return n;
}

/**
 * Makes `server` close with {@link lingerClose} every connection it would
 * close after a response (`Connection: close`) while that response's request
 * body was not read to its end — Fastify's 413, an early refusal of a request
 * with a body. Other closes are unchanged. Installing twice does nothing.
 */
export function installLingeringClose(server: Server, bounds: LingerBounds = LINGER_BOUNDS): void {
  if (installed.has(server)) return;
  installed.add(server);
  // Prepended: the request is known before any handler can end its response.
  server.prependListener('request', (req: IncomingMessage) => {
    const socket = req.socket;
    const first = !current.has(socket);
    current.set(socket, req);
    if (!first) return;
    // Node's server ends a `Connection: close` response with destroySoon(): FIN, then destroy
    // once written, which resets a connection with unread bytes. (The TLS socket, for HTTPS.)
    const destroySoon = socket.destroySoon.bind(socket);
    socket.destroySoon = () => {
      if (current.get(socket)?.complete === false) lingerClose(socket, bounds);
      else destroySoon();
    };
  });
}
