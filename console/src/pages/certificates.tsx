/**
 * Certificates (delegations): those in force and those revoked or expired,
 * each with its scopes and constraints in plain words, what a certificate in
 * force with a budget or a rate limit has used and has left in the current
 * window (GET /v1/service/delegations/{cert_id}/usage), and revoke —
 * confirmed in a dialog, with a reason that is recorded and sent to the
 * platform. Each certificate's id opens its page (certificate.tsx: its chain
 * and the tree of sub-delegations below it).
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { Link } from '../router.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { plural, shortId, when } from '../ui/format.js';
import type { Agent, Certificate, CertificateUsage, Revocation } from '../types.js';
import { isActive } from '../types.js';
import { describeConstraints } from '../constraints/kinds.js';
import { windowWords } from '../constraints/rule-kinds.js';

/** Usage per certificate id: the read, or the error that refused it. */
type UsageMap = Record<string, CertificateUsage | { error: unknown }>;

const hasLimits = (c: Certificate): boolean => Boolean(c.constraints && ('budget' in c.constraints || 'max_calls' in c.constraints));

function UsageCell(p: { u: CertificateUsage | { error: unknown } | undefined }): JSX.Element {
  if (!p.u) return <>—</>;
  if ('error' in p.u) return <ErrorText error={p.u.error} />;
  const { budget: b, max_calls: m } = p.u;
  return (
    <>
      {b && <span class="block">{b.spent} of {b.amount} {b.currency} spent {windowWords(b.period)}; <strong>{b.left} left</strong></span>}
      {m && <span class="block">{m.used} of {m.count} calls {windowWords(m.period)}; <strong>{m.left} left</strong></span>}
    </>
  );
}

function CertTable(p: { caption: string; certs: Certificate[]; agents: Agent[]; usage?: UsageMap; onRevoke?: (c: Certificate) => void }): JSX.Element {
  const name = (id: string): string => p.agents.find((a) => a.agent_id === id)?.name ?? shortId(id);
  if (p.certs.length === 0) return <p>{p.caption}: none.</p>;
  const usage = p.usage && Object.keys(p.usage).length > 0 ? p.usage : null;
  return (
    <table>
      <caption>{p.caption}</caption>
      <thead><tr><th scope="col">Certificate</th><th scope="col">Agent</th><th scope="col">Scopes</th>
        <th scope="col">Constraints</th>{usage && <th scope="col">Limits used</th>}<th scope="col">Issued</th>
        <th scope="col">{p.onRevoke ? 'Expires' : 'Ended'}</th>{p.onRevoke && <th scope="col"><span
        class="sr-only">Action</span></th>}</tr></thead>
      <tbody>
        {p.certs.map((c) => (
          <tr key={c.cert_id}>
            <td class="mono nowrap" title={`${c.cert_id}\nsha256 ${c.cert_sha256}`}><Link
              href={`/certificates/${encodeURIComponent(c.cert_id)}`}>{shortId(c.cert_id)}</Link></td>
            <td>{name(c.agent_id)}</td>
            <td>{c.approved_scope.join(', ')}</td>
            <td>{describeConstraints(c.constraints)}</td>
            {usage && <td><UsageCell u={usage[c.cert_id]} /></td>}
            <td>{when(c.issued_at)}</td>
            <td>{p.onRevoke ? (c.expires_at ? when(c.expires_at) : 'until revoked')
              : c.status === 'revoked' ? `revoked ${when(c.revoked_at)}${c.revoke_reason ? ` — “${c.revoke_reason}”` : ''}`
                : `expired ${when(c.expires_at)}`}</td>
            {p.onRevoke && <td><button type="button" class="danger" onClick={() => p.onRevoke!(c)}>Revoke<span
              class="sr-only"> {shortId(c.cert_id)} of {name(c.agent_id)}</span>…</button></td>}
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
    const now = Date.now();
    const usage: UsageMap = Object.fromEntries(await Promise.all(c.certificates.filter((x) => isActive(x, now) && hasLimits(x)).map(async (x) => [x.cert_id,
      await api<CertificateUsage>('GET', `/v1/service/delegations/${encodeURIComponent(x.cert_id)}/usage`).catch((error: unknown) => ({ error }))])));
    return { certs: c.certificates, agents: a.agents, usage };
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
          <CertTable caption="Certificates in force" certs={active} agents={d.data.agents} usage={d.data.usage}
            onRevoke={(c) => { setReason(''); setTarget(c); }} />
          {Object.keys(d.data.usage).length > 0 && <button type="button" onClick={d.reload}>Refresh the limits used</button>}
          <h2>Revoked or expired</h2>
          <CertTable caption="Revoked or expired certificates" certs={ended} agents={d.data.agents} />
        </>
      )}
      <StatusText>{status}</StatusText>
      <ConfirmDialog open={target !== null} title="Revoke this certificate?" confirmLabel="Revoke certificate" danger onClose={() => setTarget(null)}
        onConfirm={async () => {
          if (!reason.trim()) throw new Error('Give a reason: it is recorded with the revocation and sent to the platform.');
          const r = await api<Revocation>('POST', `/v1/service/delegations/${target!.cert_id}/revoke`,
            { reason: reason.trim() });
          const n = r.descendants_revoked.length;
          setStatus(n
            ? `Revoked ${r.cert_id} and ${plural(n, 'certificate')} sub-delegated below it at ${when(r.revoked_at)}. `
              + 'Verify denies their proofs from now on.'
            : `Revoked ${r.cert_id} at ${when(r.revoked_at)}. Verify denies its proofs from now on.`);
          d.reload();
        }}>
        {target && <p>The agent loses <strong>{target.approved_scope.join(', ')}</strong> at once. This cannot be undone;
          approve a new request to delegate again.</p>}
        <label for="revoke-reason">Reason (required)</label>
        <input id="revoke-reason" maxLength={500} value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
      </ConfirmDialog>
    </section>
  );
}
