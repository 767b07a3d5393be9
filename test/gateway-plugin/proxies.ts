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

/** Where the tests find the proxies. */
export const NGINX_BIN = '/usr/sbin/nginx';
export const CADDY_BIN = '/usr/bin/caddy';

/** A started front proxy. */
export interface FrontProxy {
  url: string;
  port: number;
  /** The proxy's stderr/log output so far (for failure messages). */
  log(): string;
  close(): Promise<void>;
}

/**
 * The NGINX part of docs/forward-auth.md (the doc shows it for port 8443,
 * authz 127.0.0.1:8090, upstream 127.0.0.1:8080; a test checks it is there
 * verbatim): goes inside `http { }`.
 */
export function nginxSite(port: number, authz: string, upstream: string): string {
  return `upstream app { server ${upstream}; keepalive 16; }
upstream agent_authz { server ${authz}; keepalive 16; }
server {
  listen 127.0.0.1:${port};
  large_client_header_buffers 4 32k;   # X-Service-Proof is about 7 KiB
  location / {
    auth_request /_agent_authz;
    auth_request_set $authz_decision $upstream_http_x_service_decision;
    auth_request_set $authz_scope $upstream_http_x_service_scope;
    auth_request_set $authz_agent $upstream_http_x_service_agent_id;
    auth_request_set $authz_cert $upstream_http_x_service_cert_id;
    auth_request_set $authz_request_id $upstream_http_x_request_id;
    auth_request_set $authz_status $upstream_http_x_authz_status;
    auth_request_set $authz_body $upstream_http_x_authz_body;
    auth_request_set $authz_approval $upstream_http_x_service_approval_id;
    error_page 401 403 = @agent_authz_refused;
    proxy_set_header X-Service-Proof "";
    proxy_set_header X-Service-Api-Key "";
    proxy_set_header X-Service-Decision $authz_decision;
    proxy_set_header X-Service-Scope $authz_scope;
    proxy_set_header X-Service-Agent-Id $authz_agent;
    proxy_set_header X-Service-Cert-Id $authz_cert;
    proxy_set_header X-Request-Id $authz_request_id;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_pass http://app;
  }
  location = /_agent_authz {
    internal;
    proxy_pass http://agent_authz/forward-auth/nginx;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    proxy_set_header X-Original-Method $request_method;
    proxy_set_header X-Original-URI $request_uri;
    proxy_set_header X-Forwarded-Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_buffer_size 16k;
    proxy_buffers 4 16k;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
  }
  location @agent_authz_refused {
    default_type "application/json; charset=utf-8";
    add_header Cache-Control no-store always;
    add_header X-Request-Id $authz_request_id always;
    add_header X-Service-Approval-Id $authz_approval always;   # sent only when set (an approval deny)
    if ($authz_status = 400) { return 400 $authz_body; }
    if ($authz_status = 401) { return 401 $authz_body; }
    if ($authz_status = 413) { return 413 $authz_body; }
    if ($authz_status = 415) { return 415 $authz_body; }
    if ($authz_status = 500) { return 500 $authz_body; }
    if ($authz_status = 502) { return 502 $authz_body; }
    if ($authz_status = 503) { return 503 $authz_body; }
    return 403 $authz_body;
  }
}
`;
}

/** A whole nginx.conf around {@link nginxSite}, with every path in `dir` (pid, logs, temp files). */
export function nginxConfig(dir: string, port: number, authz: string, upstream: string): string {
  const site = nginxSite(port, authz, upstream).split('\n').map((l) => (l === '' ? l : `  ${l}`)).join('\n');
  return `worker_processes 1;
error_log ${dir}/error.log warn;
pid ${dir}/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${site}}
`;
}

/** The Caddy site block of docs/forward-auth.md (shown there for the same ports; checked verbatim). */
export function caddySite(port: number, authz: string, upstream: string): string {
  return `http://127.0.0.1:${port} {
  route {
    request_header -X-Service-Decision
    request_header -X-Service-Scope
    request_header -X-Service-Agent-Id
    request_header -X-Service-Cert-Id
    request_header -X-Request-Id
    forward_auth ${authz} {
      uri /forward-auth/caddy
      copy_headers X-Service-Decision X-Service-Scope X-Service-Agent-Id X-Service-Cert-Id X-Request-Id
    }
    request_header -X-Service-Proof
    request_header -X-Service-Api-Key
    reverse_proxy ${upstream}
  }
}
`;
}

/** A whole Caddyfile: admin endpoint and automatic HTTPS off, then {@link caddySite}. */
export function caddyfile(port: number, authz: string, upstream: string): string {
  return `{
  admin off
  auto_https off
}
${caddySite(port, authz, upstream)}`;
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
