/**
 * `agent-authz/client/mcp`: the MCP SDK transport for agents. A
 * `StreamableHTTPClientTransport` of the official SDK
 * (`@modelcontextprotocol/sdk`, an optional peer dependency) whose every
 * HTTP request, and so every tool call, goes through {@link createAgentFetch}:
 * a fresh proof per request, one retry on a 401 challenge, and a refused
 * tool call rejecting with an {@link AgentAuthzError} that names the tool and
 * the decision reason.
 *
 * Answers to the server's requests (sampling, elicitation, roots: JSON-RPC
 * responses the client POSTs) and notifications (`notifications/initialized`,
 * `notifications/cancelled`, ...) in a session the gateway bound to this agent
 * carry a session proof instead (`X-Service-Session-Proof`, an HMAC of the
 * body under the session key the gateway handed out with the session id;
 * docs/mcp.md#answers-to-server-requests): no challenge, present or verify
 * per answer. Without a session key (a gateway before issue 31, forward-auth
 * mode), or when the gateway refuses the session proof (401 or 403: a
 * notification that is not public there), they get a full proof.
 */

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { StreamableHTTPClientTransportOptions } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { utf8ToBytes } from '@noble/hashes/utils.js';
import { createAgentFetch } from './fetch.js';
import type { AgentFetch, AgentFetchOptions } from './fetch.js';

const SESSION_HEADER = 'mcp-session-id';
const SESSION_KEY_HEADER = 'x-service-session-key';
const SESSION_PROOF_HEADER = 'x-service-session-proof';
/** Most session keys one transport remembers (a transport has one session at a time; re-initializing adds one). */
const MAX_SESSION_KEYS = 16;

/** Bytes of base64url text (atob: every runtime the client supports has it; no Buffer). */
function fromBase64Url(text: string): Uint8Array {
  const bin = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** Unpadded base64url of `bytes` (btoa, as above). */
function toBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The session proof: HMAC-SHA-256 of the exact body under the session key (docs/mcp.md), base64url. */
function sessionProof(key: string, body: string): string {
  return toBase64Url(hmac(sha256, fromBase64Url(key), utf8ToBytes(body)));
}

/**
 * True for the text of one JSON-RPC response (an answer to a server request) or notification: the session proves them.
 */
function isSessionProved(body: string): boolean {
  try {
    const msg = JSON.parse(body) as Record<string, unknown> | null;
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return false;
    if (typeof msg.method === 'string') return msg.id === undefined;
    return msg.method === undefined && msg.id !== undefined && (msg.result !== undefined || msg.error !== undefined);
  } catch {
    return false;
  }
}

/**
 * The agent fetch, plus session proofs for answers and notifications: remembers
 * the session key the gateway hands out with a session id, and sends them in
 * that session with the HMAC of the body (falling back to a full proof on a 401 or 403).
 */
function sessionFetch(agentFetch: AgentFetch, send: typeof fetch): AgentFetch {
  const keys = new Map<string, string>();
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    const session = headers.get(SESSION_HEADER);
    const key = session === null ? undefined : keys.get(session);
    const body = init?.body;
    if (key !== undefined && init?.method === 'POST' && typeof body === 'string' && isSessionProved(body)) {
      headers.set(SESSION_PROOF_HEADER, sessionProof(key, body));
      const res = await send(input, { ...init, headers });
      if (res.status !== 403 && res.status !== 401) return res;
      await res.body?.cancel();
    }
    const res = await agentFetch(input, init);
    const token = res.headers.get(SESSION_HEADER);
    const issued = res.headers.get(SESSION_KEY_HEADER);
    if (token !== null && issued !== null) {
      if (keys.size >= MAX_SESSION_KEYS) keys.delete(keys.keys().next().value as string);
      keys.set(token, issued);
    }
    if (init?.method === 'DELETE' && session !== null) keys.delete(session);
    return res;
  };
}

/**
 * Options of {@link createAgentMcpTransport}: the agent's {@link AgentFetchOptions},
 * plus options for the SDK's transport (its `fetch` is the agent's).
 *
 * @example
 * ```ts
 * const options: AgentMcpTransportOptions = {
 *   ...agentOptions,
 *   transport: { requestInit: { headers: { 'user-agent': 'my-agent/1.0' } } },
 * };
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
export function createAgentMcpTransport(
  url: string | URL,
  options: AgentMcpTransportOptions,
): StreamableHTTPClientTransport {
  const { transport, ...agent } = options;
  const agentFetch = createAgentFetch(agent);
  return new StreamableHTTPClientTransport(new URL(url), {
    ...transport,
    fetch: sessionFetch(agentFetch, agent.fetch ?? globalThis.fetch),
  });
}
