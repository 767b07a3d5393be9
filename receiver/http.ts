/**
 * Adapters of the receiver core for Node's `http` module and for Fastify.
 * Both read the raw body bytes (the signature covers them exactly) with a
 * size limit, and send the core's answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { receiverError } from './core.js';
import type { WebhookReceiver, WebhookResponse } from './core.js';

/** Largest body accepted by default (1 MiB). */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Options of the adapters. */
export interface AdapterOptions {
  /** Largest body accepted, in bytes (larger: 413). Default 1 MiB. */
  maxBodyBytes?: number;
}

class BodyTooLarge extends Error {}

/** Reads the whole body of `req` as bytes, refusing more than `limit`. */
export function readRawBody(req: IncomingMessage, limit = DEFAULT_MAX_BODY_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new BodyTooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, r: WebhookResponse): void {
  const headers: Record<string, string> = { ...r.headers };
  if (r.body === undefined) {
    res.writeHead(r.status, headers).end();
    return;
  }
  const text = JSON.stringify(r.body);
  headers['content-type'] = 'application/json';
  res.writeHead(r.status, headers).end(text);
}

/**
 * A `node:http` request listener for the webhook endpoint (mount it on the
 * path you registered as callback URL). Only POST is accepted.
 *
 * ```ts
 * http.createServer(createNodeWebhookHandler(receiver)).listen(8080);
 * ```
 */
export function createNodeWebhookHandler(receiver: WebhookReceiver, opts: AdapterOptions = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const limit = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (req, res) => {
    if (req.method !== 'POST') {
      req.resume();
      send(res, receiverError('method_not_allowed', { Allow: 'POST' }));
      return;
    }
    readRawBody(req, limit).then(
      async (rawBody) => send(res, await receiver.handleWebhook({ rawBody, headers: req.headers })),
      (err: unknown) => {
        if (err instanceof BodyTooLarge) send(res, receiverError('body_too_large', { Connection: 'close' }));
        else res.destroy();
      },
    ).catch(() => res.destroy());
  };
}

/**
 * A Fastify plugin that adds `POST <path>` for the webhook endpoint. It is
 * encapsulated: inside it every content type is read as raw bytes, other
 * routes of the app keep their parsers.
 *
 * ```ts
 * await app.register(webhookFastifyPlugin(receiver, { path: '/webhooks/agent-authz' }));
 * ```
 */
export function webhookFastifyPlugin(receiver: WebhookReceiver, opts: AdapterOptions & { path?: string } = {}) {
  const limit = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const path = opts.path ?? '/webhooks/agent-authz';
  return async function agentAuthzWebhooks(app: FastifyInstance): Promise<void> {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_req, body, done) => done(null, body));
    app.post(path, { bodyLimit: limit }, async (req, reply) => {
      const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const r = await receiver.handleWebhook({ rawBody, headers: req.headers });
      reply.code(r.status);
      if (r.headers) reply.headers(r.headers);
      if (r.body === undefined) return reply.send();
      return reply.type('application/json').send(r.body);
    });
  };
}
