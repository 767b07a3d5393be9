/**
 * One definition per route: {@link RouteSpec} holds a route's method, path, authentication,
 * request schemas and its operation (the stable `operationId` — part of the API: generated
 * clients name their methods after it —, summary, description, success schema and the error
 * codes it answers beyond {@link commonErrors}). Each file of `routes/` defines its routes
 * with {@link defineRoute} and registers each with its handler through {@link mount}; the
 * operation table (`api/operations.ts`) lists them, and the OpenAPI document (`openapi.ts`)
 * reads the operation off the registered route (`config.operation`), so Fastify serializes
 * the success body with the schema the document publishes.
 */
import { Type } from '@sinclair/typebox';
import type { TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifySchema, RouteHandlerMethod, RouteShorthandOptions } from 'fastify';
import type { ErrorCode } from '../../src/errors.js';
import type { AuthMode, RoutePermission } from '../http/auth.js';

/** One documented operation. */
export interface OperationDoc {
  /** Stable camelCase identifier. */
  readonly operationId: string;
  /** One line. */
  readonly summary: string;
  /** What it does, and where the spec leaves a gap, what the sidecar fills in. */
  readonly description: string;
  /** The 200 body. */
  readonly response: TSchema;
  /** Codes this operation answers besides {@link commonErrors}. */
  readonly errors: readonly ErrorCode[];
  /** Other answers by status that are not the error shape (readiness's 503). */
  readonly responses?: Readonly<Record<string, TSchema>>;
  /**
   * The request body, for the document only, of a route that checks its body in the handler
   * (it has no body schema for Fastify to validate with). A route with a body schema never has one.
   */
  readonly body?: TSchema;
  /**
   * Members of the route's body schema documented more precisely than the route validates them,
   * because the handler checks them (the approve body's `constraints`, by `validateConstraints`).
   */
  readonly bodyMembers?: Readonly<Record<string, TSchema>>;
  /** Query parameters documented with the type the handler parses them as (`limit`: an integer). */
  readonly query?: Readonly<Record<string, TSchema>>;
  /**
   * The authentication the handler enforces itself, documented as the route's security (verify,
   * whose hook mode is `none` so that it authenticates inside its pipeline and fails closed).
   */
  readonly handlerAuth?: AuthMode;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's operation (set by {@link mount}; read by openapi.ts). */
    operation?: OperationDoc;
  }
}

/** One route, defined once: what Fastify registers and what the document says of it. */
export interface RouteSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The path as Fastify registers it (`:param`). */
  readonly url: string;
  /** What the `onRequest` auth hook enforces (http/auth.ts). */
  readonly auth: AuthMode;
  /**
   * What a session route needs of the session's role in its workspace (src/roles.ts), or
   * `person`; required of every session route (the auth hook refuses to register one without).
   */
  readonly permission?: RoutePermission;
  /** What Fastify validates: body, params, querystring; and the document's tags. */
  readonly schema: FastifySchema & { readonly tags: readonly string[] };
  readonly operation: OperationDoc;
}

/** A route definition (checked: an absolute path, at least one tag). */
export function defineRoute(spec: RouteSpec): RouteSpec {
  if (!spec.url.startsWith('/') || spec.schema.tags.length === 0) throw new TypeError(
    `route ${spec.method} ${spec.url}: a path and a tag`);
  // The sidecar's own compilers (http/compilers.ts) skip Fastify's lowercasing of header schemas: headers are
  // checked by hooks and handlers instead.
  if (spec.schema.headers !== undefined) throw new TypeError(`route ${spec.method} ${spec.url}: no headers schema`);
  return spec;
}

/** Registers `spec` with its handler; `extra` adds Fastify options such as `attachValidation` or `logLevel`. */
export function mount(app: FastifyInstance, spec: RouteSpec, handler: RouteHandlerMethod,
  extra: RouteShorthandOptions = {}): void {
  app.route({
    ...extra,
    method: spec.method,
    url: spec.url,
    schema: { ...spec.schema, tags: [...spec.schema.tags] },
    config: {
      auth: spec.auth, operation: spec.operation,
      ...(spec.permission !== undefined ? { permission: spec.permission } : {}),
    },
    handler,
  });
}

/** An operation with no documented-only refinements. */
export const op = (operationId: string, summary: string, description: string, response: TSchema,
  errors: readonly ErrorCode[] = []): OperationDoc =>
  ({ operationId, summary, description, response, errors });

/** The refusal of an account that has not finished onboarding. */
export const ONBOARDED: readonly ErrorCode[] = ['onboarding_incomplete'];

/** `limit` of a listing as the handler parses it (`parsePage` in http/resources.ts). */
export const pageLimit = (limits: { default: number; max: number }): Readonly<Record<string, TSchema>> => ({
  limit: Type.Integer({ minimum: 1, maximum: limits.max, default: limits.default,
    description: `Page size, 1–${limits.max}.` }),
});

/**
 * The codes every operation with this authentication can answer: a malformed
 * request, a header block or URL over 16 KiB and an unsupported `Expect`
 * (refused before routing, runtime/client-error.ts), the authentication
 * refusals, an unavailable store, an unexpected failure; and when it takes a
 * body (every POST, PUT and PATCH, including those that accept only none or `{}`), a
 * body of another content type or over the size limit.
 * `test/sidecar/ops/openapi-errors.test.ts` sends each of these refusals.
 */
export function commonErrors(auth: AuthMode, hasBody: boolean, permission?: RoutePermission): ErrorCode[] {
  const codes: ErrorCode[] = ['invalid_request', 'headers_too_large', 'expectation_failed', 'internal_error',
    'service_unavailable'];
  if (auth === 'session' || auth === 'session_csrf') codes.push('auth_required');
  if (permission !== undefined && permission !== 'person') codes.push('role_forbidden');
  if (auth === 'session_csrf') codes.push('csrf_required', 'csrf_invalid');
  if (auth === 'api_key') codes.push('invalid_api_key');
  if (hasBody) codes.push('unsupported_media_type', 'body_too_large');
  return codes;
}
