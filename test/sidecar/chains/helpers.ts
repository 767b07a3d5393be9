/**
 * Helpers of the sub-delegation tests (docs/certificates.md, "Sub-delegation"):
 * a flow whose certificate grants the right to delegate, agents added to its
 * connection, sub-delegation through the API with the platform's key, and a
 * proof of any agent of the chain. Real sidecar, real HTTP on loopback.
 */
import type { Flow, Res } from '../../helpers/sidecar.js';
import { Client, onboard } from '../../helpers/sidecar.js';
import type { TestSidecar } from '../../helpers/sidecar.js';
import { bundleFor } from '../decide/helpers.js';
import type { Bundle } from '../decide/helpers.js';

/** What the account holder approves for the first agent. */
export interface RootGrant {
  approve?: string[];
  constraints?: unknown;
  expiresAt?: string;
  maxDepth?: number;
  scopes?: string[];
}

/** Login to an approved certificate with `max_delegation_depth` (the root of the chains). */
export async function rootFlow(sc: { url: string; mail: TestSidecar['mail'] }, email: string,
  o: RootGrant = {}): Promise<Flow> {
  const user = await onboard(sc as TestSidecar, email);
  const reg = await user.post('/v1/service/platforms/personal', { name: 'Chain platform', surface_type: 'agentic_api',
    default_allowed_scopes: o.scopes ?? ['data:read', 'data:write', 'payments:send'] });
  if (reg.status !== 200) throw new Error(`platform: ${reg.text}`);
  const platform = new Client(sc.url);
  platform.apiKey = reg.body.api_key;
  const agent = await platform.post(`/v1/service/connections/${reg.body.connection_id}/agents`,
    { name: 'root-agent', agent_type: 'api_agent' });
  if (agent.status !== 200) throw new Error(`agent: ${agent.text}`);
  const sr = await user.post('/v1/service/delegations/self-request', { connection_id: reg.body.connection_id });
  if (sr.status !== 200) throw new Error(`self-request: ${sr.text}`);
  const ap = await user.post(`/v1/service/delegations/requests/${sr.body.request_id}/approve`, {
    approved_scope: o.approve ?? ['data:read'],
    ...(o.constraints !== undefined ? { constraints: o.constraints } : {}),
    ...(o.expiresAt !== undefined ? { expires_at: o.expiresAt } : {}),
    ...(o.maxDepth !== undefined ? { max_delegation_depth: o.maxDepth } : {}),
  });
  if (ap.status !== 200) throw new Error(`approve: ${ap.text}`);
  return { user, platform, reg: reg.body, agentId: agent.body.agent_id, requestId: sr.body.request_id,
    certId: ap.body.cert_id };
}

/** A new agent on the flow's connection (no delegation of its own). */
export async function newAgent(f: Flow, name: string): Promise<string> {
  const a = await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents`,
    { name, agent_type: 'api_agent' });
  if (a.status !== 200) throw new Error(`agent: ${a.text}`);
  return a.body.agent_id as string;
}

/** POST …/agents/{from}/delegations with the platform's key; the raw answer. */
export function subDelegate(f: Flow, from: string, body: Record<string, unknown>,
  by: Client = f.platform): Promise<Res> {
  return by.post(`/v1/service/connections/${f.reg.connection_id}/agents/${from}/delegations`, body);
}

/** Sub-delegates or throws; returns the new certificate's id. */
export async function mustSubDelegate(f: Flow, from: string, body: Record<string, unknown>): Promise<string> {
  const r = await subDelegate(f, from, body);
  if (r.status !== 200) throw new Error(`sub-delegate: ${r.status} ${r.text}`);
  return r.body.cert_id as string;
}

/** A proof bundle of `agentId` (any agent of the flow's connection). */
export function proofOf(f: Flow, agentId: string): Promise<Bundle> {
  return bundleFor({ ...f, agentId });
}

/**
 * A chain of `depth` agents below the flow's root agent, each handing the next `scopes` and a
 * right one smaller than its own; returns the agents (index 0 = root) and certificate ids.
 */
export async function chainOf(f: Flow, depth: number, rootRight: number, scopes: string[],
  extra: Record<string, unknown> = {}): Promise<{ agents: string[]; certs: string[] }> {
  const agents = [f.agentId];
  const certs = [f.certId];
  for (let d = 1; d <= depth; d++) {
    const to = await newAgent(f, `agent-d${d}-${Math.random().toString(36).slice(2, 8)}`);
    certs.push(await mustSubDelegate(f, agents[d - 1]!, { to_agent_id: to, scopes,
      max_delegation_depth: Math.max(0, rootRight - d), ...extra }));
    agents.push(to);
  }
  return { agents, certs };
}
