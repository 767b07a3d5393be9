/**
 * The front proxies' configurations (NGINX `auth_request`, Caddy `forward_auth`), as
 * docs/forward-auth.md documents them: used by the forward-auth tests
 * (test/gateway-plugin/proxies.ts starts them) and by the benchmark's forward-auth row
 * (bench/agents.ts). Imports nothing outside node.
 */

/** Where the tests find the proxies. */
export const NGINX_BIN = '/usr/sbin/nginx';
export const CADDY_BIN = '/usr/bin/caddy';

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
