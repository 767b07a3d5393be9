/**
 * The overview: what needs attention (pending delegation requests and
 * actions waiting for an approval), what is in force (active certificates),
 * the credit balance and the verify counts (those two only for a role that
 * reads usage: `audit_read`).
 */
import type { JSX } from 'preact';
import { api } from '../api.js';
import { useApp } from '../app.js';
import { allows } from '../session.js';
import { Link } from '../router.js';
import { ErrorText, PageTitle, useLoad } from '../ui/common.js';
import { dollars, plural } from '../ui/format.js';
import type { ActionApproval, Certificate, DelegationRequest, Platform, Usage } from '../types.js';
import { isActive } from '../types.js';

/** The overview page. */
export function OverviewPage(): JSX.Element {
  const { session } = useApp();
  const readsUsage = allows(session, 'audit_read');
  const d = useLoad(async () => {
    const [usage, requests, certs, platforms, approvals] = await Promise.all([
      readsUsage ? api<Usage>('GET', '/v1/service/usage/personal') : null,
      api<{ requests: DelegationRequest[] }>('GET', '/v1/service/delegations/requests'),
      api<{ certificates: Certificate[] }>('GET', '/v1/service/delegations'),
      api<{ platforms: Platform[] }>('GET', '/v1/service/platforms'),
      api<{ approvals: ActionApproval[] }>('GET', '/v1/service/approvals', undefined, { query: { state: 'pending', limit: '200' } }),
    ]);
    return { usage, requests: requests.requests, certs: certs.certificates, platforms: platforms.platforms, approvals: approvals.approvals };
  });
  const pending = d.data?.requests.filter((r) => r.state === 'pending').length ?? 0;
  const active = d.data?.certs.filter((c) => isActive(c)).length ?? 0;
  const waiting = d.data?.approvals.length ?? 0;
  return (
    <section>
      <PageTitle>Hello{session.first_name ? `, ${session.first_name}` : ''}</PageTitle>
      <ErrorText error={d.error} />
      {d.data && (
        <div class="cards">
          <div class="card">
            <h2>Requests</h2>
            <p class="big">{pending}</p>
            <p>{pending ? <Link href="/requests">{plural(pending, 'request')} waiting for your decision</Link> : 'Nothing waiting for you.'}</p>
          </div>
          <div class="card">
            <h2>Approvals</h2>
            <p class="big">{waiting}</p>
            <p>{waiting ? <Link href="/approvals">{plural(waiting, 'action')} waiting for your approval</Link> : 'No action waiting for you.'}</p>
          </div>
          <div class="card">
            <h2>Certificates in force</h2>
            <p class="big">{active}</p>
            <p><Link href="/certificates">Review or revoke</Link></p>
          </div>
          {d.data.usage && <><div class="card">
            <h2>Credits</h2>
            <p class="big">{dollars(d.data.usage.balance_micros)}</p>
            <p>{plural(d.data.usage.remaining_verify_calls, 'verify call')} left · <Link href="/usage">usage</Link></p>
          </div>
          <div class="card">
            <h2>Verify decisions</h2>
            <p class="big">{d.data.usage.verify_calls}</p>
            <p>{d.data.usage.allows} allowed · {d.data.usage.denies} denied · <Link href="/audit">audit</Link></p>
          </div></>}
        </div>
      )}
      {d.data && d.data.platforms.length === 0 && (
        <p class="notice">You have no platform yet. <Link href="/platform">Register your platform</Link> to get its API key.</p>
      )}
    </section>
  );
}
