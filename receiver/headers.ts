/**
 * Reading the delivery headers the receiver checks, from whatever its framework gives:
 * Node's `IncomingHttpHeaders`, a Fetch `Headers`, or a plain record. A header sent more
 * than once counts as absent, so a repeated signature or delivery id is refused.
 */

/**
 * Headers as Node (`IncomingHttpHeaders`), Fetch (`Headers`) or a plain record give them.
 *
 * ```ts
 * const headers: WebhookHeaders = request.headers;   // Node, Fastify, Express, or a Fetch Request's Headers
 * ```
 */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>;

/** One header value; `undefined` when absent or sent more than once. */
export function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const v = (headers as { get(n: string): string | null }).get(name);
    // Fetch Headers join repeated headers with ", ": a repeated signature/id header is refused that way.
    return v === null ? undefined : v;
  }
  const rec = headers as Record<string, string | string[] | undefined>;
  const lower = name.toLowerCase();
  let found: string | string[] | undefined;
  let count = 0;
  for (const k of Object.keys(rec)) {
    if (k.toLowerCase() === lower) {
      found = rec[k];
      count++;
    }
  }
  if (count !== 1 || found === undefined) return undefined;
  if (Array.isArray(found)) return found.length === 1 ? found[0] : undefined;
  return found;
}
