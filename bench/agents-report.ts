/**
 * The agent rows of the benchmark table (measured by bench/agents.ts): MCP
 * tool calls through the gateway against the plain proxy, and forward-auth
 * through NGINX against NGINX alone. report.ts prints them per backend.
 */
import type { LoadResult } from './load.js';

/** The variants of the agent rows. */
export type AgentVariant = 'mcpPlain' | 'mcpGateway' | 'nginx' | 'nginxAuth';

/** What the agent rows measured on one backend: c=50 throughput (interleaved rounds) and c=1 latency. */
export type AgentResults = Partial<Record<AgentVariant, { c50: LoadResult; c1: LoadResult }>>;

const int = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en-US'));
const fix = (n: number | undefined, d = 2): string => (n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(d));

function cell(a: AgentResults | undefined, v: AgentVariant): string {
  const x = a?.[v];
  return x ? `${int(x.c50.rps)}/s · ${fix(x.c50.p99 / 1000)} ms; c=1 ${int(x.c1.p50)} µs` : '—';
}

function ratio(a: AgentResults | undefined, top: AgentVariant, bottom: AgentVariant): string {
  const t = a?.[top];
  const b = a?.[bottom];
  return t && b ? `${fix(t.c50.rps / b.c50.rps)} (c=1 p50 +${int(t.c1.p50 - b.c1.p50)} µs)` : '—';
}

/** The section title of the agent rows. */
export const AGENT_SECTION = 'Agents — MCP tool calls, forward-auth — c=50: req/s · p99; c=1: p50 (interleaved rounds)';

/** The agent rows: label → the cell of one backend. */
export const AGENT_ROWS: ReadonlyArray<readonly [string, (a: AgentResults | undefined) => string]> = [
  ['MCP tools/call through the plain proxy', (a) => cell(a, 'mcpPlain')],
  ['MCP tools/call through the agent-authz gateway + sidecar', (a) => cell(a, 'mcpGateway')],
  ['MCP gateway ÷ plain proxy (c=50 req/s)', (a) => ratio(a, 'mcpGateway', 'mcpPlain')],
  ['NGINX alone', (a) => cell(a, 'nginx')],
  ['NGINX auth_request + agent-authz forward-auth + sidecar', (a) => cell(a, 'nginxAuth')],
  ['Forward-auth through NGINX ÷ NGINX alone (c=50 req/s)', (a) => ratio(a, 'nginxAuth', 'nginx')],
];
