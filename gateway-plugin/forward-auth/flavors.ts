/**
 * How each proxy asks the forward-auth endpoint for a decision, and how the
 * answer must look for it (docs/forward-auth.md).
 *
 * | flavor  | endpoint              | original method / URI                    | original host                  | body |
 * |---------|-----------------------|------------------------------------------|--------------------------------|------|
 * | nginx   | `{prefix}/nginx`      | `X-Original-Method` / `X-Original-URI`   | `X-Forwarded-Host`, else Host  | never (auth_request sends none) |
 * | traefik | `{prefix}/traefik`    | `X-Forwarded-Method` / `X-Forwarded-Uri` | `X-Forwarded-Host`, else Host  | when sent (`forwardBody: true`) |
 * | caddy   | `{prefix}/caddy`      | `X-Forwarded-Method` / `X-Forwarded-Uri` | `X-Forwarded-Host`, else Host  | when sent |
 * | envoy   | `{prefix}/envoy` + path | the check request's own method and path (`path_prefix`) | Host | see below |
 *
 * Envoy's body: when `x-envoy-auth-partial-body: false` (`with_request_body`, complete).
 * A body is "sent" when the check request carries a non-empty one; an empty
 * check request body means "not forwarded", never "empty body" (fail closed:
 * a route that needs the body is then 403 `body_not_forwarded`).
 *
 * Answers: 200 only on allow (Envoy accepts nothing else). A refusal keeps
 * its status and body, except for NGINX, whose auth_request treats only 401
 * and 403 as refusals (any other status becomes its own 500) and never passes
 * the subrequest's body on: there every refusal is sent as 401 (for 401) or
 * 403, with the real status in `X-Authz-Status` and the real body in
 * `X-Authz-Body`, which the documented `error_page` location turns back into
 * the same status and body.
 */

import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../../src/errors.js';

/** The proxies the endpoint speaks to. */
export const FLAVORS = ['nginx', 'traefik', 'caddy', 'envoy'] as const;
/** One of {@link FLAVORS}. */
export type Flavor = (typeof FLAVORS)[number];

/** Headers of the NGINX answer that carry the real refusal. */
export const NGINX_REFUSAL_HEADERS = { status: 'x-authz-status', body: 'x-authz-body' } as const;

/** The original request as the proxy describes it. */
export interface OriginalRequest {
  readonly method: string;
  readonly rawUrl: string;
  readonly host: string | undefined;
  /** Whether the check request's body (if any) is the original body. */
  readonly bodyForwarded: 'never' | 'if-present' | 'yes';
}

const METHOD = /^[A-Z]{1,16}$/;

/** The value of a header the proxy must send exactly once; 400 `invalid_request` otherwise. */
function single(request: FastifyRequest, name: string): string {
  let value: string | undefined;
  const raw = request.raw.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() !== name) continue;
    if (value !== undefined) throw new ServiceError('invalid_request', `The forward-auth request has more than one ${name} header.`);
    value = raw[i + 1] as string;
  }
  if (value === undefined || value === '') throw new ServiceError(
    'invalid_request', `The forward-auth request lacks the ${name} header; check the proxy configuration.`);
  return value;
}

function method(value: string): string {
  if (!METHOD.test(value)) throw new ServiceError('invalid_request', 'The original request method is not an HTTP method.');
  return value;
}

function forwardedHost(request: FastifyRequest): string | undefined {
  const fwd = request.headers['x-forwarded-host'];
  return typeof fwd === 'string' && fwd !== '' ? fwd : request.headers.host;
}

/**
 * Reads the original request out of a check request of `flavor`.
 * `envoyPath` is the check request's path after `{prefix}/envoy`.
 * Throws 400 `invalid_request` when the proxy sent too little.
 */
export function originalRequest(flavor: Flavor, request: FastifyRequest, envoyPath: string): OriginalRequest {
  switch (flavor) {
    case 'nginx':
      return { method: method(single(request, 'x-original-method')), rawUrl: single(request, 'x-original-uri'),
        host: forwardedHost(request), bodyForwarded: 'never' };
    case 'traefik':
    case 'caddy':
      return { method: method(single(request, 'x-forwarded-method')), rawUrl: single(request, 'x-forwarded-uri'),
        host: forwardedHost(request), bodyForwarded: 'if-present' };
    case 'envoy': {
      const partial = request.headers['x-envoy-auth-partial-body'];
      return { method: method(request.method), rawUrl: envoyPath, host: request.headers.host, bodyForwarded: partial === 'false' ? 'yes' : 'never' };
    }
    default:
      throw new ServiceError('internal_error');
  }
}

/** The original body, or `undefined` when the proxy did not forward it. */
export function forwardedBody(original: OriginalRequest, body: Buffer | undefined): Buffer | undefined {
  if (original.bodyForwarded === 'never') return undefined;
  if (original.bodyForwarded === 'yes') return body ?? Buffer.alloc(0);
  return body !== undefined && body.length > 0 ? body : undefined;
}

/**
 * Status and extra headers of a refusal for `flavor`. NGINX (see the file
 * header): 401 or 403, and always the real status and body in headers (its
 * auth_request never passes the subrequest's body on); the body text is
 * JSON, with anything outside printable ASCII escaped as `\uXXXX`.
 */
export function refusalForFlavor(flavor: Flavor, status: number, bodyText: string): { status: number; headers: Record<string, string> } {
  if (flavor !== 'nginx') return { status, headers: {} };
  const ascii = bodyText.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return { status: status === 401 ? 401 : 403, headers: { [NGINX_REFUSAL_HEADERS.status]: String(status), [NGINX_REFUSAL_HEADERS.body]: ascii } };
}
