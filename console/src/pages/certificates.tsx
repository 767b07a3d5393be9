/**
 * Certificates (delegations): those in force and those revoked or expired,
 * each with its scopes and constraints in plain words, and revoke — confirmed
 * in a dialog, with a reason that is recorded and sent to the platform.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { shortId, when } from '../ui/format.js';
import type { Agent, Certificate } from '../types.js';
import { isActive } from '../types.js';
import { describeConstraints } from '../constraints/kinds.js';

function CertTable(p: { caption: string; certs: Certificate[]; agents: Agent[]; onRevoke?: (c: Certificate) => void }): JSX.Element {
  const name = (id: string): string => p.agents.find((a) => a.agent_id === id)?.name ?? shortId(id);
  if (p.certs.length === 0) return <p>{p.caption}: none.</p>;
  return (
    <table>
      <caption>{p.caption}</caption>
      <thead><tr><th scope="col">Certificate</th><th scope="col">Agent</th><th scope="col">Scopes</th><th scope="col">Constraints</th><th scope="col">Issued</th><th scope="col">{p.onRevoke ? 'Expires' : 'Ended'}</th>{p.onRevoke && <th scope="col"><span class="sr-only">Action</span></th>}</tr></thead>
      <tbody>
        {p.certs.map((c) => (
          <tr key={c.cert_id}>
            <td class="mono" title={`${c.cert_id}\nsha256 ${c.cert_sha256}`}>{shortId(c.cert_id)}</td>
            <td>{name(c.agent_id)}</td>
            <td>{c.approved_scope.join(', ')}</td>
            <td>{describeConstraints(c.constraints)}</td>
            <td>{when(c.issued_at)}</td>
            <td>{p.onRevoke ? (c.expires_at ? when(c.expires_at) : 'until revoked')
              : c.status === 'revoked' ? `revoked ${when(c.revoked_at)}${c.revoke_reason ? ` — “${c.revoke_reason}”` : ''}` : `expired ${when(c.expires_at)}`}</td>
            {p.onRevoke && <td><button type="button" class="danger" onClick={() => p.onRevoke!(c)}>Revoke<span class="sr-only"> {shortId(c.cert_id)} of {name(c.agent_id)}</span>…</button></td>}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The certificates page. */
export function CertificatesPage(): JSX.Element {
  const d = useLoad(async () => {
    const [c, a] = await Promise.all([
      api<{ certificates: Certificate[] }>('GET', '/v1/service/delegations'),
      api<{ agents: Agent[] }>('GET', '/v1/service/agents'),
    ]);
    return { certs: c.certificates, agents: a.agents };
  });
  const [target, setTarget] = useState<Certificate | null>(null);
  const [reason, setReason] = useState('');
  const [status, setStatus] = useState('');
  const now = Date.now();
  const active = d.data?.certs.filter((c) => isActive(c, now)) ?? [];
  const ended = d.data?.certs.filter((c) => !isActive(c, now)) ?? [];
  return (
    <section>
      <PageTitle>Certificates</PageTitle>
      <ErrorText error={d.error} />
      {d.data && (
        <>
          <h2>In force</h2>
          <CertTable caption="Certificates in force" certs={active} agents={d.data.agents} onRevoke={(c) => { setReason(''); setTarget(c); }} />
          <h2>Revoked or expired</h2>
          <CertTable caption="Revoked or expired certificates" certs={ended} agents={d.data.agents} />
        </>
      )}
      <StatusText>{status}</StatusText>
      <ConfirmDialog open={target !== null} title="Revoke this certificate?" confirmLabel="Revoke certificate" danger onClose={() => setTarget(null)}
        onConfirm={async () => {
          if (!reason.trim()) throw new Error('Give a reason: it is recorded with the revocation and sent to the platform.');
          const r = await api<{ cert_id: string; revoked_at: string }>('POST', `/v1/service/delegations/${target!.cert_id}/revoke`, { reason: reason.trim() });
          setStatus(`Revoked ${r.cert_id} at ${when(r.revoked_at)}. Verify denies its proofs from now on.`);
          d.reload();
        }}>
        {target && <p>The agent loses <strong>{target.approved_scope.join(', ')}</strong> at once. This cannot be undone; approve a new request to delegate again.</p>}
        <label for="revoke-reason">Reason (required)</label>
        <input id="revoke-reason" maxLength={500} value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
      </ConfirmDialog>
    </section>
  );
}
