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

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range (at most 50 tries;
 * then one from the kernel). Two callers pick the same port with a chance of about 1 in 20,000.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (await bindable(port)) return port;
  }
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
