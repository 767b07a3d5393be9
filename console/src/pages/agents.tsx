/**
 * The agents of the account (GET /v1/service/agents) with their custody mode
 * and the certificate in force for each, if any.
 */
import type { JSX } from 'preact';
import { api } from '../api.js';
import { Link } from '../router.js';
import { ErrorText, PageTitle, useLoad } from '../ui/common.js';
import { shortId, when } from '../ui/format.js';
import type { Agent, Certificate } from '../types.js';
import { isActive } from '../types.js';

/** The agents page. */
export function AgentsPage(): JSX.Element {
  const d = useLoad(async () => {
    const [a, c] = await Promise.all([
      api<{ agents: Agent[] }>('GET', '/v1/service/agents'),
      api<{ certificates: Certificate[] }>('GET', '/v1/service/delegations'),
    ]);
    return { agents: a.agents, certs: c.certificates };
  });
  return (
    <section>
      <PageTitle>Agents</PageTitle>
      <p>Your platform creates agents with its API key (<code>POST /v1/service/connections/&#123;connection_id&#125;/agents</code>).
        Custodial agents' keys are generated and kept sealed by agent-authz, which signs their proofs.</p>
      <ErrorText error={d.error} />
      {d.data && (d.data.agents.length === 0 ? <p>No agents yet.</p> : (
        <table>
          <caption>{d.data.agents.length} agent(s)</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Agent id</th><th scope="col">Type</th>
            <th scope="col">Custody</th><th scope="col">Certificate in force</th><th scope="col">Created</th></tr>
            </thead>
          <tbody>
            {d.data.agents.map((a) => {
              const cert = d.data!.certs.find((c) => c.agent_id === a.agent_id && isActive(c));
              return (
                <tr key={a.agent_id}>
                  <th scope="row">{a.name}</th>
                  <td class="mono" title={a.agent_id}>{shortId(a.agent_id)}</td>
                  <td>{a.agent_type}</td>
                  <td>{a.custody_mode}</td>
                  <td>{cert ? <><Link href="/certificates"
                    title={cert.cert_id}>{shortId(cert.cert_id)}</Link> · {cert.approved_scope.join(', ')}</> : 'none'}</td>
                  <td>{when(a.created_at)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ))}
    </section>
  );
}
