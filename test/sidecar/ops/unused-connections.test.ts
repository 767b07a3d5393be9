/**
 * Closing the sidecar does not wait for a connection that never sent a byte
 * (runtime/unused.ts; the gateway's side, with undici's aborted streams, is
 * test/gateway-plugin/unused-connections.test.ts). Node's HTTP server counts
 * such a connection as active, so its close used to wait until the client
 * closed it. Real sidecar, a raw TCP client on loopback; the close is bounded.
 */
import t from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { startSidecar } from '../../helpers/sidecar.js';

t.setTimeout(60_000);

/** `promise`, or `'timeout'` when it has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), ms); })])
    .finally(() => clearTimeout(timer));
}

t.test('a connection that never sent a byte is closed with the sidecar, not waited for', async (t) => {
  const sc = await startSidecar();
  let accepted = 0;
  sc.app.server.on('connection', () => { accepted += 1; });
  const socket = net.connect(Number(new URL(sc.url).port), '127.0.0.1');
  socket.on('error', () => undefined);
  // Bounded: the socket goes first, so a close that waited ends in teardown.
  t.teardown(async () => { socket.destroy(); await sc.close(); });
  await once(socket, 'connect');
  for (let i = 0; i < 40 && accepted < 1; i += 1) await new Promise((r) => setTimeout(r, 50));
  t.equal(accepted, 1, 'the sidecar accepted the connection');
  const closed = once(socket, 'close');
  t.not(await within(sc.app.close(), 2_000), 'timeout', 'the close completes within 2 s');
  t.not(await within(closed, 1_000), 'timeout', 'the unused connection is closed');
});
