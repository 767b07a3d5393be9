/**
 * The operation a request performs, as the agent-side client computes it
 * before asking for a proof: method, path, MCP tool, and the SHA-256 of the
 * query string (when there is one) and of the body. The gateway derives the
 * same facts from what it receives.
 *
 * {@link boundOperation} turns it into the `operation` present signs into the
 * proof (operation-bound proofs, docs/proofs.md): method, body hash, and the
 * MCP tool for a `tools/call` (the gateway may send a tool's resource, not
 * the endpoint, as the context path) or else the path in the gateway's
 * normalized form (src/path.ts, the gateway's own normalizer).
 *
 * No `node:` import and no Node global (`Buffer`): the client runs in Node, Deno, Bun, browsers and
 * edge runtimes. SHA-256 is @noble/hashes' (synchronous, audited, the same bytes as node:crypto's),
 * bundled into @agent-authz/client so the package has no runtime dependency (docs/architecture.md).
 */

import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import { normalizePath } from '../src/path.js';

/** Lowercase hex SHA-256 of `data` (a string is hashed as its UTF-8 bytes). */
function sha256Hex(data: Uint8Array | string): string {
  return bytesToHex(sha256(typeof data === 'string' ? utf8ToBytes(data) : data));
}

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
  /** Lowercase hex SHA-256 of the query string as sent (after `?`), or `undefined` without one. */
  readonly query_sha256: string | undefined;
  /** Lowercase hex SHA-256 of the body bytes (of the empty body when there is none). */
  readonly body_sha256: string;
}

/** The tool name of a JSON-RPC `tools/call` body, or `undefined`. */
function toolOf(body: Uint8Array | undefined, contentType: string | null): string | undefined {
  if (body === undefined || body.length === 0 || !/^application\/(?:[a-z0-9.+-]*\+)?json\b/i.test(contentType ?? '')) return undefined;
  try {
    const msg = JSON.parse(new TextDecoder().decode(body)) as { method?: unknown; params?: { name?: unknown } };
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
 * // { method: 'POST', path: '/mcp', tool: 'send_payment', query_sha256: undefined, body_sha256: '…' }
 * ```
 */
export function describeOperation(method: string, url: URL, body: Uint8Array | undefined, contentType: string | null): AgentOperation {
  return {
    method: method.toUpperCase(),
    path: url.pathname,
    tool: toolOf(body, contentType),
    // The URL's serialized query is what fetch sends, byte for byte.
    query_sha256: url.search.length > 1 ? sha256Hex(url.search.slice(1)) : undefined,
    body_sha256: sha256Hex(body ?? new Uint8Array(0)),
  };
}

/**
 * The operation to sign into the proof for `op` (the `operation` member of
 * present, docs/proofs.md; with `query_sha256` when the URL has a query), or
 * `undefined` when the path has no normalized form (the gateway refuses such
 * a path as `ambiguous_path` before verify).
 *
 * @example
 * ```ts
 * boundOperation(describeOperation('GET', new URL('https://api.example.com/v1/%69tems/7'), undefined, null));
 * // { method: 'GET', path: '/v1/items/7', body_sha256: 'e3b0c4…' }
 * ```
 */
export function boundOperation(op: AgentOperation): { method: string; body_sha256: string; path?: string; tool?: string; query_sha256?: string } | undefined {
  const query = op.query_sha256 === undefined ? {} : { query_sha256: op.query_sha256 };
  if (op.tool !== undefined) return { method: op.method, tool: op.tool, ...query, body_sha256: op.body_sha256 };
  try {
    return { method: op.method, path: normalizePath(op.path), ...query, body_sha256: op.body_sha256 };
  } catch {
    return undefined;
  }
}
