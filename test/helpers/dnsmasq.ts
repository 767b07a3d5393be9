/**
 * A real DNS server on loopback for the publisher-domain tests (issue 32):
 * Debian's dnsmasq, serving the TXT records a test gives it and answering
 * authoritatively (NXDOMAIN) for any other name under the test's zones, with
 * no upstream. `.ci/run` installs dnsmasq; without it (and CI unset) the
 * tests that need it skip.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The dnsmasq binary Debian installs. */
export const DNSMASQ = '/usr/sbin/dnsmasq';

/** True when the DNS tests must skip: dnsmasq is not installed and this is not CI (where it must be). */
export const dnsmasqMissing = (): boolean => !fs.existsSync(DNSMASQ) && process.env['CI'] === undefined;

/** A running dnsmasq. */
export interface DnsServer {
  /** `127.0.0.1:<port>`, as a resolver's server list takes it. */
  address: string;
  /** Replaces the TXT records (dnsmasq re-reads its files only at start, so this (re)starts it on the same port). */
  setRecords(records: TxtRecords): Promise<void>;
  /** Stops answering (the port is closed) until the next {@link setRecords}. */
  stop(): Promise<void>;
  /** Stops it. */
  close(): Promise<void>;
}

/** TXT records: name → records, each record its character-strings. */
export type TxtRecords = Record<string, string[][]>;

/** Binds `port` on 127.0.0.1 over UDP (`udp`) or TCP, and releases it; false when it is taken. */
function canBind(port: number, udp: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    if (udp) {
      const s = dgram.createSocket('udp4');
      s.once('error', () => resolve(false));
      s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
    } else {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    }
  });
}

/**
 * A port free a moment ago for both UDP and TCP (dnsmasq listens on both). It is picked below the
 * kernel's ephemeral range (32768 and up), where the suite's many outgoing TCP connections take
 * their local ports: a port from bind(0) could be a live connection's port by the time dnsmasq
 * binds TCP on it (a CI run failed so: "Address already in use").
 */
async function freeDnsPort(): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canBind(port, true) && await canBind(port, false)) return port;
  }
  throw new Error('no free UDP+TCP port for dnsmasq in 100 tries');
}

function config(zones: readonly string[], records: TxtRecords): string {
  const lines = zones.map((z) => `local=/${z}/`);
  for (const [name, list] of Object.entries(records)) {
    for (const strings of list) lines.push(`txt-record=${name},${strings.map((s) => JSON.stringify(s)).join(',')}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Starts dnsmasq on a free loopback port, authoritative for `zones`, serving `records`. */
export async function startDnsmasq(zones: readonly string[], records: TxtRecords): Promise<DnsServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-dns-'));
  const file = path.join(dir, 'dnsmasq.conf');
  let port = await freeDnsPort();
  let child: ChildProcess | null = null;
  /** Starts dnsmasq on `port`; rejects with `inUse` true when the port was taken meanwhile. */
  const startOnce = async (): Promise<void> => {
    const proc = spawn(DNSMASQ, [
      '--keep-in-foreground', '--no-resolv', '--no-hosts', '--no-poll', '--bind-interfaces',
      '--listen-address=127.0.0.1', `--port=${port}`, `--conf-file=${file}`, '--pid-file=', '--user=root', '--log-facility=-',
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr?.on('data', (c: Buffer) => { stderr += c.toString(); });
    child = proc;
    // dnsmasq prints "started" once it serves; an early exit is a failed start.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`dnsmasq did not start in 10 s: ${stderr}`)), 10_000);
      proc.stderr?.on('data', () => { if (/started, version/.test(stderr)) { clearTimeout(timer); resolve(); } });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(Object.assign(new Error(`dnsmasq exited (${code}): ${stderr}`), { inUse: /Address already in use/.test(stderr) }));
      });
    });
  };
  /**
   * Starts dnsmasq, retrying (bounded) while its port is taken: the first start moves to another
   * port; a restart (the sidecar under test knows the address) waits for the same one to free up.
   */
  const start = async (first = false): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await startOnce();
        return;
      } catch (err) {
        if (!(err as { inUse?: boolean }).inUse || attempt >= (first ? 5 : 50)) throw err;
        if (first) port = await freeDnsPort();
        else await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  const stop = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (proc === null || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => { proc.once('exit', () => resolve()); proc.kill('SIGTERM'); });
  };
  fs.writeFileSync(file, config(zones, records));
  await start(true);
  return {
    address: `127.0.0.1:${port}`,
    async setRecords(next) {
      await stop();
      fs.writeFileSync(file, config(zones, next));
      await start();
    },
    stop,
    async close() {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
