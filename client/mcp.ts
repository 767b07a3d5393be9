/**
 * `agent-authz/client/mcp`: the MCP SDK transport for agents. A
 * `StreamableHTTPClientTransport` of the official SDK
 * (`@modelcontextprotocol/sdk`, an optional peer dependency) whose every
 * HTTP request, and so every tool call, goes through {@link createAgentFetch}:
 * a fresh proof per request, one retry on a 401 challenge, and a refused
 * tool call rejecting with an {@link AgentAuthzError} that names the tool and
 * the decision reason.
 */

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { StreamableHTTPClientTransportOptions } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgentFetch } from './fetch.js';
import type { AgentFetchOptions } from './fetch.js';

/**
 * Options of {@link createAgentMcpTransport}: the agent's {@link AgentFetchOptions},
 * plus options for the SDK's transport (its `fetch` is the agent's).
 *
 * @example
 * ```ts
 * const options: AgentMcpTransportOptions = { ...agentOptions, transport: { requestInit: { headers: { 'user-agent': 'my-agent/1.0' } } } };
 * ```
 */
export interface AgentMcpTransportOptions extends AgentFetchOptions {
  /** Options passed to the SDK's `StreamableHTTPClientTransport` (except `fetch`). */
  transport?: Omit<StreamableHTTPClientTransportOptions, 'fetch'>;
}

/**
 * Creates the SDK's Streamable HTTP client transport for `url` with the
 * agent's proofs on every request.
 *
 * @example
 * ```ts
 * import { Client } from '@modelcontextprotocol/sdk/client/index.js';
 * import { createAgentMcpTransport } from 'agent-authz/client/mcp';
 *
 * const client = new Client({ name: 'my-agent', version: '1.0.0' });
 * await client.connect(createAgentMcpTransport('https://tools.example.com/mcp', {
 *   sidecarUrl: 'http://127.0.0.1:8700', apiKey: process.env.PLATFORM_API_KEY!,
 *   connectionId: process.env.CONNECTION_ID!, agentId: process.env.AGENT_ID!,
 * }));
 * const result = await client.callTool({ name: 'get_weather', arguments: { city: 'Lisbon' } });
 * ```
 */
export function createAgentMcpTransport(url: string | URL, options: AgentMcpTransportOptions): StreamableHTTPClientTransport {
  const { transport, ...agent } = options;
  return new StreamableHTTPClientTransport(new URL(url), { ...transport, fetch: createAgentFetch(agent) });
}
