/**
 * `GET /openapi.json`: a valid OpenAPI 3.1 document (checked with
 * @seriousme/openapi-schema-validator) that passes Redocly's `recommended`
 * lint (the committed `redocly.yaml`) with 0 errors and 0 warnings, lists
 * every registered route except the documented hidden ones (and nothing
 * else), and gives each operation a stable camelCase operationId, a summary,
 * a description, tags, its security, its success schema and its error codes
 * per status. Real success bodies of the spec flow match their documented
 * schemas, and documenting never changes what the routes send (error members
 * such as `invalid_scopes` are not stripped).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import { onboard, present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import { HIDDEN_ROUTES } from '../../../sidecar/openapi.js';
import { OPERATIONS } from '../../../sidecar/api/operations.js';
import { ERRORS, isErrorCode } from '../../../src/errors.js';
import { REPO } from './helpers.js';

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

type Doc = { openapi: string; servers?: { url: string }[]; tags?: { name: string }[]; paths: Record<string, Record<string, any>>; components: { schemas: Record<string, any>; securitySchemes: Record<string, any> } }; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Runs Redocly CLI's lint on `file` with the committed ruleset; its JSON totals. */
async function lint(file: string): Promise<{ errors: number; warnings: number; output: string }> {
  const cli = path.join(REPO, 'node_modules/@redocly/cli/bin/cli.js');
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NODE_OPTIONS: '' };
  const run = await promisify(execFile)(process.execPath, [cli, 'lint', '--config', path.join(REPO, 'redocly.yaml'), '--format', 'json', file],
    { env, timeout: 60_000, maxBuffer: 16 << 20 }).catch((err: { stdout?: string; stderr?: string }) => ({ stdout: err.stdout ?? '', stderr: err.stderr ?? '' }));
  const json = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as { totals: { errors: number; warnings: number } };
  return { ...json.totals, output: run.stdout.slice(0, 4000) };
}

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
  t.ok(doc.servers?.[0]?.url, 'a servers entry');

  // Redocly's recommended lint: 0 errors, 0 warnings.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'openapi-lint-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc));
  const l = await lint(path.join(dir, 'openapi.json'));
  t.same({ errors: l.errors, warnings: l.warnings }, { errors: 0, warnings: 0 }, `redocly lint: ${l.errors || l.warnings ? l.output : 'clean'}`);
  // The lint can fail: an operation without a summary or operationId is an error under the ruleset.
  const broken = structuredClone(doc);
  delete broken.paths['/v1/service/verify']!.post.operationId;
  fs.writeFileSync(path.join(dir, 'broken.json'), JSON.stringify(broken));
  t.ok((await lint(path.join(dir, 'broken.json'))).errors > 0, 'a missing operationId fails the lint');

  // Every registered route is documented, except the hidden ones, and nothing else is.
  const registered = routesOf(sc.app.printRoutes({ commonPrefix: false }));
  t.ok(registered.size >= 35, `found ${registered.size} routes`);
  const documented = new Set<string>();
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item)) documented.add(`${method.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`);
  }
  const hidden = new Set<string>(HIDDEN_ROUTES);
  t.same([...registered].filter((k) => !documented.has(k) && !hidden.has(k)), [], 'every route is documented');
  t.same([...documented].filter((k) => !registered.has(k)), [], 'nothing documented that is not served');
  t.same([...registered].filter((k) => !hidden.has(k) && OPERATIONS[k] === undefined), [], 'every route has an entry in the operation table');
  t.same(Object.keys(OPERATIONS).filter((k) => !registered.has(k)), [], 'the operation table names no route the server lacks');
  for (const h of HIDDEN_ROUTES) {
    t.ok(registered.has(h), `${h} is served`);
    t.notOk(documented.has(h), `${h} is hidden`);
  }

  // Every operation: a stable camelCase id (unique, the table's), summary, description, declared tags, security, responses.
  const ids = new Set<string>();
  const tags = new Set((doc.tags ?? []).map((x: { name: string }) => x.name));
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const [method, o] of Object.entries(item)) {
      const key = `${method.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`;
      t.match(o.operationId, /^[a-z][A-Za-z0-9]+$/, `${key}: camelCase operationId`);
      t.equal(o.operationId, OPERATIONS[key]?.operationId, `${key}: the table's operationId`);
      t.notOk(ids.has(o.operationId), `${key}: operationId ${o.operationId} is unique`);
      ids.add(o.operationId);
      t.ok(o.summary && o.description, `${key}: summary and description`);
      t.ok(o.tags?.length && o.tags.every((x: string) => tags.has(x)), `${key}: declared tags`);
      t.ok(Array.isArray(o.security), `${key}: security (empty when public)`);
      t.match(o.responses?.['200']?.content?.['application/json']?.schema?.$ref, /^#\/components\/schemas\/\w+$/, `${key}: success schema`);
      for (const [status, resp] of Object.entries(o.responses as Record<string, any>)) { // eslint-disable-line @typescript-eslint/no-explicit-any
        if (status === '200' || (key === 'GET /readyz' && status === '503')) continue;
        const codes: string[] = resp.content?.['application/json']?.schema?.allOf?.[1]?.properties?.error?.properties?.code?.enum ?? [];
        t.ok(codes.length > 0 && codes.every((c) => isErrorCode(c) && String(ERRORS[c].status) === status), `${key} ${status}: codes of that status (${codes.join(', ')})`);
        t.equal(resp.content?.['application/json']?.schema?.allOf?.[0]?.$ref, '#/components/schemas/ErrorResponse', `${key} ${status}: the error shape`);
      }
    }
  }
  t.ok(doc.paths['/v1/auth/email/send-code']?.post?.security?.length === 0, 'public operations say security: []');
  const docs = fs.readFileSync(path.join(REPO, 'docs/api.md'), 'utf8');
  t.same([...ids].filter((id) => !docs.includes(`\`${id}\``)), [], 'docs/api.md lists every operationId');

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
  t.match(op('post', '/v1/service/verify')?.requestBody?.content?.['application/json']?.schema, { required: ['proof_bundle', 'required_scope'] });
  t.match(op('post', '/v1/service/delegations/{cert_id}/revoke')?.parameters, [{ in: 'path', name: 'cert_id', required: true }]);
  // A body that may be absent (the routes validate an absent body as null) is not required.
  t.equal(op('post', '/v1/service/approvals/{approval_id}/deny')?.requestBody?.required, false, 'denyApproval: the body is optional');
  t.equal(op('post', '/v1/service/delegations/requests/{request_id}/deny')?.requestBody?.required, false, 'denyDelegationRequest: the body is optional');
  t.equal(op('post', '/v1/service/delegations/{cert_id}/revoke')?.requestBody?.required, true, 'revokeCertificate: the body is required');

  // Real bodies match the documented schemas: successes of the spec flow, and errors (extra members survive).
  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const [name, schema] of Object.entries(doc.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
  const check = (p: string, method: string, body: unknown): void => {
    const ref = op(method, p)?.responses?.['200']?.content?.['application/json']?.schema?.$ref as string;
    const ok = ajv.validate(ref, body);
    t.ok(ok, `${method.toUpperCase()} ${p} body matches ${ref}: ${JSON.stringify(ajv.errors ?? null).slice(0, 500)}`);
  };
  const f = await specFlow(sc, 'openapi-flow@example.com', { approve: ['data:read'] });
  check('/v1/service/platforms', 'get', (await f.user.get('/v1/service/platforms')).body);
  check('/v1/service/agents', 'get', (await f.user.get('/v1/service/agents')).body);
  check('/v1/service/delegations', 'get', (await f.user.get('/v1/service/delegations')).body);
  check('/v1/service/delegations/requests', 'get', (await f.user.get('/v1/service/delegations/requests')).body);
  check('/v1/auth/session', 'get', (await f.user.get('/v1/auth/session')).body);
  const bundle = await present(f);
  check('/v1/service/verify', 'post', (await f.platform.post('/v1/service/verify', { proof_bundle: bundle, required_scope: 'data:read' })).body);
  check('/v1/service/audit/personal', 'get', (await f.user.get('/v1/service/audit/personal?limit=5')).body);
  check('/v1/service/usage/personal', 'get', (await f.user.get('/v1/service/usage/personal')).body);
  check('/v1/service/webhooks/deliveries', 'get', (await f.user.get('/v1/service/webhooks/deliveries')).body);

  const isError = ajv.compile({ $ref: '#/components/schemas/ErrorResponse' });
  const user = await onboard(sc, 'openapi@example.com');
  const bad = await user.post('/v1/service/platforms/personal', { name: 'p', surface_type: 'agentic_api', default_allowed_scopes: ['data:read', 'nope'] });
  t.equal(bad.status, 400);
  t.same(bad.body.error.invalid_scopes, ['nope'], 'invalid_scopes is not stripped');
  t.equal(bad.body.error.field, 'body.default_allowed_scopes', 'field is not stripped');
  t.ok(isError(bad.body), 'matches the error schema');
  const noKey = await fetch(`${sc.url}/v1/service/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.ok(isError(await noKey.json()), '401 matches the error schema');
  const notFound = await fetch(`${sc.url}/nope`);
  t.ok(isError(await notFound.json()), '404 matches the error schema');
});

t.test('routesOf parses the route tree', async (t) => {
  const tree = '├── /a (GET, HEAD)\n│   └── /:id (POST)\n│       └── /x (PUT)\n└── /b (POST)\n';
  t.same([...routesOf(tree)].sort(), ['GET /a', 'POST /a/:id', 'POST /b', 'PUT /a/:id/x']);
});
