/**
 * The route definitions (sidecar/api/route.ts, one per route in the files of sidecar/routes/)
 * against docs/api.md, with no server: the operation-id table lists exactly the defined routes
 * with their method and path, and every row of the route tables that names an authentication
 * names the route's. The served document is derived from the same definitions and checked
 * against the server in test/sidecar/ops/openapi.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import Fastify from 'fastify';
import { OPERATIONS, ROUTES, routeKey } from '../../../sidecar/api/operations.js';
import { defineRoute, mount, op } from '../../../sidecar/api/route.js';
import type { RouteSpec } from '../../../sidecar/api/route.js';
import * as S from '../../../sidecar/api/schemas.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const doc = fs.readFileSync(path.join(REPO, 'docs/api.md'), 'utf8');
/** `METHOD /path` as docs/api.md writes it (`{param}`). */
const documented = (r: RouteSpec): string => `${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`;
/** The authentication column's words in docs/api.md. */
const AUTH_WORDS: Record<string, string> = { session: 'session', session_csrf: 'session+CSRF', api_key: 'API key', none: 'none' };

t.test('every route is defined once, with a unique operationId', async (t) => {
  t.ok(ROUTES.length >= 40, `${ROUTES.length} routes defined`);
  t.equal(new Set(ROUTES.map(routeKey)).size, ROUTES.length, 'no method and path twice');
  t.equal(new Set(ROUTES.map((r) => r.operation.operationId)).size, ROUTES.length, 'no operationId twice');
  t.equal(Object.keys(OPERATIONS).length, ROUTES.length, 'the operation table is derived from them');
  t.same(ROUTES.filter((r) => r.operation.handlerAuth !== undefined).map(routeKey), ['POST /v1/service/verify'],
    'only verify authenticates in its handler');
});

t.test('docs/api.md: the operation-id table is the route definitions', async (t) => {
  const start = doc.indexOf('## Operation ids');
  const end = doc.indexOf('\n## ', start + 3);
  const table = doc.slice(start, end < 0 ? undefined : end);
  const rows = [...table.matchAll(/^\| `(\w+)` \| `([A-Z]+ \/[^`]*)` \|$/gm)].map((m) => `${m[1]} ${m[2]}`);
  t.ok(rows.length >= 40, `${rows.length} rows`);
  const defined = ROUTES.map((r) => `${r.operation.operationId} ${documented(r)}`);
  t.same(defined.filter((d) => !rows.includes(d)), [], 'every route has its row (operationId, method, path)');
  t.same(rows.filter((r) => !defined.includes(r)), [], 'every row is a route');
});

t.test('docs/api.md: a route row that names an authentication names the route\'s', async (t) => {
  let checked = 0;
  for (const r of ROUTES) {
    const auth = r.operation.handlerAuth ?? r.auth;
    for (const line of doc.split('\n')) {
      const m = new RegExp(`^\\| \`${documented(r).replace(/[{}/]/g, '\\$&')}\` \\| ([^|]+) \\|`).exec(line);
      const cell = m?.[1]?.trim();
      if (cell === undefined || !Object.values(AUTH_WORDS).includes(cell)) continue;
      checked += 1;
      t.equal(cell, AUTH_WORDS[auth], `${documented(r)}: ${cell}`);
    }
  }
  t.ok(checked >= 8, `${checked} rows name an authentication`);
});

t.test('mount registers what the definition says, with the operation on the route', async (t) => {
  const spec = defineRoute({
    method: 'POST', url: '/x/:id', auth: 'session_csrf', schema: { tags: ['t'] },
    operation: op('doX', 'Do x', 'Does x.', S.Liveness, ['not_found']),
  });
  const app = Fastify();
  t.teardown(() => app.close());
  let seen: unknown;
  app.addHook('onRoute', (r) => { if (r.url === '/x/:id') seen = { method: r.method, config: r.config, tags: r.schema?.tags }; });
  mount(app, spec, async () => ({ status: 'ok' }), { logLevel: 'warn' });
  await app.ready();
  t.same(seen, { method: 'POST', config: { auth: 'session_csrf', operation: spec.operation }, tags: ['t'] });
  t.throws(() => defineRoute({ ...spec, url: 'x' }), TypeError, 'a path must be absolute');
  t.throws(() => defineRoute({ ...spec, schema: { tags: [] } }), TypeError, 'a route has a tag');
});
