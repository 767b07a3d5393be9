/**
 * `agent-authz/client/a2a`: the agent side of A2A through the gateway
 * (docs/a2a.md). {@link createAgentA2aFetch} is a `fetch` for the A2A SDK's
 * client transports (`@a2a-js/sdk`: `JsonRpcTransportFactory({ fetchImpl })`)
 * or any JSON-RPC client: every A2A call (each POST of a JSON-RPC request)
 * carries a fresh proof from {@link createAgentFetch}, bound to the request's
 * body hash, so to its method and, for a task, its task id: a proof made for
 * `GetTask` of one task cannot be spent on `CancelTask` or on another task.
 * A refusal (the gateway's JSON-RPC error) rejects with an
 * {@link AgentAuthzError} whose `details.method` names the A2A method.
 *
 * The agent card (`GET …/.well-known/agent-card.json`, which the gateway
 * passes without a proof) is fetched without one: no challenge is spent on it.
 * No runtime dependency: the SDK is the caller's.
 */

import { createAgentFetch } from './fetch.js';
import type { AgentFetch, AgentFetchOptions } from './fetch.js';

/**
 * The well-known path of an A2A agent card (A2A specification, section 8.2), fetched without a proof.
 *
 * @example
 * ```ts
 * const card = await (await fetch(new URL(AGENT_CARD_PATH, 'https://agents.example.com'))).json();
 * ```
 */
export const AGENT_CARD_PATH = '/.well-known/agent-card.json';

function isAgentCard(input: string | URL | Request, init: RequestInit | undefined): boolean {
  const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  if (method !== 'GET') return false;
  const url = input instanceof Request ? input.url : String(input);
  try {
    return new URL(url).pathname.endsWith(AGENT_CARD_PATH);
  } catch {
    return false;
  }
}

/**
 * A `fetch` that proves every A2A call (see the file header).
 *
 * @example
 * ```ts
 * import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
 * import { createAgentA2aFetch } from 'agent-authz/client/a2a';
 *
 * const fetchImpl = createAgentA2aFetch({
 *   sidecarUrl: 'http://127.0.0.1:8700', apiKey: process.env.PLATFORM_API_KEY!,
 *   connectionId: process.env.CONNECTION_ID!, agentId: process.env.AGENT_ID!,
 * });
 * const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
 *   transports: [new JsonRpcTransportFactory({ fetchImpl })],
 * }));
 * const client = await factory.createFromUrl('https://agents.example.com');
 * ```
 */
export function createAgentA2aFetch(options: AgentFetchOptions): AgentFetch {
  const agentFetch = createAgentFetch(options);
  const send = options.fetch ?? globalThis.fetch;
  return (input, init) => (isAgentCard(input, init) ? send(input, init) : agentFetch(input, init));
}
