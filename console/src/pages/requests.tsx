/**
 * Delegation requests: the list (pending first), a self-request for one of
 * your agents, and the review page of one request, where you approve a subset
 * of the requested scopes with an optional expiry and constraints, or deny.
 * After a decision the form is gone, so the focus moves to the outcome. Each
 * request names its platform; one from a platform the workspace connected to
 * shows the platform's verified publisher (ui/platforms.ts) and the
 * constraints it proposes. Asking, approving and
 * denying are offered only with `delegations_decide`.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { Link, navigate } from '../router.js';
import type { Route } from '../router.js';
import { ErrorText, PageTitle, useLoad } from '../ui/common.js';
import { shortId, when } from '../ui/format.js';
import { proposedConstraints } from '../types.js';
import type { Agent, Connection, DelegationRequest } from '../types.js';
import { useApp } from '../app.js';
import { allows } from '../session.js';
import { loadPlatformInfo, platformOf, publisherText } from '../ui/platforms.js';
import { describeConstraints } from '../constraints/kinds.js';
import { ApproveForm } from './approve.js';

const ORDER = { pending: 0, approved: 1, denied: 2 } as const;

/** The list of requests. */
export function RequestsPage(): JSX.Element {
  const { session } = useApp();
  const decide = allows(session, 'delegations_decide');
  const d = useLoad(async () => {
    const [r, a, c, info] = await Promise.all([
      api<{ requests: DelegationRequest[] }>('GET', '/v1/service/delegations/requests'),
      api<{ agents: Agent[] }>('GET', '/v1/service/agents'),
      api<{ connections: Connection[] }>('GET', '/v1/service/connections'),
      loadPlatformInfo(),
    ]);
    return { requests: r.requests, agents: a.agents, all: c.connections,
      connections: c.connections.filter((x) => x.status === 'active'), info };
  });
  const platformName = (connectionId: string): string => {
    const c = d.data?.all.find((x) => x.connection_id === connectionId);
    return (c && d.data ? platformOf(d.data.info, c).name : null) ?? shortId(connectionId);
  };
  // The agent chosen; until one is, the first one (the select shows it, and a request is made for it).
  const [agentId, setAgentId] = useState('');
  const [error, setError] = useState<unknown>(null);
  const name = (id: string): string => d.data?.agents.find((a) => a.agent_id === id)?.name ?? shortId(id);

  const selfRequest = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null);
    const agent = d.data!.agents.find((a) => a.agent_id === agentId) ?? d.data!.agents[0];
    try {
      const r = await api<DelegationRequest>('POST', '/v1/service/delegations/self-request', {
        connection_id: agent?.connection_id ?? d.data!.connections[0]?.connection_id ?? '', ...(agent ? { agent_id: agent.agent_id } : {}),
      });
      navigate(`/requests/${r.request_id}`);
    } catch (err) { setError(err); }
  };

  const sorted = [...(d.data?.requests ?? [])].sort((a, b) => ORDER[a.state] - ORDER[b.state] || b.created_at.localeCompare(a.created_at));
  return (
    <section>
      <PageTitle>Delegation requests</PageTitle>
      <ErrorText error={d.error} />
      {!decide && <p class="notice">Your role ({session.workspace?.role}) reads the requests; asking for,
        approving and denying delegations need an approver or owner.</p>}
      {decide && d.data && d.data.connections.length > 0 && (
        <form class="panel row wrap" onSubmit={selfRequest} noValidate>
          <label for="sr-agent">Ask for a delegation for</label>
          <select id="sr-agent" value={agentId || d.data.agents[0]?.agent_id || ''} onChange={(e) => setAgentId((e.target as HTMLSelectElement).value)}>
            {d.data.agents.length === 0 && <option value="">(no agents yet)</option>}
            {d.data.agents.map((a) => <option key={a.agent_id} value={a.agent_id}>{a.name} ({shortId(a.agent_id)})</option>)}
          </select>
          <button type="submit">Create request</button>
          <ErrorText error={error} />
        </form>
      )}
      {d.data && (sorted.length === 0 ? <p>No requests yet.</p> : (
        <table>
          <caption>{sorted.filter((r) => r.state === 'pending').length} pending of {sorted.length}</caption>
          <thead><tr><th scope="col">State</th><th scope="col">Agent</th><th scope="col">Platform</th>
            <th scope="col">Requested scopes</th>
            <th scope="col">Created</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
          <tbody>
            {sorted.map((r) => (
              <tr key={r.request_id}>
                <td><span class={`badge ${r.state}`}>{r.state}</span></td>
                <td>{name(r.agent_id)}</td>
                <td>{platformName(r.connection_id)}</td>
                <td>{r.requested_scope.join(', ')}</td>
                <td>{when(r.created_at)}</td>
                <td><Link href={`/requests/${r.request_id}`}>{r.state === 'pending' && decide ? 'Review' : 'View'}<span
                  class="sr-only"> request {shortId(r.request_id)} from {name(r.agent_id)}</span></Link></td>
              </tr>
            ))}
          </tbody>
        </table>
      ))}
    </section>
  );
}

/** One request: its facts, and approve or deny while it is pending. */
export function RequestPage(p: { route: Route }): JSX.Element {
  const { session } = useApp();
  const id = decodeURIComponent(p.route.path.split('/')[2] ?? '');
  const d = useLoad(async () => {
    const [r, a, c, info] = await Promise.all([
      api<DelegationRequest>('GET', `/v1/service/delegations/requests/${encodeURIComponent(id)}`),
      api<{ agents: Agent[] }>('GET', '/v1/service/agents'),
      api<{ connections: Connection[] }>('GET', '/v1/service/connections'),
      loadPlatformInfo(),
    ]);
    const conn = c.connections.find((x) => x.connection_id === r.connection_id);
    return { request: r, agent: a.agents.find((x) => x.agent_id === r.agent_id) ?? null,
      platform: conn ? platformOf(info, conn) : null };
  }, [id]);
  const [done, setDone] = useState<string | null>(null);
  const doneRef = useRef<HTMLParagraphElement>(null);
  const state = d.data?.request.state;
  // Once the re-read request is decided (the form and its buttons are gone), the outcome gets the focus.
  useEffect(() => { if (done && state !== 'pending') doneRef.current?.focus(); }, [done, state]);
  if (!d.data) return <section><PageTitle>Delegation request</PageTitle>{d.error ? <ErrorText error={d.error} /> : <p role="status">Loading…</p>}</section>;
  const { request: r, agent, platform } = d.data;
  const decide = allows(session, 'delegations_decide');
  return (
    <section>
      <PageTitle>Delegation request from {agent?.name ?? shortId(r.agent_id)}</PageTitle>
      <p><Link href="/requests">← All requests</Link></p>
      <dl class="facts">
        <dt>State</dt><dd><span class={`badge ${r.state}`}>{r.state}</span></dd>
        <dt>Agent</dt><dd>{agent?.name ?? '—'} <span class="mono">{r.agent_id}</span></dd>
        <dt>Connection</dt><dd class="mono">{r.connection_id}</dd>
        {platform && <><dt>Platform</dt><dd data-fact="platform">{platform.name ?? shortId(platform.platform_id)},
          {' '}{publisherText(platform)}</dd></>}
        <dt>Requested scopes</dt><dd>{r.requested_scope.join(', ')}</dd>
        <dt>Constraints proposed</dt><dd>{describeConstraints(proposedConstraints(r))}</dd>
        <dt>Created</dt><dd>{when(r.created_at)}</dd>
        {r.decided_at && <><dt>Decided</dt><dd>{when(r.decided_at)}</dd></>}
        {r.cert_id && <><dt>Certificate</dt><dd><Link href="/certificates" class="mono">{r.cert_id}</Link></dd></>}
      </dl>
      {done && <p class="success" role="status" tabIndex={-1} ref={doneRef}>{done}</p>}
      {r.state === 'pending' && (decide
        ? <ApproveForm request={r} onDecided={(msg) => { setDone(msg); d.reload(); }} />
        : <p class="notice">Your role ({session.workspace?.role}) may not approve or deny delegations: an approver
          or owner does.</p>)}
    </section>
  );
}
