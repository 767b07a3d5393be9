/**
 * Test helpers for the gateway: a recording upstream, a controllable fake
 * sidecar (real node:http servers on 127.0.0.1), a gateway built from a
 * config object, and raw/regular HTTP clients.
 *
 * The end-to-end test against the real sidecar can reuse startUpstream(),
 * startGateway() and proofHeader() and swap startFakeSidecar() for the real one.
 */

import http from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import net from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { request as undiciRequest } from 'undici';
import { buildGateway } from '../../gateway-plugin/standalone/server.js';
import type { GatewayServer } from '../../gateway-plugin/standalone/server.js';

/** The API key the test gateway uses (via the env variable named in its config). */
export const TEST_API_KEY = 'gw-test-key-0123456789';
/** The env variable name holding {@link TEST_API_KEY}. */
export const TEST_API_KEY_ENV = 'AGENT_AUTHZ_TEST_GATEWAY_KEY';

/** One request a test server received. */
export interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  remoteAddress: string | undefined;
}

/** A started test HTTP server. */
export interface TestServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Starts an HTTP server on 127.0.0.1 and a free port; `close()` destroys its open connections first. */
export async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  const sockets = new Set<Socket>();
  const server = http.createServer(handler);
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** Sends a JSON (or any) response. */
export function reply(res: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A recording upstream: answers 200 `{ok:true}` and keeps every request. */
export async function startUpstream(): Promise<TestServer & { received: Recorded[] }> {
  const received: Recorded[] = [];
  const server = await listen((req, res) => {
    void readBody(req).then((body) => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body, remoteAddress: req.socket.remoteAddress });
      reply(res, 200, { ok: true, upstream: true });
    });
  });
  return Object.assign(server, { received });
}

/** One verify call the fake sidecar received. */
export interface VerifyCall {
  headers: IncomingHttpHeaders;
  body: { proof_bundle: Record<string, unknown>; required_scope: string; context: Record<string, string> };
}

/** Decides the fake sidecar's answer to one verify call. */
export type VerifyBehaviour = (call: VerifyCall, res: ServerResponse) => void;

/** Allows every verify call, echoing the scope. */
export const allowAll: VerifyBehaviour = (call, res) => reply(res, 200, { decision: 'allow', decision_reason: 'authorized', agent_id: 'agent-1', cert_id: 'cert-00000000-0000-4000-8000-000000000001', scope: call.body.required_scope });
/** Denies every verify call (not_delegated). */
export const denyAll: VerifyBehaviour = (_call, res) => reply(res, 200, { decision: 'deny', decision_reason: 'not_delegated' });

/** A controllable fake sidecar (verify, challenge, readyz). */
export interface FakeSidecar extends TestServer {
  verifyCalls: VerifyCall[];
  challengeCalls: IncomingHttpHeaders[];
  behaviour: VerifyBehaviour;
  ready: boolean;
  challengeValue: string | undefined;
}

/** Starts a fake sidecar whose verify answer is `behaviour` (changeable later). */
export async function startFakeSidecar(behaviour: VerifyBehaviour = allowAll): Promise<FakeSidecar> {
  let counter = 0;
  const state = { verifyCalls: [] as VerifyCall[], challengeCalls: [] as IncomingHttpHeaders[], behaviour, ready: true, challengeValue: undefined as string | undefined };
  const server = await listen((req, res) => {
    void readBody(req).then((raw) => {
      if (req.method === 'GET' && req.url === '/readyz') return reply(res, state.ready ? 200 : 503, { ready: state.ready });
      if (req.headers['x-service-api-key'] !== TEST_API_KEY) return reply(res, 401, { error: { code: 'invalid_api_key', message: 'x', status: 401 } });
      if (req.method === 'POST' && req.url === '/v1/service/challenge') {
        state.challengeCalls.push(req.headers);
        counter += 1;
        return reply(res, 200, { challenge: state.challengeValue ?? `chal-${counter}-abcdef` });
      }
      if (req.method === 'POST' && req.url === '/v1/service/verify') {
        const call: VerifyCall = { headers: req.headers, body: JSON.parse(raw.toString('utf8')) as VerifyCall['body'] };
        state.verifyCalls.push(call);
        return state.behaviour(call, res);
      }
      return reply(res, 404, { error: { code: 'not_found', message: 'x', status: 404 } });
    });
  });
  return Object.assign(state, server);
}

/** A default standalone config pointing at the given servers. */
export function gatewayConfig(upstreamUrl: string, sidecarUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    upstream_url: upstreamUrl,
    sidecar_url: sidecarUrl,
    api_key_env: TEST_API_KEY_ENV,
    verify_timeout_ms: 1500,
    challenge_timeout_ms: 500,
    body_limit_bytes: 65_536,
    listen: { host: '127.0.0.1', port: 0 },
    metrics: { host: '127.0.0.1', port: 0 },
    log_level: 'silent',
    routes: [
      { method: 'GET', path: '/admin', scope: 'custom:admin' },
      { method: ['GET', 'HEAD'], path: '/v1/items/:id', scope: 'data:read' },
      { method: ['POST', 'PUT', 'DELETE'], path: '/v1/items/:id', scope: 'data:write' },
      // The idempotency ledger (on by default for payments:*) has its own tests (idempotency*.test.ts).
      {
        method: 'POST', path: '/v1/payments', scope: 'payments:send', context: { amount: '/amount', currency: '/currency' },
        idempotency: 'off',
      },
      { method: '*', path: '/files/*', scope: 'data:read' },
      { method: 'GET', path: '/public/status', public: true },
    ],
    ...extra,
  };
}

/** A started gateway plus its URLs. */
export interface StartedGateway {
  server: GatewayServer;
  url: string;
  port: number;
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

/** Builds and starts a gateway from a config object (API key from {@link TEST_API_KEY}). */
export async function startGateway(config: Record<string, unknown>): Promise<StartedGateway> {
  const server = await buildGateway(config, { [TEST_API_KEY_ENV]: TEST_API_KEY });
  const { url, metricsUrl } = await server.listen();
  return { server, url, port: Number(new URL(url).port), metricsUrl, close: () => server.close() };
}

/**
 * A structurally valid proof bundle (it passes `parseProofBundle`, so the
 * gateway sends it to verify) whose signatures are filler bytes of the right
 * lengths: a stand-in for a real ~6 KiB bundle against the fake sidecar.
 * `overrides` replace members (a member set to `undefined` is removed).
 */
export function fakeBundle(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const filler = (n: number, seed: number): string => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff)).toString('base64url');
  const bundle: Record<string, unknown> = {
    v: 1,
    typ: 'agent-authz.proof',
    challenge: 'chal-0123456789abcdef',
    aud: '00000000-0000-4000-8000-0000000000aa',
    agent_id: '00000000-0000-4000-8000-0000000000bb',
    cert_id: 'cert-00000000-0000-4000-8000-000000000001',
    cert_sha256: 'ab'.repeat(32),
    presented_at: '2025-01-01T00:00:00.000Z',
    sig: { ed25519: filler(64, 1), ml_dsa_65: filler(3309, 2) },
  };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) delete bundle[key];
    else bundle[key] = value;
  }
  return bundle;
}

/** Base64 of a bundle object (default: {@link fakeBundle}). */
export function proofHeader(bundle: Record<string, unknown> = fakeBundle(), encoding: 'base64' | 'base64url' = 'base64'): string {
  return Buffer.from(JSON.stringify(bundle), 'utf8').toString(encoding);
}

/** A parsed HTTP response. */
export interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

function toResponse(status: number, headers: Response['headers'], text: string): Response {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, text, json };
}

/** A normal HTTP request through undici (path must be valid for undici). */
export async function send(base: string, path: string, init: { method?: string; headers?: Record<string, string | string[]>; body?: string | Buffer } = {}): Promise<Response> {
  const res = await undiciRequest(base + path, { method: (init.method ?? 'GET') as 'GET', headers: init.headers ?? {}, body: init.body ?? null, headersTimeout: 10_000, bodyTimeout: 10_000 });
  return toResponse(res.statusCode, res.headers, await res.body.text());
}

/** Sends exactly `head` (request line + headers, CRLF-separated) and `body` on a fresh socket. */
export function rawRequest(port: number, requestLine: string, headers: string[] = [], body: Buffer | string = '', timeoutMs = 5000): Promise<Response> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`raw request timed out: ${requestLine}`));
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const lines = head.split('\r\n');
      const status = Number((lines[0] ?? '').split(' ')[1] ?? 0);
      const hdrs: Response['headers'] = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) hdrs[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      let payload = rest.join('\r\n\r\n');
      if (hdrs['transfer-encoding'] === 'chunked') payload = dechunk(payload);
      resolve(toResponse(status, hdrs, payload));
    });
    const all = [requestLine, 'Host: 127.0.0.1', 'Connection: close', ...headers];
    const buf = Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1');
    if (buf.length > 0 && !headers.some((h) => /^transfer-encoding:/i.test(h))) all.push(`Content-Length: ${buf.length}`);
    socket.write(Buffer.concat([Buffer.from(`${all.join('\r\n')}\r\n\r\n`, 'latin1'), buf]));
  });
}

function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (let guard = 0; guard < 10_000; guard += 1) {
    const i = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, i), 16);
    if (!(size > 0)) break;
    out += rest.slice(i + 2, i + 2 + size);
    rest = rest.slice(i + 2 + size + 2);
  }
  return out;
}

/** Fetches a metrics page and returns the sample value of `series` (exact line prefix), or undefined. */
export async function metricValue(metricsUrl: string, series: string): Promise<number | undefined> {
  const res = await undiciRequest(metricsUrl);
  const text = await res.body.text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Builds and starts a gateway from a config object with a real API key (in {@link TEST_API_KEY_ENV}) and more `env`. */
export async function startGatewayWithKey(config: Record<string, unknown>, apiKey: string, env: NodeJS.ProcessEnv = {}): Promise<StartedGateway> {
  const server = await buildGateway(config, { ...env, [TEST_API_KEY_ENV]: apiKey });
  const { url, metricsUrl } = await server.listen();
  return { server, url, port: Number(new URL(url).port), metricsUrl, close: () => server.close() };
}

/**
 * Fetches a Prometheus text page and sums the samples of metric `name` whose
 * labels include every pair of `labels` (label order does not matter).
 * Returns 0 when no sample matches.
 */
export async function metricSum(metricsUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await undiciRequest(metricsUrl);
  return sumSamples(await res.body.text(), name, labels);
}

/** Sums the samples of metric `name` in a Prometheus text page whose labels include every pair of `labels` (0 when none). */
export function sumSamples(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have.set(pair[1] as string, pair[2] as string);
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  return sum;
}

