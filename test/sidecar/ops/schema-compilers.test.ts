/**
 * The sidecar's schema compilers (sidecar/http/compilers.ts) compile each route's schemas on the route's first
 * use: a request is validated and a body serialized exactly as by Fastify's own compilers (same 400s, same
 * Ajv errors, same JSON), nothing is compiled before it is needed, a schema that does not compile fails its
 * route closed (500, no handler), and every schema the sidecar ships compiles (`compileSchemas: 'ready'`).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { lazyCompilers } from '../../../sidecar/http/compilers.js';
import { buildServer } from '../../../sidecar/server.js';
import { configWith } from '../../../sidecar/config/index.js';

const AJV = { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } } as const;
const BODY = {
  type: 'object', required: ['name', 'n'], additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 2 }, n: { type: 'integer', minimum: 1 },
    tags: { type: 'array', items: { type: 'string' } },
  },
} as const;
const OUT = { $id: 'Out', type: 'object', properties: { name: { type: 'string' }, n: { type: 'integer' } } } as const;

/** A server with one validated, serialized route, with Fastify's compilers or the lazy ones. */
async function server(lazy: boolean, body: object = BODY):
Promise<{ app: FastifyInstance; handled: () => number; compilers: ReturnType<typeof lazyCompilers> }> {
  const compilers = lazyCompilers();
  const schemaController = { compilersFactory: compilers.compilersFactory };
  const app = Fastify({ ajv: AJV, ...(lazy ? { schemaController } : {}) });
  app.addSchema(OUT);
  let handled = 0;
  app.post('/things/:id', {
    schema: {
      body, params: { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } },
      querystring: { type: 'object', properties: { limit: { type: 'string', default: '10' } } },
      response: { 200: { $ref: 'Out#' } },
    },
  }, async (req) => {
    handled++;
    return { ...(req.body as object), secret: 'not serialized', limit: (req.query as { limit: string }).limit };
  });
  return { app, handled: () => handled, compilers };
}

const REQUESTS = [
  { url: '/things/abc', payload: { name: 'ok', n: 3 } },
  { url: '/things/abc?limit=5', payload: { name: 'ok', n: 3, tags: ['a'] } },
  { url: '/things/abc', payload: { name: 'x', n: 3 } },
  { url: '/things/abc', payload: { name: 'ok', n: 0 } },
  { url: '/things/abc', payload: { name: 'ok', n: '3' } },
  { url: '/things/abc', payload: { name: 'ok', n: 3, extra: true } },
  { url: '/things/abc', payload: { n: 3 } },
  { url: '/things/abc', payload: { name: 'ok', n: 3, tags: [1] } },
  { url: '/things/ABC', payload: { name: 'ok', n: 3 } },
  { url: '/things/abc', payload: [] },
];

t.test('the same answers as Fastify\'s own compilers, compiled on first use', async (t) => {
  const eager = await server(false);
  const lazy = await server(true);
  t.teardown(async () => { await eager.app.close(); await lazy.app.close(); });
  await eager.app.ready();
  await lazy.app.ready();
  t.equal(lazy.compilers.compilePending() > 0, true, 'nothing compiled before a request (compilePending found work)');
  const fresh = await server(true);
  t.teardown(() => fresh.app.close());
  await fresh.app.ready();
  for (const r of REQUESTS) {
    const a = await eager.app.inject({ method: 'POST', ...r });
    const b = await lazy.app.inject({ method: 'POST', ...r });
    const c = await fresh.app.inject({ method: 'POST', ...r }); // compiled by this very request
    t.equal(b.statusCode, a.statusCode, `${r.url} ${JSON.stringify(r.payload)}: status`);
    t.equal(b.body, a.body, 'body');
    t.equal(c.statusCode, a.statusCode, 'status, first request');
    t.equal(c.body, a.body, 'body, first request');
  }
  t.equal(lazy.handled(), eager.handled(), 'the handler ran for the same requests');
  t.equal(eager.handled(), 2, 'only the two valid ones');
  const bad = await lazy.app.inject({ method: 'POST', url: '/things/abc', payload: { name: 'x', n: 3 } });
  t.match(bad.json(),
    { statusCode: 400, code: 'FST_ERR_VALIDATION', message: 'body/name must NOT have fewer than 2 characters' });
  t.equal(JSON.parse((await lazy.app.inject({ method: 'POST', ...REQUESTS[0]! })).body).secret, undefined,
    'the response schema serializes');
  t.equal(fresh.compilers.compilePending(), 0, 'every schema of the route was compiled by its requests');
});

t.test('a schema that does not compile fails its route closed, and compilePending names it', async (t) => {
  const broken = { type: 'object', properties: { name: { type: 'no-such-type' } } };
  const eager = await server(false, broken);
  const building = /Failed building the validation schema for POST: \/things\/:id/;
  await t.rejects(async () => { await eager.app.ready(); }, building, 'Fastify refuses at start');
  const lazy = await server(true, broken);
  t.teardown(() => lazy.app.close());
  await lazy.app.ready();
  const res = await lazy.app.inject({ method: 'POST', url: '/things/abc', payload: { name: 'ok' } });
  t.equal(res.statusCode, 500, 'refused, not accepted unvalidated');
  t.equal(lazy.handled(), 0, 'the handler never ran');
  const again = await server(true, broken);
  t.teardown(() => again.app.close());
  await again.app.ready();
  t.throws(() => again.compilers.compilePending(),
    /POST \/things\/:id body schema: schema is invalid: data\/properties\/name\/type/);
});

t.test('every schema of the sidecar compiles (compileSchemas: ready)', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-compilers-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const app = await buildServer(configWith({ dataDir: dir, cryptoWorkers: 0 }),
    { logger: false, startWorkers: false, compileSchemas: 'ready' });
  t.teardown(() => app.close());
  await app.ready();
  const res = await app.inject({ method: 'POST', url: '/v1/auth/email/send-code', payload: { email: 42 } });
  t.equal(res.statusCode, 400);
  t.match(res.json(), { error: { code: 'invalid_request', message: /body\.email/, status: 400 } });
});
