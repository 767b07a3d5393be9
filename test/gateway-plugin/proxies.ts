/**
 * Real front proxies for the forward-auth tests: NGINX (`auth_request`) and
 * Caddy (`forward_auth`) from Debian's packages (/usr/sbin/nginx,
 * /usr/bin/caddy; `.ci/run` installs them), each started on a free loopback
 * port with a config in a temp dir and stopped in teardown. The configs are
 * the ones docs/forward-auth.md documents (same directives, test ports).
 */

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/net.js';
import { CADDY_BIN, NGINX_BIN, caddyfile, nginxConfig } from '../shared/proxy-configs.js';

export { CADDY_BIN, NGINX_BIN, caddyfile, caddySite, nginxConfig, nginxSite } from '../shared/proxy-configs.js';

/** A started front proxy. */
export interface FrontProxy {
  url: string;
  port: number;
  /** The proxy's stderr/log output so far (for failure messages). */
  log(): string;
  close(): Promise<void>;
}

function waitForPort(port: number, child: ChildProcess, log: () => string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const attempt = (): void => {
      if (child.exitCode !== null) return reject(new Error(`proxy exited (${child.exitCode}): ${log()}`));
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`proxy did not listen on ${port} within ${ms} ms: ${log()}`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

async function start(bin: string, args: (dir: string, port: number) => Promise<string[]>, env: (dir: string) => Record<string, string>): Promise<FrontProxy> {
  if (!existsSync(bin)) throw new Error(`${bin} is not installed (apt-get install nginx caddy; .ci/run does)`);
  const dir = await mkdtemp(join(tmpdir(), 'authz-proxy-'));
  const port = await freePort();
  const child = spawn(bin, await args(dir, port), { env: { PATH: process.env.PATH ?? '', ...env(dir) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (c: Buffer) => { output += c.toString(); });
  child.stderr?.on('data', (c: Buffer) => { output += c.toString(); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const log = (): string => output.slice(-4000);
  const close = async (): Promise<void> => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort(port, child, log, 15_000);
  } catch (err) {
    await close();
    throw err;
  }
  return { url: `http://127.0.0.1:${port}`, port, log, close };
}

/** Starts NGINX (`-p <dir> -c <conf> -g 'daemon off;'`) in front of `authz` and `upstream` (host:port). */
export function startNginx(authz: string, upstream: string): Promise<FrontProxy> {
  return start(NGINX_BIN, async (dir, port) => {
    const conf = join(dir, 'nginx.conf');
    await writeFile(conf, nginxConfig(dir, port, authz, upstream));
    return ['-p', dir, '-c', conf, '-g', 'daemon off;'];
  }, () => ({}));
}

/** Starts Caddy (`caddy run --config <file> --adapter caddyfile`, admin off) in front of `authz` and `upstream` (host:port). */
export function startCaddy(authz: string, upstream: string): Promise<FrontProxy> {
  return start(CADDY_BIN, async (dir, port) => {
    const file = join(dir, 'Caddyfile');
    await writeFile(file, caddyfile(port, authz, upstream));
    return ['run', '--config', file, '--adapter', 'caddyfile'];
  }, (dir) => ({ HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config') }));
}
