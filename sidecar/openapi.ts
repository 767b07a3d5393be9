/**
 * The OpenAPI 3.1 document of the sidecar, served at `GET /openapi.json`.
 *
 * The fixed parts (info, servers, security schemes, the error shape) are
 * here; paths, parameters and request bodies come from the route schemas
 * through @fastify/swagger; each operation's id, summary, description and
 * success schema come from the route's definition (`api/route.ts`: `mount` puts it in
 * `config.operation`), which {@link attachOperation} puts on the route schema, so the document describes
 * exactly what Fastify validates and serializes. {@link openapiTransform}
 * completes each operation in the DOCUMENT only:
 *
 * - `security` from the route's `config.auth` (`session` → cookie,
 *   `session_csrf` → cookie + CSRF header, `api_key` → API-key header); verify
 *   authenticates inside its pipeline and says so in its operation (`handlerAuth`);
 * - one response per error status, each the shared `Error` shape with the
 *   codes this operation can answer at that status as an `enum`
 *   (`test/sidecar/ops/openapi-errors.test.ts` probes a real sidecar to keep
 *   the lists complete);
 * - the documented-only refinements of the operation: a body the
 *   handler checks itself (`body`), body members documented more precisely
 *   than the route validates them (`bodyMembers`: the approve body's typed
 *   `constraints`), query parameters as the handler parses them (`query`:
 *   `limit` is an integer).
 *
 * The top-level `webhooks` section (OpenAPI 3.1) describes the signed POSTs
 * the sidecar sends to a platform's callback URL (`api/webhooks.ts`).
 *
 * Error bodies are never serialized with a schema: members beyond
 * code/message/status (`field`, `invalid_scopes`, `tries_left`, …) are kept.
 */
import type { FastifyDynamicSwaggerOptions, SwaggerTransform, SwaggerTransformObject } from '@fastify/swagger';
import type { RouteOptions } from 'fastify';
import { ERRORS } from '../src/errors.js';
import type { ErrorCode } from '../src/errors.js';
import type { AuthMode, RoutePermission } from './http/auth.js';
import { commonErrors } from './api/route.js';
import type { OperationDoc } from './api/route.js';
import { webhooksSection } from './api/webhooks.js';

/** The shape of every error body: `{error:{code,message,status}}` (extra members allowed). */
export const ERROR_SCHEMA = {
  $id: 'ErrorResponse',
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'status'],
      // Codes add members such as `field`, `invalid_scopes`, `tries_left`, `retry_after`.
      additionalProperties: true,
      properties: {
        code: { type: 'string', description: 'Stable error code; the table is in docs/errors.md.' },
        message: { type: 'string', description: 'Human-readable message, safe to show.' },
        status: { type: 'integer', description: 'The HTTP status, repeated.' },
      },
    },
  },
} as const;

/** Top-level OpenAPI fields passed to @fastify/swagger. */
export const OPENAPI_INFO: NonNullable<FastifyDynamicSwaggerOptions['openapi']> = {
  openapi: '3.1.0',
  info: {
    title: 'agent-authz sidecar',
    version: '0.2.0',
    license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    description: 'Authorization decisions for AI agent actions. See docs/ for the filled gaps of the service '
      + 'specification. '
      + 'Every refusal is `{error:{code,message,status}}` with a code from docs/errors.md. '
      + 'GET /metrics (Prometheus text) is not listed here.',
  },
  // OpenAPI 3.1 webhooks: what the sidecar POSTs to a platform's callback URL (api/webhooks.ts).
  webhooks: webhooksSection(),
  servers: [{ url: 'http://127.0.0.1:8700',
    description: 'A local sidecar (npm start). Use your sidecar\'s own address.' }],
  tags: [
    { name: 'operations', description: 'Health and readiness.' },
    { name: 'auth', description: 'E-mail code sign-in and sessions (spec 4.1–4.3).' },
    { name: 'onboarding', description: 'Profile and account type (spec 4.4–4.5).' },
    { name: 'platforms', description: 'Platform registration and reads (spec 4.6).' },
    { name: 'connections', description: 'Connections and their API keys.' },
    { name: 'agents', description: 'Agents (spec 4.7).' },
    { name: 'delegations', description: 'Delegation requests and certificates (spec 4.8–4.10).' },
    { name: 'proofs', description: 'Challenges and proof bundles (spec 4.11–4.12).' },
    { name: 'verify', description: 'The decision (spec 4.13).' },
    { name: 'authzen', description: 'The OpenID AuthZEN Authorization API 1.0 (docs/authzen.md).' },
    { name: 'approvals', description: 'Step-up approval of single actions (issue 23).' },
    { name: 'audit', description: 'Audit events and usage (spec 4.14).' },
    { name: 'webhooks', description: 'Callback address and deliveries (spec 6).' },
    { name: 'organizations', description: 'Organisations, workspaces, members, invitations (docs/organisations.md).' },
  ],
  components: {
    securitySchemes: {
      session: { type: 'apiKey', in: 'cookie', name: 'service_session',
        description: 'Session cookie set by verify-code and refresh (15 minutes).' },
      csrf: {
        type: 'apiKey', in: 'header', name: 'X-Service-CSRF',
        description: 'Double submit: must equal the `service_csrf` cookie, which is signed and bound to the '
          + 'session. Re-read it after sign-in and after each refresh.',
      },
      apiKey: { type: 'apiKey', in: 'header', name: 'X-Service-API-Key',
        description: 'Platform API key, shown once at registration or rotation.' },
    },
  },
};

/** OpenAPI security requirement of each `config.auth` mode (`none`: no requirement). */
export const AUTH_SECURITY: Readonly<Record<AuthMode, readonly Record<string, string[]>[]>> = {
  none: [],
  session: [{ session: [] }],
  session_csrf: [{ session: [], csrf: [] }],
  api_key: [{ apiKey: [] }],
};

/** Routes left out of the document on purpose (operational, not part of the JSON API). */
export const HIDDEN_ROUTES = [
  'GET /metrics', 'GET /openapi.json', 'GET /console', 'GET /console/', 'GET /console/*'] as const;

/** The authentication mode a route documents: its operation's `handlerAuth`, else its `config.auth`. */
export function authModeOf(config: { auth?: AuthMode; operation?: OperationDoc } | undefined): AuthMode {
  return config?.operation?.handlerAuth ?? config?.auth ?? 'none';
}

/**
 * `onRoute` hook: puts the operation table's id, summary, description and
 * success schema on the route, so Fastify serializes the 200 body with the
 * schema the document publishes. Routes without an entry are left as they are
 * (a test fails for them).
 */
export function attachOperation(route: RouteOptions): void {
  const doc = route.config?.operation;
  if (doc === undefined) return;
  route.schema = {
    ...route.schema,
    operationId: doc.operationId,
    summary: doc.summary,
    description: doc.description,
    response: { 200: { description: doc.summary, $ref: `${String(doc.response.$id)}#` } },
  };
}

/** The documented error responses of an operation: one per status, each naming its codes. */
export function errorResponses(codes: readonly ErrorCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERRORS[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    list.sort();
    out[String(status)] = {
      description: `Refused: ${list.map((c) => `\`${c}\``).join(', ')} (docs/errors.md).`,
      allOf: [
        { $ref: 'ErrorResponse#' },
        { type: 'object', properties: {
          error: { type: 'object', properties: { code: { type: 'string', enum: list }, status: { type: 'integer',
            const: status } } } } },
      ],
    };
  }
  return out;
}

/**
 * A copy of a route's object schema with some members documented by other schemas (the route's
 * own schema is not changed: it still validates). Throws when a member is not in it, so the
 * operation table cannot document a member the route does not have.
 */
function withMembers(schema: unknown, members: Readonly<Record<string, unknown>>, where: string): Record<string,
  unknown> {
  const s = schema as { properties?: Record<string, unknown> } | undefined;
  for (const name of Object.keys(members)) {
    if (s?.properties?.[name] === undefined) throw new TypeError(`${where}: no member ${name} to document`);
  }
  return { ...s, properties: { ...s!.properties, ...members } };
}

/**
 * @fastify/swagger `transform`: adds `security` and the error responses to
 * the documented copy of each route schema.
 */
export const openapiTransform: SwaggerTransform = ({ schema, url, route }) => {
  const method = Array.isArray(route.method) ? String(route.method[0]) : String(route.method);
  const config = route.config as
    { auth?: AuthMode; operation?: OperationDoc; permission?: RoutePermission } | undefined;
  const mode = authModeOf(config);
  const doc: Record<string, unknown> = { ...(schema ?? {}) };
  // An operation without a body validates with NoBody (no body, empty or {}); it documents none.
  if ((doc.body as { title?: unknown } | undefined)?.title === 'NoBody') delete doc.body;
  doc.security = AUTH_SECURITY[mode].map((r) => ({ ...r }));
  // What the session's role must allow (docs/organisations.md): an extension member of the operation.
  if (config?.permission !== undefined) doc['x-permission'] = config.permission;
  const op = config?.operation;
  if (doc.body === undefined && op?.body !== undefined) doc.body = op.body;
  if (op?.bodyMembers) doc.body = withMembers(doc.body, op.bodyMembers, `${method} ${url} body`);
  if (op?.query) doc.querystring = withMembers(doc.querystring, op.query, `${method} ${url} query`);
  // Every POST, PUT and PATCH parses a body when one is sent (415 for another type, 413 over the limit).
  const hasBody = doc.body !== undefined || method === 'POST' || method === 'PUT' || method === 'PATCH';
  const other: Record<string, unknown> = {};
  for (const [status, s] of Object.entries(op?.responses ?? {})) other[status] = {
    description: s.description ?? '', $ref: `${String(s.$id)}#` };
  doc.response = {
    ...(doc.response as Record<string, unknown> | undefined),
    ...errorResponses([...commonErrors(mode, hasBody, config?.permission), ...(op?.errors ?? [])]),
    ...other,
  };
  return { schema: doc, url };
};

/**
 * @fastify/swagger `transformObject`: a request body whose schema accepts `null` is optional
 * (`requestBody.required: false`). @fastify/swagger marks every body required; the routes with
 * such a body (the deny of a delegation request or of an approval) take none, as they validate
 * an absent body as `null`.
 */
export const openapiTransformObject: SwaggerTransformObject = (document) => {
  if (!('openapiObject' in document)) return document.swaggerObject;
  const { openapiObject } = document;
  for (const item of Object.values(openapiObject.paths ?? {})) {
    for (const op of Object.values(item ?? {}) as { requestBody?: { required?: boolean; content?: Record<string, {
      schema?: { anyOf?: { type?: unknown }[] } }> } }[]) {
      const schema = op?.requestBody?.content?.['application/json']?.schema;
      if (schema?.anyOf?.some((s) => s.type === 'null')) op.requestBody!.required = false;
    }
  }
  return openapiObject;
};

/** The options the sidecar registers @fastify/swagger with (server.ts). */
export const OPENAPI_OPTIONS: FastifyDynamicSwaggerOptions = {
  openapi: OPENAPI_INFO,
  transform: openapiTransform,
  transformObject: openapiTransformObject,
  // Shared schemas keep their `$id` as the component name (`#/components/schemas/Platform`).
  refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (
    typeof json.$id === 'string' ? json.$id : `def-${i}`) },
};
