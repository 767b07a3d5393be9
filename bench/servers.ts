/**
 * Helper servers of the gateway comparison, one per process (child of
 * bench/run.ts). Each listens on 127.0.0.1:0 and prints `READY <mode> <port>`.
 *
 *   upstream  node:http answering every request 200 with a small JSON body
 *   plain     Fastify + @fastify/http-proxy in front of the upstream (no auth)
 *   jose      the same proxy, verifying an EdDSA JWT (Authorization: Bearer)
 *             with `jose` before proxying, and checking its `scope` claim
 *   stub      a stand-in sidecar for the gateway's reference row: answers every
 *             verify "allow" without looking at it (no crypto, no store), and
 *             /readyz 200. It measures the gateway's own cost, never a decision.
 *   allow     the cheapest verify service there is: node:http, reads the body,
 *             answers 200 `{"decision":"allow"}` (behind `hop`)
 *   hop       the plain proxy plus the least a gateway that calls a verify
 *             service must do: POST the X-Service-Proof value to --verify=URL
 *             (undici keep-alive pool) and proxy only on a 200 allow. With
 *             `allow` behind it, it is the floor of any design that calls a
 *             service per request (bench/bounds.ts), not a gateway.
 *   all       all of them in one process (smoke runs only: they share a thread)
 *
 *   node --import tsx bench/servers.ts upstream
 *   node --import tsx bench/servers.ts plain --upstream=http://127.0.0.1:PORT
 *   BENCH_JWT_PUBLIC_JWK='{...}' node --import tsx bench/servers.ts jose --upstream=... --scope=data:read
 *   node --import tsx bench/servers.ts hop --upstream=... --verify=http://127.0.0.1:PORT
 *
 * The proxies use the same undici settings and header-size limit as the
 * agent-authz gateway (gateway-plugin/index.ts), so the comparison differs
 * only in what runs before the proxying.
 */
import http from 'node:http';
import Fastify from 'fastify';
import type { FastifyRequest } from 'fastify';
import httpProxy from '@fastify/http-proxy';
import { importJWK, jwtVerify } from 'jose';
import { Pool } from 'undici';
import type { JWK } from 'jose';

const mode = process.argv[2];
const arg = (name: string): string | undefined => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
/** Same as GATEWAY_MAX_HEADER_SIZE in gateway-plugin/options.ts. */
const MAX_HEADER_SIZE = 32_768;

function onSignals(close: () => Promise<void>): void {
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      setTimeout(() => process.exit(0), 2000).unref();
      close().then(() => process.exit(0), () => process.exit(1));
    });
  }
}

/** A node:http server that reads each request's body and answers 200 with `json`; prints `READY <name> <port>`, returns its URL. */
async function fixedJsonServer(name: string, json: string): Promise<string> {
  const body = Buffer.from(json);
  const server = http.createServer({ maxHeaderSize: MAX_HEADER_SIZE, keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  onSignals(() => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  const port = (server.address() as { port: number }).port;
  process.stdout.write(`READY ${name} ${port}\n`);
  return `http://127.0.0.1:${port}`;
}

/** The upstream behind every proxy: 42 bytes of JSON. */
const upstream = (): Promise<string> => fixedJsonServer('upstream', '{"ok":true,"item":{"id":1,"name":"bench"}}');

async function proxy(kind: 'plain' | 'jose' | 'hop', target = arg('upstream'), verifyUrl = arg('verify')): Promise<void> {
  if (!target) throw new TypeError('--upstream=URL is required');
  const withJwt = kind === 'jose';
  const app = Fastify({ logger: false, http: { maxHeaderSize: MAX_HEADER_SIZE }, keepAliveTimeout: 60_000 });
  if (kind === 'hop') {
    if (!verifyUrl) throw new TypeError('--verify=URL is required');
    const verify = new Pool(verifyUrl, { connections: 64, keepAliveTimeout: 30_000 });
    app.addHook('onClose', async () => { await verify.close(); });
    app.addHook('onRequest', async (request: FastifyRequest, reply) => {
      const proof = request.headers['x-service-proof'];
      if (typeof proof !== 'string') return reply.code(401).send({ error: 'proof required' });
      const r = await verify.request({ method: 'POST', path: '/verify', headers: { 'content-type': 'text/plain' }, body: proof });
      const text = await r.body.text();
      if (r.statusCode !== 200 || (JSON.parse(text) as { decision?: unknown }).decision !== 'allow') return reply.code(403).send({ error: 'refused' });
      return undefined;
    });
  }
  if (withJwt) {
    const jwk = JSON.parse(process.env.BENCH_JWT_PUBLIC_JWK ?? 'null') as JWK | null;
    if (!jwk) throw new TypeError('BENCH_JWT_PUBLIC_JWK is required');
    const scope = arg('scope') ?? 'data:read';
    const key = await importJWK(jwk, 'EdDSA');
    app.addHook('onRequest', async (request: FastifyRequest, reply) => {
      const h = request.headers.authorization;
      if (!h || !h.startsWith('Bearer ')) return reply.code(401).send({ error: 'missing token' });
      try {
        const { payload } = await jwtVerify(h.slice(7), key, { algorithms: ['EdDSA'], issuer: 'bench-issuer', audience: 'bench-api' });
        const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
        if (!scopes.includes(scope)) return reply.code(403).send({ error: 'insufficient scope' });
      } catch {
        return reply.code(401).send({ error: 'invalid token' });
      }
      return undefined;
    });
  }
  await app.register(httpProxy, {
    upstream: target,
    disableRequestLogging: true,
    // Like the gateway, the hop does not pass the proof on to the upstream.
    ...(kind === 'hop' ? { replyOptions: { rewriteRequestHeaders: (_req, headers) => { const h = { ...headers }; delete h['x-service-proof']; return h; } } } : {}),
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 30_000, bodyTimeout: 30_000 },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  onSignals(() => app.close());
  process.stdout.write(`READY ${kind} ${(app.server.address() as { port: number }).port}\n`);
}

/** The stand-in sidecar (see the file header). Its answer has the shape the gateway's outcome mapper requires. */
async function stub(): Promise<void> {
  const app = Fastify({ logger: false, keepAliveTimeout: 60_000 });
  const id = '00000000-0000-4000-8000-000000000000';
  app.post('/v1/service/verify', async (request) => ({
    decision: 'allow', decision_reason: 'authorized', agent_id: id, cert_id: `cert-${id}`,
    scope: (request.body as { required_scope?: unknown } | undefined)?.required_scope, audit_event_id: id,
  }));
  app.get('/readyz', async () => ({ status: 'ready' }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  onSignals(() => app.close());
  process.stdout.write(`READY stub ${(app.server.address() as { port: number }).port}\n`);
}

/** The cheapest verify service (see the file header): node:http, no framework, a fixed allow. */
const allow = (): Promise<string> => fixedJsonServer('allow', '{"decision":"allow","decision_reason":"authorized"}');

if (mode === 'upstream') await upstream();
else if (mode === 'all') {
  const up = await upstream();
  await proxy('plain', up);
  await proxy('jose', up);
  await stub();
  await proxy('hop', up, await allow());
} else if (mode === 'stub') await stub(); else if (mode === 'plain') await proxy('plain');
else if (mode === 'jose') await proxy('jose');
else if (mode === 'allow') await allow();
else if (mode === 'hop') await proxy('hop');
else {
  process.stderr.write('usage: servers.ts upstream|plain|jose|stub|allow|hop|all [--upstream=URL] [--verify=URL] [--scope=SCOPE]\n');
  process.exit(2);
}
