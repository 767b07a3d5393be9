/**
 * The sidecar's error and not-found handlers: every failure leaves as
 * `{error:{code,message,status}}` with a code from src/errors.ts. Schema
 * errors become 400 `invalid_request` naming the field; unexpected errors
 * become 500 `internal_error` and are logged, never echoed.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { ServiceError, errorBody } from '../../src/errors.js';
import type { ErrorCode } from '../../src/errors.js';

/** Turns an ajv validation error list into a field name (`body.email`, `querystring.limit`). */
function fieldOf(err: FastifyError): string {
  const v = err.validation?.[0];
  if (!v) return 'body';
  const ctx = err.validationContext ?? 'body';
  const base = v.instancePath ? v.instancePath.replace(/^\//, '').replace(/\//g, '.') : '';
  const params = v.params as Record<string, unknown>;
  const extra = typeof params.missingProperty === 'string' ? params.missingProperty
    : typeof params.additionalProperty === 'string' ? params.additionalProperty : '';
  return [ctx, base, extra].filter(Boolean).join('.');
}

/** Describes an ajv error without internals. */
function describe(err: FastifyError, field: string): string {
  const v = err.validation?.[0];
  if (!v) return 'The request body is not valid JSON.';
  const params = v.params as Record<string, unknown>;
  if (v.keyword === 'required') return `${field} is required.`;
  if (v.keyword === 'additionalProperties') return `${field} is not a known field.`;
  if (v.keyword === 'type') return `${field} must be of type ${String(params.type)}.`;
  return `${field} ${v.message ?? 'is not valid'}.`;
}

/** Installs the error and not-found handlers on a Fastify instance. */
export function installErrorHandlers(app: FastifyInstance, onError?: (code: ErrorCode, url: string) => void): void {
  app.setErrorHandler((err: FastifyError | ServiceError, request, reply) => {
    let code: ErrorCode;
    let body;
    if (err instanceof ServiceError) {
      code = err.code;
      body = err.toBody();
      if (err.headers) void reply.headers(err.headers);
    } else if ((err as FastifyError).validation) {
      const field = fieldOf(err as FastifyError);
      code = 'invalid_request';
      body = errorBody(code, describe(err as FastifyError, field), { field });
    } else {
      const status = (err as FastifyError).statusCode ?? 500;
      if (status === 413) code = 'body_too_large';
      else if (status === 415) code = 'unsupported_media_type';
      else if (status === 404) code = 'route_not_found';
      else if (status === 405) code = 'method_not_allowed';
      else if (status === 429) code = 'rate_limited';
      else if (status >= 400 && status < 500) code = 'invalid_request';
      else if (status === 503) code = 'service_unavailable';
      else code = 'internal_error';
      if (code === 'internal_error') request.log.error({ err }, 'unhandled error');
      body = code === 'invalid_request' && (err as FastifyError).code === 'FST_ERR_CTP_INVALID_JSON'
        || /JSON/.test(String((err as Error).message)) && code === 'invalid_request'
        ? errorBody(code, 'The request body is not valid JSON.', { field: 'body' })
        : errorBody(code);
    }
    onError?.(code, request.url);
    void reply.code(body.error.status).type('application/json; charset=utf-8').send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    onError?.('route_not_found', request.url);
    void reply.code(404).type('application/json; charset=utf-8').send(errorBody('route_not_found', `No route ${request.method} ${request.url.split('?')[0]}.`));
  });
}
