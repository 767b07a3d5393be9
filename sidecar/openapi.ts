/**
 * The OpenAPI 3.1 document's fixed parts (info, security schemes, the error
 * shape); the paths are generated from the route schemas by @fastify/swagger
 * and served at `GET /openapi.json`.
 */

import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';

/** Top-level OpenAPI fields passed to @fastify/swagger. */
export const OPENAPI_INFO: NonNullable<Extract<FastifyDynamicSwaggerOptions, { openapi?: unknown }>['openapi']> = {
  openapi: '3.1.0',
  info: { title: 'agent-authz sidecar', version: '0.1.0', description: 'Authorization decisions for AI agent actions. See docs/ for the filled gaps of the service specification.' },
  components: {
    securitySchemes: {
      session: { type: 'apiKey', in: 'cookie', name: 'service_session', description: 'Session cookie set by verify-code and refresh.' },
      csrf: { type: 'apiKey', in: 'header', name: 'X-Service-CSRF', description: 'Must equal the service_csrf cookie (double submit, signed and bound to the session).' },
      apiKey: { type: 'apiKey', in: 'header', name: 'X-Service-API-Key', description: 'Platform API key, shown once at registration or rotation.' },
    },
    schemas: {
      Error: {
        type: 'object', required: ['error'],
        properties: { error: { type: 'object', required: ['code', 'message', 'status'], properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } } } },
      },
    },
  },
};
