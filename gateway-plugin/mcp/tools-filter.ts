/**
 * The `tools/list` filter of an MCP route (`mcp.filter_tools_list: true`, docs/mcp.md#tools-list-filter).
 *
 * For an allowed `tools/list` request the gateway asks the sidecar's AuthZEN action search once
 * (`POST /access/v1/search/action`, subject the verified agent, resource `POST <route path>`) which
 * scopes the agent's active delegation allows now, before the request is forwarded. If that answer
 * cannot be had, the request is refused (503 `verify_unavailable`, cause `action_search_failed`) and
 * the upstream never sees it. The upstream's answer then lists only the tools of `mcp.tools` whose
 * scope is among those: a tool not mapped (its call would be 403 `tool_not_mapped`) is removed too.
 *
 * Both answer forms of the Streamable HTTP transport are rewritten: an `application/json` body (read
 * whole, at most {@link MAX_ANSWER_BYTES}), and a `text/event-stream`, where the result arrives as one
 * `message` event (that event's data is replaced; every other event passes byte for byte). Only the
 * response to this request's id with a `result.tools` list is rewritten; an answer that cannot be
 * read (not JSON, `tools` not a list, over the limit) is not passed on: the connection is cut.
 */

import { StringDecoder } from 'node:string_decoder';
import { Transform } from 'node:stream';
import { ServiceError } from '../../src/errors.js';
import type { Admission, GatewayVerdict } from '../verdict.js';
import type { SidecarClient } from '../verify-client.js';
import { TOOLS_LIST } from './config.js';
import type { JsonRpcId } from './message.js';

/** Largest `tools/list` answer (or one SSE event) the filter reads: 16 MiB. */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** What one filtered `tools/list` keeps: the tools the agent may call, and the request's id. */
export interface ToolsFilter {
  readonly allowed: ReadonlySet<string>;
  readonly id: JsonRpcId;
}

/**
 * The filter for an allowed `tools/list` on a route with `filter_tools_list`, or `undefined` when
 * nothing is to be filtered. Throws 503 `verify_unavailable` (cause `action_search_failed`) when the
 * sidecar's action search gives no answer.
 */
export async function toolsListFilter(
  sidecar: SidecarClient, admission: Admission, decision: GatewayVerdict, requestId: string,
): Promise<ToolsFilter | undefined> {
  const mcp = admission.route.mcp;
  if (mcp === undefined || !mcp.filterToolsList || admission.mcp?.mcpMethod !== TOOLS_LIST) return undefined;
  // A shadow-mode route forwards what it would refuse: nothing is known to filter by.
  if (decision.kind !== 'allow') return undefined;
  const failed = (): never => {
    throw new ServiceError('verify_unavailable', undefined, { cause: 'action_search_failed' });
  };
  if (decision.agentId === undefined) return failed();
  const scopes = await sidecar.searchActions(
    decision.agentId, { type: 'http', id: `POST ${admission.target.path}` }, requestId);
  if (scopes === undefined) return failed();
  const allowed = new Set<string>();
  for (const tool of mcp.tools.values()) if (scopes.has(tool.scope)) allowed.add(tool.name);
  return { allowed, id: admission.mcp.id };
}

/** The message with its `result.tools` filtered; `undefined`: not this list's answer; throws when unreadable. */
function filterMessage(text: string, filter: ToolsFilter): string | undefined {
  const doc = JSON.parse(text) as { id?: unknown; result?: { tools?: unknown } } | null;
  if (doc === null || typeof doc !== 'object' || doc.id !== filter.id) return undefined;
  const result = doc.result;
  if (result === null || typeof result !== 'object' || result.tools === undefined) return undefined;
  if (!Array.isArray(result.tools)) throw new TypeError('tools/list result.tools is not a list');
  result.tools = result.tools.filter((tool: unknown) => {
    const name = (tool as { name?: unknown } | null)?.name;
    return typeof name === 'string' && filter.allowed.has(name);
  });
  return JSON.stringify(doc);
}

/** One SSE event (its text, blank line included) with a rewritten `message` data, or as it was. */
function filterEvent(event: string, filter: ToolsFilter): string {
  const lines = event.split(/\r\n|\r|\n/);
  let type = 'message';
  const data: string[] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  if (type !== 'message' || data.length === 0) return event;
  let rewritten: string | undefined;
  try {
    rewritten = filterMessage(data.join('\n'), filter);
  } catch {
    // Data that is not JSON is no answer to this request (the SDK sends each JSON-RPC message as JSON).
    return event;
  }
  if (rewritten === undefined) return event;
  let replaced = false;
  const out: string[] = [];
  for (const line of lines.slice(0, -2)) {
    if (line === 'data' || line.startsWith('data:')) {
      if (!replaced) out.push(`data: ${rewritten}`);
      replaced = true;
    } else out.push(line);
  }
  return `${out.join('\n')}\n\n`;
}

/** The end of the first SSE event in `text` (after its blank line), or -1. */
function eventEnd(text: string): number {
  const m = /(\r\n|\r(?!\n)|\n)(\r\n|\r(?!\n)|\n)/.exec(text);
  return m === null ? -1 : m.index + m[0].length;
}

/** A transform that filters the `tools/list` answer (see the file header); `sse` for an event stream. */
export function filterToolsAnswer(filter: ToolsFilter, sse: boolean): Transform {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  const chunks: Buffer[] = [];
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (!sse) {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) return done(new RangeError('tools/list answer over the filter limit'));
        chunks.push(chunk);
        return done();
      }
      pending += decoder.write(chunk);
      let out = '';
      for (let end = eventEnd(pending); end !== -1; end = eventEnd(pending)) {
        out += filterEvent(pending.slice(0, end), filter);
        pending = pending.slice(end);
      }
      if (pending.length > MAX_ANSWER_BYTES) return done(new RangeError('SSE event over the filter limit'));
      return done(null, out === '' ? undefined : out);
    },
    flush(done) {
      if (sse) return done(null, pending + decoder.end());
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        return done(null, filterMessage(text, filter) ?? text);
      } catch (err) {
        return done(err as Error);
      }
    },
  });
}
