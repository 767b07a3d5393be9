/**
 * `agent-authz/client`: the agent side. {@link createAgentFetch} wraps
 * `fetch` so every request to an API behind an agent-authz gateway carries a
 * fresh proof of the agent's delegation, bound to that request's operation,
 * retries once on a 401 challenge, never retries a 403 (except once after a
 * person granted the step-up approval it names, with `waitForApproval`), and
 * throws the refusal as an {@link AgentAuthzError} with the decision reason. For MCP clients, `agent-authz/client/mcp` gives
 * the SDK transport that does the same for every tool call.
 *
 * @example
 * ```ts
 * import { createAgentFetch, AgentAuthzError } from 'agent-authz/client';
 *
 * const agentFetch = createAgentFetch({
 *   sidecarUrl: 'http://127.0.0.1:8700', apiKey: process.env.PLATFORM_API_KEY!,
 *   connectionId: process.env.CONNECTION_ID!, agentId: process.env.AGENT_ID!,
 * });
 * try {
 *   console.log(await (await agentFetch('https://api.example.com/v1/items/7')).json());
 * } catch (err) {
 *   if (err instanceof AgentAuthzError) console.error(`refused: ${err.code} (${err.reason})`);
 * }
 * ```
 */

export { createAgentFetch, DEFAULT_MAX_BODY_BYTES, DEFAULT_SIDECAR_TIMEOUT_MS } from './fetch.js';
export type { AgentFetch, AgentFetchOptions } from './fetch.js';
export { AgentAuthzError } from './errors.js';
export type { AgentAuthzErrorSource, ApprovalState } from './errors.js';
export { DEFAULT_APPROVAL_POLL_MS, DEFAULT_APPROVAL_TIMEOUT_MS } from './approval.js';
export type { ApprovalWaitOptions } from './approval.js';
export { boundOperation, describeOperation } from './operation.js';
export type { AgentOperation } from './operation.js';
