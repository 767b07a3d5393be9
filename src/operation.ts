/**
 * Operation-bound proofs: the operation an agent signs into a proof bundle at
 * present (`operation`, docs/proofs.md), its strict validation, and its
 * comparison with what verify is told about the request actually received
 * (`required_scope` and the context the gateway derived).
 *
 * A bound operation names the method, the body's SHA-256, and the path or
 * the MCP tool (or both), optionally the required scope, and the SHA-256 of
 * the query string when the request has one. Every member it names must equal
 * the verified request's; a member the request does not carry is a mismatch
 * (fail closed), and so is a query the operation does not name: an operation
 * without `query_sha256` is the request without a query. Pure: no I/O.
 */
import { isNormalizedPath } from './path.js';
import { isValidScope } from './scopes.js';
import type { VerifyContext } from './protocol.js';

/** An MCP tool name (the MCP specification's rule: 1–128 of `A-Z a-z 0-9 _ - .`). */
export const TOOL_NAME_RE = /^[A-Za-z0-9_.-]{1,128}$/;
/** Longest bound path (the gateway's normalized-path limit). */
export const MAX_BOUND_PATH_LENGTH = 2048;

const METHOD_RE = /^[A-Z]{1,16}$/;
const SHA256_RE = /^[0-9a-f]{64}$/;
const MEMBERS = ['scope', 'method', 'path', 'tool', 'query_sha256', 'body_sha256'] as const;

/** The operation a proof is bound to. */
export interface BoundOperation {
  /** The scope the request needs (compared with `required_scope` when given). */
  scope?: string;
  /** HTTP method, uppercase ASCII. */
  method: string;
  /** The request path in the gateway's normalized form (no query). */
  path?: string;
  /** The MCP tool of a `tools/call`. */
  tool?: string;
  /**
   * Lowercase hex SHA-256 of the query string exactly as sent (the bytes after the first `?`),
   * present only when the request has a non-empty query.
   */
  query_sha256?: string;
  /** Lowercase hex SHA-256 of the exact request body (of the empty body when there is none). */
  body_sha256: string;
}

/** A member of {@link BoundOperation}. */
export type OperationMember = (typeof MEMBERS)[number];

/** Result of {@link parseOperation}: the operation, or the member that is wrong and why. */
export type OperationCheck = { ok: true; value: BoundOperation } | { ok: false; member: string; message: string };

const fail = (member: string, message: string): OperationCheck => ({ ok: false, member, message });

/**
 * Validates an untrusted operation strictly: a plain object with only the known members,
 * `method` and `body_sha256` present, at least one of `path` and `tool`, each in its format.
 * Returns a fresh object with the members in canonical order.
 */
export function parseOperation(input: unknown): OperationCheck {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return fail('', 'must be an object');
  const proto: unknown = Object.getPrototypeOf(input);
  if (proto !== Object.prototype && proto !== null) return fail('', 'must be a plain object');
  const o = input as Record<string, unknown>;
  const extra = Object.keys(o).find((k) => !(MEMBERS as readonly string[]).includes(k));
  if (extra !== undefined) return fail(extra.slice(0, 64), 'is not a member of an operation');
  if (typeof o.method !== 'string' || !METHOD_RE.test(o.method)) return fail('method', 'must be an uppercase HTTP method');
  if (typeof o.body_sha256 !== 'string' || !SHA256_RE.test(o.body_sha256)) return fail('body_sha256', 'must be 64 lowercase hex digits');
  if (o.path === undefined && o.tool === undefined) return fail('path', 'or tool must be given');
  if (o.path !== undefined && (typeof o.path !== 'string' || !o.path.startsWith('/') || o.path.length > MAX_BOUND_PATH_LENGTH || !isNormalizedPath(o.path))) {
    return fail('path', 'must be an absolute path in the gateway\'s normalized form (docs/gateway.md, path rules)');
  }
  if (o.tool !== undefined && (typeof o.tool !== 'string' || !TOOL_NAME_RE.test(o.tool))) return fail('tool',
    'must be an MCP tool name (1-128 of A-Z a-z 0-9 _ - .)');
  if (o.scope !== undefined && !isValidScope(o.scope)) return fail('scope', 'must be a scope of the vocabulary');
  if (o.query_sha256 !== undefined && (typeof o.query_sha256 !== 'string' || !SHA256_RE.test(o.query_sha256))) {
    return fail('query_sha256', 'must be 64 lowercase hex digits');
  }
  const value: BoundOperation = { method: o.method, body_sha256: o.body_sha256 };
  if (o.path !== undefined) value.path = o.path as string;
  if (o.scope !== undefined) value.scope = o.scope as string;
  if (o.tool !== undefined) value.tool = o.tool as string;
  if (o.query_sha256 !== undefined) value.query_sha256 = o.query_sha256 as string;
  return { ok: true, value };
}

/**
 * The first member of `op` that the verified request does not match, or null when it matches.
 * `scope` is compared with `requiredScope`, every other member with the context member of the
 * same name (`method` with the context method in upper case); a missing context member is a
 * mismatch, and `query_sha256` must be absent from both or equal in both.
 */
export function operationMismatch(op: BoundOperation, requiredScope: string, ctx: VerifyContext | undefined): OperationMember | null {
  const c = ctx ?? {};
  if (op.scope !== undefined && op.scope !== requiredScope) return 'scope';
  // ASCII only: toUpperCase() maps some non-ASCII letters onto ASCII.
  if (c.method === undefined || !/^[A-Za-z]{1,16}$/.test(c.method) || c.method.toUpperCase() !== op.method) return 'method';
  if (op.path !== undefined && c.path !== op.path) return 'path';
  if (op.tool !== undefined && c.tool !== op.tool) return 'tool';
  if (op.query_sha256 !== c.query_sha256) return 'query_sha256';
  if (c.body_sha256 !== op.body_sha256) return 'body_sha256';
  return null;
}
