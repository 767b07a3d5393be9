/**
 * Method and URL override headers: request headers with which many web
 * frameworks let a client replace the request's method or URL after the
 * fact (Express `method-override`, Symfony, Rails, Laravel, ASP.NET and
 * IIS URL Rewrite, Zend/Laminas, Spring's HiddenHttpMethodFilter variants).
 * The gateway authorizes the method and path it receives, so an upstream
 * honouring `X-HTTP-Method-Override: DELETE` on an allowed GET, or
 * `X-Original-URL: /admin` on an allowed `/v1/items/1`, would run an
 * operation that was never verified.
 *
 * They never reach the upstream. `overrideHeaders: 'refuse'` (default) answers
 * a request carrying one with 400 `override_header_refused` before anything
 * else is done; `'strip'` removes them and forwards the request as received
 * (headers.ts drops them in either mode). Names are compared the CGI way
 * (case-insensitive, `_` as `-`), so `X_HTTP_Method_Override` counts too.
 * The forward-auth endpoint always refuses: the proxy in front forwards the
 * request, and the endpoint cannot remove headers from it.
 */

import { ServiceError } from '../src/errors.js';

/**
 * The override headers (lowercase, canonical dash spelling).
 *
 * @example
 * ```ts
 * // an upstream can assert it never sees them
 * for (const name of OVERRIDE_HEADERS) if (request.headers[name] !== undefined) throw new Error(`${name} reached the upstream`);
 * ```
 */
export const OVERRIDE_HEADERS: readonly string[] = ['x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url'];

/**
 * What the gateway does with a request that carries an override header: refuse it (default) or strip the headers.
 *
 * @example
 * ```ts
 * const overrideHeaders: OverrideHeaderPolicy = 'strip';   // for clients that send X-HTTP-Method-Override by habit
 * await app.register(agentAuthzGateway, { ...options, overrideHeaders });
 * ```
 */
export type OverrideHeaderPolicy = 'refuse' | 'strip';

/** The override header `name` stands for (read the CGI way, like headers.ts), or `undefined`. */
export function overrideHeaderName(name: string): string | undefined {
  const canonical = name.toLowerCase().replace(/_/g, '-');
  return OVERRIDE_HEADERS.includes(canonical) ? canonical : undefined;
}

/**
 * Throws 400 `override_header_refused` (naming the header as received) when
 * the raw header list (`IncomingMessage.rawHeaders`) has an override header.
 */
export function refuseOverrideHeaders(rawHeaders: readonly string[]): void {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length < 13 || (name.charCodeAt(0) | 0x20) !== 0x78) continue; // every override header starts with x, 13+ long
    const header = overrideHeaderName(name);
    if (header !== undefined) {
      throw new ServiceError('override_header_refused',
        `The ${header} header is not accepted: the upstream could run another method or URL than the one authorized.`,
        { header });
    }
  }
}
