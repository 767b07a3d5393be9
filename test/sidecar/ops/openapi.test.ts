/**
 * `GET /openapi.json`: a valid OpenAPI 3.1 document (checked with
 * @seriousme/openapi-schema-validator) that lists every registered route
 * except the documented hidden ones, with the auth schemes, request bodies and
 * the error shape; and documenting never changes what the routes send (error
 * members such as `invalid_scopes` are not stripped).
 */
import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import { onboard, startSidecar } from '../../helpers/sidecar.js';
import { HIDDEN_ROUTES } from '../../../sidecar/openapi.js';

/** `METHOD /path` of every route in `app.printRoutes({ commonPrefix: false })` (auto HEAD routes left out). */
function routesOf(tree: string): Set<string> {
  const out = new Set<string>();
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:│ {3}| {4})*)[├└]── (\S+) \(([^)]+)\)$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    const full = stack.join('');
    for (const method of m[3]!.split(',').map((s) => s.trim())) if (method !== 'HEAD') out.add(`${method} ${full}`);
  }
  return out;
}

type Doc = { openapi: string; paths: Record<string, Record<string, any>>; components: { schemas: Record<string, any>; securitySchemes: Record<string, any> } }; // eslint-disable-line @typescript-eslint/no-explicit-any

t.test('the OpenAPI document', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const r = await fetch(`${sc.url}/openapi.json`);
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /application\/json/);
  const doc = await r.json() as Doc;

  const res = await new Validator().validate(doc as unknown as Record<string, unknown>);
  t.ok(res.valid, `valid OpenAPI: ${JSON.stringify(res.errors ?? null).slice(0, 2000)}`);
  t.equal(doc.openapi, '3.1.0');

  // Every registered route is documented, except the hidden ones.
  const registered = routesOf(sc.app.printRoutes({ commonPrefix: false }));
  t.ok(registered.size >= 35, `found ${registered.size} routes`);
  const documented = new Set<string>();
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item)) documented.add(`${method.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`);
  }
  const hidden = new Set<string>(HIDDEN_ROUTES);
  const missing = [...registered].filter((k) => !documented.has(k) && !hidden.has(k.split(' ')[1]!));
  t.same(missing, [], 'every route is documented');
  t.same([...documented].filter((k) => !registered.has(k)), [], 'nothing documented that is not served');
  for (const h of HIDDEN_ROUTES) {
    t.ok(registered.has(`GET ${h}`), `${h} is served`);
    t.notOk(documented.has(`GET ${h}`), `${h} is hidden`);
  }

  // Auth schemes.
  t.same(Object.keys(doc.components.securitySchemes).sort(), ['apiKey', 'csrf', 'session']);
  t.match(doc.components.securitySchemes.session, { type: 'apiKey', in: 'cookie', name: 'service_session' });
  t.match(doc.components.securitySchemes.csrf, { type: 'apiKey', in: 'header', name: 'X-Service-CSRF' });
  t.match(doc.components.securitySchemes.apiKey, { type: 'apiKey', in: 'header', name: 'X-Service-API-Key' });
  const op = (method: string, p: string) => doc.paths[p]?.[method];
  t.same(op('post', '/v1/service/verify')?.security, [{ apiKey: [] }], 'verify: API key');
  t.same(op('post', '/v1/service/challenge')?.security, [{ apiKey: [] }], 'challenge: API key');
  t.same(op('post', '/v1/service/platforms/personal')?.security, [{ session: [], csrf: [] }], 'registration: cookie + CSRF');
  t.same(op('get', '/v1/service/audit/personal')?.security, [{ session: [] }], 'audit: cookie');
  t.equal(op('post', '/v1/auth/email/send-code')?.security, undefined, 'send-code: no auth');

  // Request bodies, parameters and responses.
  t.match(op('post', '/v1/service/verify')?.requestBody?.content?.['application/json']?.schema, { required: ['proof_bundle', 'required_scope'] });
  t.match(op('post', '/v1/service/platforms/personal')?.requestBody?.content?.['application/json']?.schema?.properties, { name: {}, surface_type: {}, default_allowed_scopes: {} });
  t.match(op('post', '/v1/service/delegations/{cert_id}/revoke')?.parameters, [{ in: 'path', name: 'cert_id', required: true }]);
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const [method, o] of Object.entries(item)) {
      const responses = Object.keys(o.responses ?? {});
      t.ok(responses.some((c) => c.startsWith('2')), `${method} ${p}: a success response`);
      t.ok(o.responses?.['4XX']?.content?.['application/json']?.schema?.properties?.error, `${method} ${p}: the error shape`);
    }
  }

  // Real error bodies match the documented Error schema; extra members survive.
  const ajv = new Ajv({ strict: false });
  const isError = ajv.compile(doc.components.schemas.Error);
  const user = await onboard(sc, 'openapi@example.com');
  const bad = await user.post('/v1/service/platforms/personal', { name: 'p', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'nope'] });
  t.equal(bad.status, 400);
  t.same(bad.body.error.invalid_scopes, ['nope'], 'invalid_scopes is not stripped');
  t.equal(bad.body.error.field, 'body.default_allowed_scopes', 'field is not stripped');
  t.ok(isError(bad.body), 'matches the Error schema');
  const noKey = await fetch(`${sc.url}/v1/service/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.ok(isError(await noKey.json()), '401 matches the Error schema');
  const notFound = await fetch(`${sc.url}/nope`);
  t.ok(isError(await notFound.json()), '404 matches the Error schema');
});

t.test('routesOf parses the route tree', async (t) => {
  const tree = '├── /a (GET, HEAD)\n│   └── /:id (POST)\n│       └── /x (PUT)\n└── /b (POST)\n';
  t.same([...routesOf(tree)].sort(), ['GET /a', 'POST /a/:id', 'POST /b', 'PUT /a/:id/x']);
});
