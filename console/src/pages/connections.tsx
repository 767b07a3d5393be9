/**
 * Connections (docs/organisations.md, "Connections"): the workspace's
 * connections — its own platforms' and those it made to published platforms —
 * each with its platform, the platform's publisher and verified domain
 * (ui/platforms.ts), the allowed scopes and its state, and **Remove…**
 * (confirmed; `platforms_manage`). Above them, the delegation requests that
 * platforms sent on those connections and that wait for a decision: the
 * platform and its verified publisher, the agent, the scopes asked and the
 * constraints it proposed, with **Review** leading
 * to the request's page, where an approver grants fewer scopes or denies.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { Link } from '../router.js';
import { allows } from '../session.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { plural, shortId, when } from '../ui/format.js';
import { loadPlatformInfo, platformOf, publisherText } from '../ui/platforms.js';
import type { PlatformInfo } from '../ui/platforms.js';
import { proposedConstraints } from '../types.js';
import type { Agent, Connection, DelegationRequest } from '../types.js';
import { describeConstraints } from '../constraints/kinds.js';

const enc = encodeURIComponent;
const label = (i: PlatformInfo): string => i.name ?? `platform ${shortId(i.platform_id)}`;

/** The connections page. */
export function ConnectionsPage(): JSX.Element {
  const { session } = useApp();
  const manage = allows(session, 'platforms_manage');
  const decide = allows(session, 'delegations_decide');
  const d = useLoad(async () => {
    const [c, r, a, info] = await Promise.all([
      api<{ connections: Connection[] }>('GET', '/v1/service/connections'),
      api<{ requests: DelegationRequest[] }>('GET', '/v1/service/delegations/requests'),
      api<{ agents: Agent[] }>('GET', '/v1/service/agents'),
      loadPlatformInfo(),
    ]);
    return { connections: c.connections, requests: r.requests, agents: a.agents, info };
  });
  const [removing, setRemoving] = useState<Connection | null>(null);
  const [status, setStatus] = useState('');
  if (!d.data) {
    return <section><PageTitle>Connections</PageTitle>{d.error ? <ErrorText error={d.error} />
      : <p role="status">Loading…</p>}</section>;
  }
  const { connections, requests, agents, info } = d.data;
  const byId = new Map(connections.map((c) => [c.connection_id, c]));
  const incoming = requests.filter((r) => r.state === 'pending' && byId.has(r.connection_id)
    && !platformOf(info, byId.get(r.connection_id)!).own);
  const agentName = (id: string): string => agents.find((x) => x.agent_id === id)?.name ?? shortId(id);
  const sorted = [...connections].sort((x, y) => (x.status === y.status ? 0 : x.status === 'active' ? -1 : 1));
  return (
    <section>
      <PageTitle>Connections</PageTitle>
      <ErrorText error={d.error} />
      <h2>Requests from platforms</h2>
      {incoming.length === 0 ? <p>No platform is waiting for a decision.</p> : (
        <table>
          <caption>{plural(incoming.length, 'request')} waiting for a decision</caption>
          <thead><tr><th scope="col">Platform</th><th scope="col">Publisher</th><th scope="col">Agent</th>
            <th scope="col">Asks for</th><th scope="col">Constraints proposed</th><th scope="col">Asked</th>
            <th scope="col"><span class="sr-only">Action</span></th></tr></thead>
          <tbody>{incoming.map((r) => {
            const i = platformOf(info, byId.get(r.connection_id)!);
            return (
              <tr key={r.request_id} data-request={r.request_id}>
                <td>{label(i)}</td><td>{publisherText(i)}</td><td>{agentName(r.agent_id)}</td>
                <td>{r.requested_scope.join(', ')}</td>
                <td>{describeConstraints(proposedConstraints(r))}</td>
                <td>{when(r.created_at)}</td>
                <td><Link href={`/requests/${enc(r.request_id)}`}>{decide ? 'Review' : 'View'}<span
                  class="sr-only"> the request of {label(i)} for {agentName(r.agent_id)}</span></Link></td>
              </tr>
            );
          })}</tbody>
        </table>
      )}
      {!decide && incoming.length > 0 && <p class="hint">Your role ({session.workspace?.role}) may not decide
        delegations: an approver or owner does.</p>}
      <h2>Your connections</h2>
      {!manage && <p class="notice">Your role ({session.workspace?.role}) reads the connections; removing one
        needs an owner or admin.</p>}
      {sorted.length === 0 ? <p>No connection yet. <Link href="/directory">Find a platform in the
        directory</Link>.</p> : (
        <table>
          <caption>Connections</caption>
          <thead><tr><th scope="col">Platform</th><th scope="col">Publisher</th><th scope="col">Allowed scopes</th>
            <th scope="col">State</th><th scope="col">Connected</th>
            {manage && <th scope="col"><span class="sr-only">Action</span></th>}</tr></thead>
          <tbody>{sorted.map((c) => {
            const i = platformOf(info, c);
            return (
              <tr key={c.connection_id} data-connection={c.connection_id}>
                <td>{label(i)}<br /><span class="mono hint">{c.connection_id}</span></td>
                <td>{publisherText(i)}</td><td>{c.allowed_scopes.join(', ')}</td>
                <td><span class={`badge ${c.status === 'active' ? 'approved' : 'revoked'}`}>{c.status}</span>
                  {c.removed_at && ` ${when(c.removed_at)}`}</td>
                <td>{when(c.created_at)}</td>
                {manage && <td>{c.status === 'active' && <button type="button" class="danger"
                  onClick={() => setRemoving(c)}>Remove<span class="sr-only"> the connection to {label(i)}</span>…
                </button>}</td>}
              </tr>
            );
          })}</tbody>
        </table>
      )}
      <StatusText>{status}</StatusText>
      <ConfirmDialog open={removing !== null} title="Remove this connection?" confirmLabel="Remove connection" danger
        onClose={() => setRemoving(null)}
        onConfirm={async () => {
          const c = removing!;
          const r = await api<{ revoked_cert_ids: string[] }>('POST',
            `/v1/service/connections/${enc(c.connection_id)}/remove`);
          setStatus(`Removed the connection to ${label(platformOf(info, c))}; `
            + `${plural(r.revoked_cert_ids.length, 'certificate')} revoked. The platform is told.`);
          d.reload();
        }}>
        {removing && <p>{label(platformOf(info, removing))} loses this connection at once: its key stops working,
          every certificate issued on it is revoked and its pending requests are denied. This cannot be undone.</p>}
      </ConfirmDialog>
    </section>
  );
}
