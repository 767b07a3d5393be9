/**
 * The account holder's console: the single-page app that `npm run build` makes
 * from `console/` into `dist/console/`, served at `/console/` on the API's own
 * origin (so its cookies and CSRF token are the API's). `SIDECAR_CONSOLE=0`
 * leaves these routes out.
 *
 * The files are read into memory once at startup (the build is small), so a
 * request never touches the file system and no path can escape the folder.
 * Every answer carries a strict Content-Security-Policy (no inline script,
 * nothing from another origin, `frame-ancestors 'none'`). Hashed files under
 * `assets/` are cached for a year as immutable; `index.html`, which names
 * them, is `no-store`. Any other path without a file extension is a client
 * route and gets `index.html` (the app routes itself). When the build is
 * missing, `/console/` answers `503 service_unavailable` naming the fix.
 */
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from '../../src/errors.js';
import type { ServiceContext } from '../context.js';

/** Where the console is served. */
export const CONSOLE_PATH = '/console/';

/** The console's Content-Security-Policy: its own scripts, styles and API only; never framed. */
export const CONSOLE_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "font-src 'self'",
  "connect-src 'self'", "manifest-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
].join('; ');

/** Headers on every console answer. */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
};

/** `Cache-Control` of hashed assets, of `index.html` (and client routes), and of other files. */
export const CACHE_CONTROL = {
  immutable: 'public, max-age=31536000, immutable', index: 'no-store', other: 'no-cache' } as const;

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8', '.woff2': 'font/woff2', '.webmanifest': 'application/manifest+json',
};
/** Bounds of the folder walk: a build has a few dozen files. */
const MAX_FILES = 500;
const MAX_DEPTH = 4;

/** One file of the build, ready to send. */
export interface ConsoleAsset {
  body: Buffer;
  /** gzip of the body when that is smaller by a useful amount; else null. */
  gzip: Buffer | null;
  type: string;
  etag: string;
  cacheControl: string;
}

/** The folder of the built console: `dist/console` of the package this file belongs to (source or compiled). */
export function defaultConsoleDir(): string | null {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const pkg = path.join(dir, 'package.json');
    try {
      if ((JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'agent-authz') return path.join(
        dir, 'dist', 'console');
    } catch { /* not the package root */ }
    dir = path.dirname(dir);
  }
  return null;
}

/** Reads a built console folder into memory; null when it has no `index.html`. */
export function loadConsoleAssets(dir: string): Map<string, ConsoleAsset> | null {
  if (!fs.existsSync(path.join(dir, 'index.html'))) return null;
  const out = new Map<string, ConsoleAsset>();
  const walk = (rel: string, depth: number): void => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory() && depth < MAX_DEPTH) walk(r, depth + 1);
      if (!e.isFile()) continue;
      const type = TYPES[path.extname(e.name).toLowerCase()];
      if (!type) continue;
      if (out.size >= MAX_FILES) throw new TypeError(
        `${dir}: more than ${MAX_FILES} files; is this the console build?`);
      const body = fs.readFileSync(path.join(dir, r));
      const gz = zlib.gzipSync(body, { level: 9 });
      out.set(r, {
        body, gzip: body.length > 1024 && gz.length < body.length * 0.9 ? gz : null, type,
        etag: `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
        cacheControl: r === 'index.html' ? CACHE_CONTROL.index : r.startsWith(
          'assets/') ? CACHE_CONTROL.immutable : CACHE_CONTROL.other,
      });
    }
  };
  walk('', 0);
  return out;
}

function send(reply: FastifyReply, a: ConsoleAsset, acceptEncoding: string | undefined,
  ifNoneMatch: string | undefined): FastifyReply {
  void reply.headers(CONSOLE_HEADERS).header('cache-control', a.cacheControl).header('vary', 'Accept-Encoding').type(
    a.type);
  if (a.cacheControl !== CACHE_CONTROL.index) {
    void reply.header('etag', a.etag);
    if (ifNoneMatch === a.etag) return reply.code(304).send();
  }
  if (a.gzip && /\bgzip\b/.test(acceptEncoding ?? '')) return reply.header('content-encoding', 'gzip').send(a.gzip);
  return reply.send(a.body);
}

/**
 * Registers `/console` (a redirect to `/console/`), `/console/` and `/console/*`, unless
 * `SIDECAR_CONSOLE=0`. `dir` is the built console (default {@link defaultConsoleDir}).
 */
export async function registerConsoleRoutes(
  app: FastifyInstance, ctx: ServiceContext, dir: string | null = defaultConsoleDir()): Promise<void> {
  if (!ctx.config.consoleEnabled) return;
  const assets = dir ? loadConsoleAssets(dir) : null;
  if (!assets) ctx.log.warn({ dir },
    'the console is not built (no index.html): /console/ answers 503; run `npm run build`, or set SIDECAR_CONSOLE=0');
  const route = { schema: { hide: true }, config: { auth: 'none' as const } };

  app.get('/console', route, async (request, reply) => {
    const q = request.url.indexOf('?');
    return reply.headers(CONSOLE_HEADERS).redirect(CONSOLE_PATH + (q >= 0 ? request.url.slice(q) : ''), 308);
  });

  const serve = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    if (!assets) {
      return reply.code(503).headers(CONSOLE_HEADERS).type('application/json; charset=utf-8')
        .send(errorBody('service_unavailable', 'The console is not built on this sidecar; run `npm run build`.'));
    }
    const rel = (request.params as { '*'?: string })['*'] ?? '';
    const enc = request.headers['accept-encoding'];
    const inm = request.headers['if-none-match'];
    const file = assets.get(rel);
    if (file && rel !== 'index.html') return send(reply, file, enc, inm);
    // A path naming a file (a dot in its last segment, or under assets/) that is not in the build.
    if (!file && (rel.startsWith('assets/') || /\.[^/]*$/.test(rel))) {
      return reply.code(404).headers(CONSOLE_HEADERS).type('application/json; charset=utf-8')
        .send(errorBody('route_not_found', `No console file ${CONSOLE_PATH}${rel.slice(0, 200)}.`));
    }
    return send(reply, assets.get('index.html')!, enc, inm);
  };
  // `/console/` on its own as well: the same answer as `/console/*` with an empty rest.
  app.get(CONSOLE_PATH, route, serve);
  app.get(`${CONSOLE_PATH}*`, route, serve);
}
