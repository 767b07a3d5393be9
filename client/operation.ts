/**
 * The operation a request performs, as the agent-side client computes it
 * before asking for a proof: method, path, MCP tool and the SHA-256 of the
 * body. The gateway derives the same facts from what it receives.
 *
 * Today it names the operation in {@link AgentAuthzError}s; when the sidecar's
 * present accepts an `operation` to sign into the proof (operation-bound
 * proofs, issue 22 part 2), the client sends exactly this object.
 */

import { createHash } from 'node:crypto';

/**
 * What one request does.
 *
 * @example
 * ```ts
 * catch (err) { if (err instanceof AgentAuthzError) console.error(err.operation?.method, err.operation?.path, err.operation?.tool); }
 * ```
 */
export interface AgentOperation {
  /** HTTP method, uppercase. */
  readonly method: string;
  /** The request path as sent (no query). */
  readonly path: string;
  /** The MCP tool of a JSON-RPC `tools/call` body. */
  readonly tool: string | undefined;
  /** Lowercase hex SHA-256 of the body bytes (of the empty body when there is none). */
  readonly body_sha256: string;
}

/** The tool name of a JSON-RPC `tools/call` body, or `undefined`. */
function toolOf(body: Uint8Array | undefined, contentType: string | null): string | undefined {
  if (body === undefined || body.length === 0 || !/^application\/(?:[a-z0-9.+-]*\+)?json\b/i.test(contentType ?? '')) return undefined;
  try {
    const msg = JSON.parse(Buffer.from(body).toString('utf8')) as { method?: unknown; params?: { name?: unknown } };
    return msg.method === 'tools/call' && typeof msg.params?.name === 'string' ? msg.params.name : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Describes the operation of a request about to be sent.
 *
 * @example
 * ```ts
 * const op = describeOperation('POST', new URL('https://api.example.com/mcp'), body, 'application/json');
 * // { method: 'POST', path: '/mcp', tool: 'send_payment', body_sha256: '…' }
 * ```
 */
export function describeOperation(method: string, url: URL, body: Uint8Array | undefined, contentType: string | null): AgentOperation {
  return {
    method: method.toUpperCase(),
    path: url.pathname,
    tool: toolOf(body, contentType),
    body_sha256: createHash('sha256').update(body ?? new Uint8Array(0)).digest('hex'),
  };
}
