/**
 * Adapters of the receiver core for Node's `http` module and for Fastify.
 * Both read the raw body bytes (the signature covers them exactly) with a
 * size limit, and send the core's answer. Their options are validated like
 * the receiver's (path-named `TypeError`, unknown keys rejected).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { receiverError } from './core.js';
import type { WebhookReceiver, WebhookResponse } from './core.js';
import { checkKeys, checkReceiver } from './options.js';
import { at, checkInt, checkPathname } from '../gateway-plugin/validate.js';

/**
 * Largest body accepted by default (1 MiB). Larger bodies are answered 413 `body_too_large`.
 *
 * ```ts
 * createNodeWebhookHandler(receiver, { maxBodyBytes: DEFAULT_MAX_BODY_BYTES / 4 });
 * ```
 */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** Largest `maxBodyBytes` accepted (64 MiB). */
const MAX_BODY_LIMIT = 64 * 1024 * 1024;

/**
 * Options of the adapters.
 *
 * ```ts
 * createNodeWebhookHandler(receiver, { maxBodyBytes: 256 * 1024 });
 * ```
 */
export interface AdapterOptions {
  /** Largest body accepted, in bytes, 1 to 64 MiB (larger: 413). Default 1 MiB. */
  maxBodyBytes?: number;
}

/**
 * Options of {@link webhookFastifyPlugin}.
 *
 * ```ts
 * await app.register(webhookFastifyPlugin(receiver, { path: '/hooks/authz', maxBodyBytes: 256 * 1024 }));
 * ```
 */
export interface FastifyWebhookOptions extends AdapterOptions {
  /** The route's path. Default `/webhooks/agent-authz`. */
  path?: string;
}

function bodyLimit(opts: Record<string, unknown>, label: string): number {
  return checkInt(opts.maxBodyBytes, at(label, 'maxBodyBytes'), 1, MAX_BODY_LIMIT, DEFAULT_MAX_BODY_BYTES);
}

class BodyTooLarge extends Error {}

/** Reads the whole body of `req` as bytes, refusing more than `limit`. */
function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
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
 * path you registered as callback URL). Only POST is accepted (else 405).
 *
 * ```ts
 * import http from 'node:http';
 * import { createNodeWebhookHandler } from 'agent-authz/receiver';
 *
 * const server = http.createServer(createNodeWebhookHandler(receiver)).listen(8080);
 * // on shutdown: server.close(() => receiver.close());
 * ```
 *
 * @throws TypeError naming the option (`webhook handler options: maxBodyBytes: ...`) on misuse.
 */
export function createNodeWebhookHandler(receiver: WebhookReceiver, opts: AdapterOptions = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const label = 'webhook handler options:';
  checkReceiver(receiver, 'createNodeWebhookHandler: receiver');
  const limit = bodyLimit(checkKeys(opts, label, ['maxBodyBytes']), label);
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
 * routes of the app keep their parsers. Closing the app closes the receiver
 * (and so its dedup store).
 *
 * ```ts
 * import Fastify from 'fastify';
 * import { webhookFastifyPlugin } from 'agent-authz/receiver';
 *
 * const app = Fastify();
 * await app.register(webhookFastifyPlugin(receiver, { path: '/webhooks/agent-authz' }));
 * ```
 *
 * @throws TypeError naming the option (`webhook plugin options: path: ...`) on misuse.
 */
export function webhookFastifyPlugin(receiver: WebhookReceiver, opts: FastifyWebhookOptions = {}): (app: FastifyInstance) => Promise<void> {
  const label = 'webhook plugin options:';
  checkReceiver(receiver, 'webhookFastifyPlugin: receiver');
  const o = checkKeys(opts, label, ['maxBodyBytes', 'path']);
  const limit = bodyLimit(o, label);
  const path = o.path === undefined ? '/webhooks/agent-authz' : checkPathname(o.path, at(label, 'path'));
  return async function agentAuthzWebhooks(app: FastifyInstance): Promise<void> {
    app.addHook('onClose', async () => receiver.close());
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
