/**
 * Reading one MCP message (JSON-RPC 2.0, Streamable HTTP transport) from a
 * POST body, strictly, and deriving a tool call's constraint context from its
 * arguments.
 *
 * - The body must be `application/json` (else 415 `unsupported_media_type`)
 *   and strict JSON (duplicate keys refused: the gateway and the MCP server
 *   must read the same tool name and arguments), else 400 `invalid_request`.
 * - A JSON array is a JSON-RPC batch: 400 `batch_not_supported`. MCP removed
 *   batching in protocol version 2025-06-18, and one proof authorizes one
 *   operation (verify spends its challenge), so a batch could never be
 *   checked call by call.
 * - One message: a request (`method` + `id`), a notification (`method`, no
 *   `id`) or a response (`id` + `result` or `error`), with `jsonrpc: "2.0"`;
 *   ids are strings (1–256 characters) or safe integers.
 * - `tools/call`: `params.name` is the tool; `params.arguments` (an object, or
 *   absent) feeds the context through the tool's JSON pointers.
 */

import { ServiceError } from '../../src/errors.js';
import type { VerifyContext } from '../../src/protocol.js';
import { amountAt, currencyAt, isJsonMediaType, TENANT_PATTERN } from '../context.js';
import { JsonNumber, JsonSyntaxError, parseStrictJson, resolvePointer } from '../json.js';
import type { JsonValue } from '../json.js';
import { MAX_PATH_LENGTH, isNormalizedPath } from '../../src/path.js';
import { TOOL_NAME_PATTERN, TOOLS_CALL } from './config.js';
import type { McpTool } from './config.js';

/** A JSON-RPC id as echoed in error responses. */
export type JsonRpcId = string | number | null;

/** What is known about the JSON-RPC message of a request, for the refusal envelope. */
export interface McpFacts {
  /** True once the body parsed as JSON (a refusal before that is a JSON-RPC parse error). */
  parsed: boolean;
  /** The message's id (`null` for notifications, responses without one, and unreadable messages). */
  id: JsonRpcId;
  /** The tool of a `tools/call` (only a well-formed tool name is kept). */
  tool: string | undefined;
  /** `a2a`: a POST to an A2A route (a2a/message.ts; the refusal uses A2A's JSON-RPC codes, refusal.ts). */
  protocol?: 'a2a';
  /** The A2A method, once recognised. */
  method?: string;
  /** The MCP method of a request (not echoed in refusals; the `tools/list` filter reads it). */
  mcpMethod?: string;
}

/** One classified MCP message. */
export interface McpMessage {
  readonly kind: 'request' | 'notification' | 'response';
  readonly method: string | undefined;
  /** `params.name` of a `tools/call`. */
  readonly tool: string | undefined;
  /** `params.arguments` of a `tools/call` (an object; `{}` when absent). */
  readonly arguments: JsonValue | undefined;
  /** The id of a response (an answer to the server's request); refusals still carry `null` (docs/mcp.md#refusals). */
  readonly answers: JsonRpcId | undefined;
}

const MAX_ID_LENGTH = 256;

function invalid(message: string): never {
  throw new ServiceError('invalid_request', message);
}

function isObject(v: JsonValue | undefined): v is { [key: string]: JsonValue } {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof JsonNumber);
}

function readId(value: JsonValue): JsonRpcId {
  if (typeof value === 'string' && value.length >= 1 && value.length <= MAX_ID_LENGTH) return value;
  if (
    value instanceof JsonNumber
    && /^-?(0|[1-9][0-9]{0,15})$/.test(value.text)
    && Number.isSafeInteger(Number(value.text))
  ) return Number(value.text);
  return invalid('The JSON-RPC id must be a string or an integer.');
}

/**
 * Parses and classifies the POST body of an MCP route. Records the id and
 * tool in `facts` as soon as they are known. Throws a {@link ServiceError}.
 */
export function readMcpMessage(body: Buffer, contentType: string | undefined, facts: McpFacts): McpMessage {
  if (!isJsonMediaType(contentType)) {
    throw new ServiceError('unsupported_media_type', 'An MCP message must be sent as application/json.');
  }
  let doc: JsonValue;
  try {
    doc = parseStrictJson(body);
  } catch (err) {
    if (err instanceof JsonSyntaxError) invalid('The MCP message is not strict JSON (syntax error or duplicate keys).');
    throw err;
  }
  facts.parsed = true;
  if (Array.isArray(doc)) throw new ServiceError('batch_not_supported');
  if (!isObject(doc)) invalid('The MCP message must be a JSON-RPC object.');
  const method = doc.method;
  // A refusal of a response carries id null: its id names the server's request, not a request of the client.
  const id = doc.id === undefined || (doc.id === null && method === undefined) ? null : readId(doc.id);
  if (method !== undefined || (doc.result === undefined && doc.error === undefined)) facts.id = id;
  if (doc.jsonrpc !== '2.0') invalid('The MCP message must have "jsonrpc": "2.0".');
  if (method === undefined) {
    if (doc.id === undefined || (doc.result === undefined) === (doc.error === undefined)) {
      invalid('A JSON-RPC message needs a method, or an id with a result or an error.');
    }
    return { kind: 'response', method: undefined, tool: undefined, arguments: undefined, answers: id };
  }
  if (typeof method !== 'string' || method.length === 0 || method.length > 256) {
    invalid('The JSON-RPC method must be a non-empty string.');
  }
  const kind = doc.id === undefined ? 'notification' : 'request';
  if (kind === 'request') facts.mcpMethod = method;
  if (method !== TOOLS_CALL) return { kind, method, tool: undefined, arguments: undefined, answers: undefined };
  if (kind !== 'request') invalid('tools/call must be a request with an id.');
  const params = doc.params;
  if (!isObject(params) || typeof params.name !== 'string') invalid('tools/call needs params.name.');
  const name = params.name;
  if (TOOL_NAME_PATTERN.test(name)) facts.tool = name;
  const args = params.arguments;
  if (args !== undefined && !isObject(args)) invalid('tools/call params.arguments must be an object.');
  return { kind, method, tool: name, arguments: args ?? Object.create(null) as JsonValue, answers: undefined };
}

/** The tool-argument part of the constraint context (members only when the tool maps them and they resolve). */
export type ToolContext = Pick<VerifyContext, 'amount' | 'currency' | 'tenant' | 'path'>;

/**
 * Derives amount, currency, tenant and the resource (as the context `path`)
 * from a tool call's arguments with the tool's pointers. A pointer that
 * resolves to nothing adds nothing; a value of the wrong shape is 400
 * `invalid_request`. The resource must be an absolute path already in the
 * gateway's normalized form (no dot segments, encoded slashes, `;`, raw
 * spaces or non-ASCII), so a `path_prefixes` constraint sees exactly what the
 * tool will read.
 */
export function toolContext(tool: McpTool, args: JsonValue): ToolContext {
  const out: ToolContext = {};
  const where = (pointer: string): string => `params.arguments${pointer}`;
  if (tool.amountPointer !== undefined) {
    const amount = amountAt(args, tool.amountPointer, where(tool.amountPointer));
    if (amount !== undefined) out.amount = amount;
  }
  if (tool.currencyPointer !== undefined) {
    const currency = currencyAt(args, tool.currencyPointer, where(tool.currencyPointer));
    if (currency !== undefined) out.currency = currency;
  }
  if (tool.tenantPointer !== undefined) {
    const tenant = resolvePointer(args, tool.tenantPointer);
    if (tenant !== undefined) {
      if (typeof tenant !== 'string' || !TENANT_PATTERN.test(tenant)) {
        invalid(`The tenant at ${where(tool.tenantPointer)} is not a tenant id.`);
      }
      out.tenant = tenant;
    }
  }
  if (tool.resourcePointer !== undefined) {
    const resource = resolvePointer(args, tool.resourcePointer);
    if (resource !== undefined) {
      if (
        typeof resource !== 'string'
        || !resource.startsWith('/')
        || resource.length > MAX_PATH_LENGTH
        || !isNormalizedPath(resource)
      ) {
        invalid(`The resource at ${where(tool.resourcePointer)} is not an absolute path in normalized form.`);
      }
      out.path = resource;
    }
  }
  return out;
}

const ID = String.raw`(-?(?:0|[1-9][0-9]{0,15})|"[^"\\\x00-\x1f]{1,256}")`;
/** A response whose `id` leads: `{"jsonrpc":"2.0","id":7,"result":` (the order most JSON-RPC libraries write). */
const ID_FIRST = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${
  ID
}\s*,\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"\s*:`);
/** A response that starts with its result or error... */
const RESULT_FIRST = /^\s*\{\s*"(?:result|error)"\s*:/;
/** ...and ends with its `id` (`{result, jsonrpc, id}`: the order of the official MCP SDK). */
const ID_LAST = new RegExp(String.raw`,\s*"id"\s*:\s*${ID}\s*\}\s*$`);

function idValue(text: string | undefined): JsonRpcId | undefined {
  if (text === undefined) return undefined;
  if (text.startsWith('"')) return text.slice(1, -1);
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * The id of a JSON-RPC response too large to read whole, from its first and
 * last bytes: `undefined` unless the message is recognizably a response
 * whose top-level `id` leads or ends it. In valid JSON an unescaped `"id"`
 * key followed by the closing brace of the message is the top-level id.
 */
export function answerIdOf(head: Buffer, tail: Buffer): JsonRpcId | undefined {
  const start = head.toString('latin1');
  const first = ID_FIRST.exec(start);
  if (first !== null) return idValue(first[1]);
  if (!RESULT_FIRST.test(start)) return undefined;
  return idValue(ID_LAST.exec(tail.toString('latin1'))?.[1]);
}
