/**
 * The `mcp` member of a route entry: an MCP endpoint (Streamable HTTP
 * transport, JSON-RPC 2.0 over POST) whose tool calls map to scopes.
 *
 * ```yaml
 * - method: [POST, GET, DELETE]
 *   path: /mcp
 *   scope: execute:tool              # protocol methods, GET (SSE stream), DELETE (session end)
 *   mcp:
 *     public: [notifications/initialized, ping]
 *     body_limit_bytes: 4194304          # optional: largest message (default: the gateway's body limit)
 *     stream_idle_timeout_ms: 300000     # optional: an SSE stream with no bytes for this long is ended
 *     session_ttl_ms: 86400000           # optional: lifetime of a session bound to its agent
 *     answer_overflow_bytes: 4194304     # optional: largest answer read past the limit (default 4 × the limit)
 *     tools:
 *       get_weather: data:read                      # shorthand: the scope
 *       send_payment:
 *         scope: payments:send
 *         context: { amount: /amount, currency: /currency }   # JSON pointers into params.arguments
 *       read_file: { scope: files:read, context: { resource: /path } }
 * ```
 *
 * Validated once at registration with path-named `TypeError`s, like the rest
 * of the route table. docs/mcp.md documents the semantics.
 */

import {
  at, checkBoolean, checkInt, checkJsonPointer, checkObject, checkScope, checkString, fail, isPlainObject, item,
} from '../validate.js';
import { MIN_SESSION_SECRET_BYTES } from './session.js';
import { checkRouteMode } from '../shadow.js';
import type { RouteMode } from '../shadow.js';

/**
 * One tool of an MCP route, as written in options or the config file.
 *
 * @example
 * ```ts
 * const sendPayment: McpToolEntry = { scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } };
 * ```
 */
export interface McpToolEntry {
  /** The scope a `tools/call` of this tool requires. */
  scope: string;
  /**
   * JSON pointers into the call's `params.arguments` that feed the constraint
   * context: `amount` / `currency` (as for route bodies), `tenant`, and
   * `resource` (an absolute path that becomes the context `path`).
   */
  context?: { amount?: string; currency?: string; tenant?: string; resource?: string };
  /**
   * `'shadow'`: calls of this tool are verified but forwarded whatever the decision (shadow.ts,
   * docs/gateway.md "Rolling out: shadow mode"); refused for a sensitive scope. Default: the route's mode.
   */
  mode?: RouteMode;
}

/**
 * The `mcp` member of a route entry (docs/mcp.md).
 *
 * @example
 * ```ts
 * const mcp: McpRouteOptions = {
 *   public: ['initialize', 'notifications/initialized', 'ping'],
 *   tools: {
 *     get_weather: 'data:read',
 *     send_payment: { scope: 'payments:send', context: { amount: '/amount', currency: '/currency' } },
 *   },
 * };
 * const route: RouteEntry = { method: ['POST', 'GET', 'DELETE'], path: '/mcp', scope: 'execute:tool', mcp };
 * ```
 */
export interface McpRouteOptions {
  /** Tool name → required scope (or `{scope, context}`). A tool not listed is refused (403 `tool_not_mapped`). */
  tools: Record<string, string | McpToolEntry>;
  /**
   * JSON-RPC methods that pass without a proof, for example `initialize`,
   * `notifications/initialized`, `ping`; `notifications/*` covers every
   * notification. `tools/call` and `initialize` (it opens a session bound to
   * the agent that sent it) can never be public.
   */
  public?: string[];
  /** Largest POSTed message in bytes (default: the gateway's `bodyLimit`). */
  body_limit_bytes?: number;
  /**
   * An SSE answer with no bytes from the upstream for this long is ended
   * (default {@link DEFAULT_STREAM_IDLE_TIMEOUT_MS}).
   */
  stream_idle_timeout_ms?: number;
  /** Lifetime of a session token from `initialize` (default {@link DEFAULT_SESSION_TTL_MS}). */
  session_ttl_ms?: number;
  /**
   * Largest session-proved answer read past the body limit to answer the server with an error
   * (default 4 × the body limit, at most 64 MiB; mcp/body.ts). Beyond, plain 413.
   */
  answer_overflow_bytes?: number;
  /**
   * `true`: an allowed `tools/list` answer lists only the mapped tools whose scope the agent's
   * delegation allows now (mcp/tools-filter.ts, docs/mcp.md). Default `false`.
   */
  filter_tools_list?: boolean;
}

/** A compiled tool. */
export interface McpTool {
  readonly name: string;
  readonly scope: string;
  readonly amountPointer: string | undefined;
  readonly currencyPointer: string | undefined;
  readonly tenantPointer: string | undefined;
  readonly resourcePointer: string | undefined;
  /** `shadow` when the tool itself is in shadow mode (the route's mode applies too). */
  readonly mode: RouteMode;
}

/** A compiled `mcp` member. */
export interface McpRoute {
  readonly tools: ReadonlyMap<string, McpTool>;
  readonly publicMethods: ReadonlySet<string>;
  /** `notifications/*` was listed: every notification is public. */
  readonly publicNotifications: boolean;
  /** Largest POSTed message in bytes; `undefined`: the gateway's body limit. */
  readonly bodyLimit: number | undefined;
  /** Idle limit of an SSE answer in ms. */
  readonly streamIdleMs: number;
  /** Lifetime of a session token in ms. */
  readonly sessionTtlMs: number;
  /** Largest answer read past the body limit; `undefined`: 4 × the limit. */
  readonly answerOverflowBytes: number | undefined;
  /** `filter_tools_list`: `tools/list` answers are filtered by the agent's scopes. */
  readonly filterToolsList: boolean;
}

/** Default `stream_idle_timeout_ms`: 5 minutes (the SDK client re-opens an ended GET stream with `Last-Event-ID`). */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 300_000;
/** Default `session_ttl_ms`: 24 hours. */
export const DEFAULT_SESSION_TTL_MS = 86_400_000;
/** The JSON-RPC method that opens a session. */
export const INITIALIZE = 'initialize';

/** Tool names (MCP: 1–128 characters of `A-Z a-z 0-9 _ - .`). */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
/** JSON-RPC method names accepted in `public`. */
const METHOD_PATTERN = /^[A-Za-z0-9_./$-]{1,128}$/;
/** The JSON-RPC method of a tool call. */
export const TOOLS_CALL = 'tools/call';
/** The JSON-RPC method that lists the tools. */
export const TOOLS_LIST = 'tools/list';

function compileTool(name: string, value: unknown, path: string): McpTool {
  if (typeof value === 'string') {
    return {
      name,
      scope: checkScope(value, path),
      amountPointer: undefined,
      currencyPointer: undefined,
      tenantPointer: undefined,
      resourcePointer: undefined,
      mode: 'enforce',
    };
  }
  const entry = checkObject(value, path, ['scope', 'context', 'mode']);
  if (entry.scope === undefined) fail(at(path, 'scope'), 'is required');
  const scope = checkScope(entry.scope, at(path, 'scope'));
  const ctxPath = at(path, 'context');
  const ctx = entry.context === undefined
    ? {}
    : checkObject(entry.context, ctxPath, ['amount', 'currency', 'tenant', 'resource']);
  const pointer = (key: string): string | undefined => (
    ctx[key] === undefined ? undefined : checkJsonPointer(ctx[key], at(ctxPath, key))
  );
  return {
    name,
    scope,
    amountPointer: pointer('amount'),
    currencyPointer: pointer('currency'),
    tenantPointer: pointer('tenant'),
    resourcePointer: pointer('resource'),
    mode: checkRouteMode(entry.mode, at(path, 'mode')),
  };
}

/** Validates and compiles the `mcp` member of a route entry. Throws a path-named `TypeError`. */
export function compileMcp(value: unknown, path: string): McpRoute {
  const mcp = checkObject(value, path, [
    'tools', 'public', 'body_limit_bytes', 'stream_idle_timeout_ms', 'session_ttl_ms', 'answer_overflow_bytes',
    'filter_tools_list',
  ]);
  const toolsPath = at(path, 'tools');
  if (!isPlainObject(mcp.tools) || Object.keys(mcp.tools).length === 0) {
    fail(toolsPath, 'must map at least one tool name to a scope');
  }
  const tools = new Map<string, McpTool>();
  for (const [name, entry] of Object.entries(mcp.tools)) {
    if (!TOOL_NAME_PATTERN.test(name)) {
      fail(at(toolsPath, name), 'is not an MCP tool name (1-128 characters of A-Z a-z 0-9 _ - .)');
    }
    tools.set(name, compileTool(name, entry, at(toolsPath, name)));
  }
  const publicMethods = new Set<string>();
  const list = mcp.public ?? [];
  if (!Array.isArray(list)) fail(at(path, 'public'), 'must be a list of JSON-RPC method names');
  list.forEach((method: unknown, i) => {
    const where = item(at(path, 'public'), i);
    if (typeof method !== 'string' || (method !== 'notifications/*' && !METHOD_PATTERN.test(method))) {
      fail(where, 'must be a JSON-RPC method name such as "ping" or "notifications/*"');
    }
    if (method === TOOLS_CALL) fail(where, 'tools/call cannot be public: every tool call needs its tool\'s scope');
    if (method === INITIALIZE) {
      fail(where, 'initialize cannot be public: it opens a session bound to the agent that sent it');
    }
    if (publicMethods.has(method)) fail(where, `duplicate method ${method}`);
    publicMethods.add(method);
  });
  const filterToolsList = checkBoolean(mcp.filter_tools_list, at(path, 'filter_tools_list'), false);
  if (filterToolsList && publicMethods.has(TOOLS_LIST)) {
    fail(at(path, 'public'), 'tools/list cannot be public with filter_tools_list: the filter needs the agent');
  }
  const limit = mcp.body_limit_bytes === undefined
    ? undefined
    : checkInt(mcp.body_limit_bytes, at(path, 'body_limit_bytes'), 0, 1_073_741_824, 0);
  return {
    tools,
    publicMethods,
    publicNotifications: publicMethods.has('notifications/*'),
    bodyLimit: limit,
    streamIdleMs: checkInt(
      mcp.stream_idle_timeout_ms, at(path, 'stream_idle_timeout_ms'), 1, 86_400_000, DEFAULT_STREAM_IDLE_TIMEOUT_MS,
    ),
    sessionTtlMs: checkInt(
      mcp.session_ttl_ms, at(path, 'session_ttl_ms'), 1_000, 2_592_000_000, DEFAULT_SESSION_TTL_MS,
    ),
    answerOverflowBytes: mcp.answer_overflow_bytes === undefined
      ? undefined
      : checkInt(mcp.answer_overflow_bytes, at(path, 'answer_overflow_bytes'), 0, 67_108_864, 0),
    filterToolsList,
  };
}

/** True when JSON-RPC `method` passes without a proof on this route. */
export function isPublicMethod(mcp: McpRoute, method: string): boolean {
  return mcp.publicMethods.has(method) || (mcp.publicNotifications && method.startsWith('notifications/'));
}

/**
 * Validates the gateway's MCP session secret (`mcpSessionSecret`): at least
 * {@link MIN_SESSION_SECRET_BYTES} bytes (UTF-8), at most 4096, and never the
 * sidecar API key (its agents hold that). Throws a path-named `TypeError`.
 */
export function checkSessionSecret(value: unknown, path: string, apiKey: string): Buffer {
  const secret = Buffer.from(checkString(value, path), 'utf8');
  if (secret.length < MIN_SESSION_SECRET_BYTES || secret.length > 4096) {
    fail(path, `must be ${MIN_SESSION_SECRET_BYTES} to 4096 bytes (for example: openssl rand -base64 48)`);
  }
  if (secret.equals(Buffer.from(apiKey, 'utf8'))) {
    fail(path, 'must not be the sidecar API key (the agents of its connection hold it)');
  }
  return secret;
}
