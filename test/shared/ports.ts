/**
 * Free ports for servers started as child processes, which need their port before they start.
 * Shared by test/ and bench/ (see test/architecture/test-bench.test.ts).
 *
 * A port from `listen(0)` comes from the kernel's ephemeral range, the same range every outgoing
 * connection and every other `listen(0)` server of a parallel test draws its port from; between
 * the pick and the child's own listen, one of those took it (CI: "EADDRINUSE 127.0.0.1:32885" for
 * a PostgreSQL replica). So the port is drawn at random from below that range, where only another
 * caller of this function picks ports, and checked by binding it.
 */
import fs from 'node:fs';
import net from 'node:net';

/** The lowest port the kernel hands out by itself (Linux's ip_local_port_range; 32768 elsewhere). */
function ephemeralLow(): number {
  try {
    const low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 12_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const LOW = 10_000;
const HIGH = ephemeralLow();

/** Binds 127.0.0.1:`port` (0: a port of the kernel's choice) and releases it: the port, or null when it was taken. */
function bound(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(null));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      const { port: got } = s.address() as net.AddressInfo;
      s.close(() => resolve(got));
    });
  });
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range (at most 50 tries;
 * then one from the kernel). Two callers pick the same port with a chance of about 1 in 20,000.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await bound(LOW + Math.floor(Math.random() * (HIGH - LOW)));
    if (port !== null) return port;
  }
  const port = await bound(0);
  if (port === null) throw new Error('freePort: 127.0.0.1 has no free port');
  return port;
}
