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

/** A UDP port on 127.0.0.1 that was free a moment ago. */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    s.once('error', reject);
    s.bind(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
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
  const port = await freeUdpPort();
  let child: ChildProcess | null = null;
  const start = async (): Promise<void> => {
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
      proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`dnsmasq exited (${code}): ${stderr}`)); });
    });
  };
  const stop = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (proc === null || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => { proc.once('exit', () => resolve()); proc.kill('SIGTERM'); });
  };
  fs.writeFileSync(file, config(zones, records));
  await start();
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
