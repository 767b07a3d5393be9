/**
 * Every way the gateway can enforce, started the same way for the
 * mode-parametrized tests (outcome matrix, path corpus):
 *
 * - `proxy`: the standalone reverse proxy (buildGateway);
 * - `plugin`: the plugin registered in the test's own Fastify app;
 * - `nginx`, `caddy`: the REAL proxies (proxies.ts) in front of the
 *   standalone forward-auth endpoint;
 * - `envoy`, `traefik`: the documented check-request shapes of Envoy's
 *   ext_authz HTTP service and Traefik's ForwardAuth (neither is packaged
 *   here), played by a small node:http front that sends exactly those check
 *   requests to the real forward-auth endpoint and, only on its allow,
 *   forwards the original request to the upstream with the decision headers.
 *
 * Each mode gives the client one base URL; the gateway's metrics URL is that
 * of the process making the decisions.
 */

import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import Fastify from 'fastify';
import { Client, request as undiciRequest } from 'undici';
import { agentAuthzGateway, createGatewayMetrics, GATEWAY_MAX_HEADER_SIZE, gatewayClientErrors, gatewayFrameworkErrors, gatewayNotFound } from '../../gateway-plugin/index.js';
import type { RouteEntry } from '../../gateway-plugin/index.js';
import { TEST_API_KEY, gatewayConfig, startGatewayWithKey } from './helpers.js';
import { startCaddy, startNginx } from './proxies.js';

/** The enforcement modes. */
export const MODES = ['proxy', 'plugin', 'nginx', 'caddy', 'envoy', 'traefik'] as const;
/** One of {@link MODES}. */
export type Mode = (typeof MODES)[number];

/** A started mode. */
export interface ModeServer {
  mode: Mode;
  url: string;
  port: number;
  /** Counts the decisions' fail-open tripwire (`agent_authz_gateway_fail_open_total`). */
  failOpen(): Promise<number>;
  /** The Prometheus text of the process making the decisions. */
  exposition(): Promise<string>;
  close(): Promise<void>;
}

const hostPort = (url: string): string => new URL(url).host;

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const COPIED = ['x-service-decision', 'x-service-scope', 'x-service-agent-id', 'x-service-cert-id', 'x-request-id'];
const HOP = ['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host'];

/** The Envoy / Traefik front: a check request of the proxy's documented shape, then forward or answer the refusal. */
async function startShapeFront(kind: 'envoy' | 'traefik', authzUrl: string, upstreamUrl: string): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  // A client that sends the check path exactly as built (no WHATWG URL normalization on the way).
  const authz = new Client(authzUrl);
  const server = http.createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const original: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) if (value !== undefined && !HOP.includes(name)) original[name] = Array.isArray(value) ? value.join(', ') : value;
      const client = req.socket.remoteAddress ?? '';
      // Envoy: same method, path_prefix + original path, allowed headers, the buffered body (with_request_body).
      // Traefik: GET to the address with X-Forwarded-Method/Proto/Host/Uri/For and the original headers, no body.
      const check = await (kind === 'envoy'
        ? authz.request({
          path: `/forward-auth/envoy${req.url ?? ''}`, method: (req.method ?? 'GET') as 'GET', body: body.length > 0 ? body : null,
          headers: { ...original, host: req.headers.host ?? '', 'x-forwarded-for': client, 'x-envoy-auth-partial-body': 'false', 'content-length': String(body.length) },
        })
        : authz.request({
          path: '/forward-auth/traefik', method: 'GET',
          headers: { ...original, 'x-forwarded-method': req.method ?? '', 'x-forwarded-proto': 'http', 'x-forwarded-host': req.headers.host ?? '', 'x-forwarded-uri': req.url ?? '', 'x-forwarded-for': client },
        })).catch(() => undefined);
      if (check === undefined) {
        // The check could not be sent: Envoy answers status_on_error (403 by default), Traefik 500.
        res.writeHead(kind === 'envoy' ? 403 : 500);
        res.end();
        return;
      }
      const checkBody = Buffer.from(await check.body.arrayBuffer());
      const allowed = kind === 'envoy' ? check.statusCode === 200 : check.statusCode >= 200 && check.statusCode < 300;
      if (!allowed) {
        // Both pass the denied check response's headers to the client (Envoy: all but Host unless
        // allowed_client_headers is set; Traefik: the auth server's response as it is).
        const headers: Record<string, string> = {};
        for (const [name, v] of Object.entries(check.headers)) {
          if (typeof v === 'string' && !HOP.includes(name)) headers[name] = v;
        }
        res.writeHead(check.statusCode, headers);
        res.end(checkBody);
        return;
      }
      const forwarded: Record<string, string> = {};
      for (const [name, value] of Object.entries(original)) if (!name.startsWith('x-service-') && name !== 'x-request-id') forwarded[name] = value;
      for (const name of COPIED) {
        const v = check.headers[name];
        if (typeof v === 'string') forwarded[name] = v;
      }
      const up = await undiciRequest(`${upstreamUrl}${req.url ?? ''}`, { method: (req.method ?? 'GET') as 'GET', headers: forwarded, body: body.length > 0 ? body : null });
      const upBody = Buffer.from(await up.body.arrayBuffer());
      res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/octet-stream') });
      res.end(upBody);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      await new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      });
      await authz.close();
    },
  };
}

async function expositionOf(metricsUrl: string | undefined): Promise<string> {
  return (await undiciRequest(metricsUrl ?? '')).body.text();
}

function failOpenIn(text: string): number {
  const line = text.split('\n').find((l) => l.startsWith('agent_authz_gateway_fail_open_total '));
  return Number(line?.split(' ')[1] ?? NaN);
}

/**
 * Starts `mode` in front of `upstreamUrl`, deciding with the sidecar at `sidecarUrl`; `extra` is
 * merged into the standalone config; `apiKey` is the gateway's sidecar key (a real one for the
 * real sidecar).
 */
export async function startMode(mode: Mode, upstreamUrl: string, sidecarUrl: string, extra: Record<string, unknown> = {}, apiKey = TEST_API_KEY): Promise<ModeServer> {
  const config = gatewayConfig(upstreamUrl, sidecarUrl, extra);
  if (mode === 'proxy') {
    const gw = await startGatewayWithKey(config, apiKey);
    return {
      mode, url: gw.url, port: gw.port, failOpen: async () => failOpenIn(await expositionOf(gw.metricsUrl)), exposition: () => expositionOf(gw.metricsUrl), close: () => gw.close(),
    };
  }
  if (mode === 'plugin') {
    const metrics = createGatewayMetrics();
    const app = Fastify({ http: { maxHeaderSize: GATEWAY_MAX_HEADER_SIZE }, frameworkErrors: gatewayFrameworkErrors(metrics), clientErrorHandler: gatewayClientErrors(metrics) });
    app.setNotFoundHandler(gatewayNotFound(metrics));
    await app.register(agentAuthzGateway, {
      upstream: upstreamUrl, sidecarUrl, apiKey, metrics, routes: config.routes as RouteEntry[],
      verifyTimeoutMs: config.verify_timeout_ms as number, challengeTimeoutMs: config.challenge_timeout_ms as number, bodyLimit: config.body_limit_bytes as number,
      ...(config.override_headers === undefined ? {} : { overrideHeaders: config.override_headers as 'refuse' | 'strip' }),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as AddressInfo).port;
    return {
      mode, url: `http://127.0.0.1:${port}`, port,
      failOpen: async () => failOpenIn(await metrics.exposition()),
      exposition: () => metrics.exposition(),
      close: () => app.close(),
    };
  }
  const { upstream_url: _unused, ...rest } = config;
  const authz = await startGatewayWithKey({ ...rest, mode: 'forward_auth', trusted_proxies: ['127.0.0.1'] }, apiKey);
  try {
    const front = mode === 'nginx' ? await startNginx(hostPort(authz.url), hostPort(upstreamUrl))
      : mode === 'caddy' ? await startCaddy(hostPort(authz.url), hostPort(upstreamUrl))
        : await startShapeFront(mode, authz.url, upstreamUrl);
    return {
      mode, url: front.url, port: front.port, failOpen: async () => failOpenIn(await expositionOf(authz.metricsUrl)), exposition: () => expositionOf(authz.metricsUrl),
      close: async () => {
        await front.close();
        await authz.close();
      },
    };
  } catch (err) {
    await authz.close();
    throw err;
  }
}
