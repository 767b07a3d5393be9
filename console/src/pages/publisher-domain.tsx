/**
 * The publisher domain, step by step (docs/organisations.md, "The publisher
 * domain"): 1. claim a domain (`PUT /v1/service/organization/domain`),
 * 2. publish the TXT record the claim names (its name and text, with copy
 * buttons), 3. verify (`POST …/domain/verify`), and the outcome: verified
 * (since when), lapsed (when, and why), or not yet — a refused check says
 * what the DNS answered (`absent`, `mismatch`, `unreachable`) and what to do.
 * The steps are an ordered list whose current step is marked. Claiming and
 * verifying need `platforms_manage`; other roles read the state.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import { CopyButton, ErrorText, StatusText, useLoad } from '../ui/common.js';
import { when } from '../ui/format.js';
import type { PublisherDomain } from '../types.js';

const DOMAIN = '/v1/service/organization/domain';

/** What a DNS outcome means for the person, with what to do next. */
export function outcomeText(outcome: unknown, recordName: string): string {
  if (outcome === 'absent') {
    return `No TXT record was found at ${recordName}. Publish it, wait for DNS, then verify again.`;
  }
  if (outcome === 'mismatch') {
    return `${recordName} has TXT records, but none is the one above. Check the text, then verify again.`;
  }
  if (outcome === 'unreachable') return 'No DNS server answered. Nothing changed; try again later.';
  if (outcome === 'taken') return 'Another organisation has verified this domain.';
  return 'The record proves the claim.';
}

/** The domain's state in words, with dates. */
function stateText(d: PublisherDomain): string {
  if (d.state === 'verified') return `Verified on ${when(d.verified_at)}; last checked ${when(d.checked_at)}.`;
  if (d.state === 'lapsed') {
    return `Lapsed on ${when(d.lapsed_at)} (verified on ${when(d.verified_at)}): the last check found `
      + `${d.last_outcome === 'absent' ? 'no record' : 'other records'}. Your platforms were unpublished; `
      + 'publish the record again and verify.';
  }
  return d.checked_at ? `Not verified yet; last checked ${when(d.checked_at)}.` : 'Not verified yet.';
}

/** The publisher-domain panel; `onChange` is told when the state may have changed (publishing depends on it). */
export function PublisherDomainPanel(p: { manage: boolean; onChange: (d: PublisherDomain | null) => void }):
  JSX.Element {
  const d = useLoad(async () => {
    try {
      const r = await api<PublisherDomain>('GET', DOMAIN);
      p.onChange(r);
      return r;
    } catch (err) {
      if (err instanceof ApiError && err.code === 'domain_not_claimed') { p.onChange(null); return null; }
      throw err;
    }
  });
  const [name, setName] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const claim = d.data ?? null;
  const step = claim === null ? 1 : claim.state === 'verified' ? 4 : 3;

  const run = async (f: () => Promise<string>): Promise<void> => {
    setError(null); setStatus(''); setBusy(true);
    try { setStatus(await f()); } catch (err) { setError(err); } finally { setBusy(false); d.reload(); }
  };
  const submitClaim = (e: Event): void => {
    e.preventDefault();
    void run(async () => {
      const r = await api<PublisherDomain>('PUT', DOMAIN, { domain: name.trim() });
      setName('');
      return `Claimed ${r.domain}. Publish the TXT record below, then verify.`;
    });
  };
  const verify = (): void => {
    void run(async () => {
      try {
        const r = await api<PublisherDomain>('POST', `${DOMAIN}/verify`);
        return `${r.domain} is verified.`;
      } catch (err) {
        if (err instanceof ApiError && err.code === 'domain_not_verified') {
          const said = outcomeText(err.details.outcome, String(err.details.record_name ?? claim?.record_name ?? ''));
          throw new ApiError(err.code, err.status, `${err.message} ${said}`, err.details);
        }
        throw err;
      }
    });
  };
  const mark = (n: number): 'step' | undefined => (n === step ? 'step' : undefined);

  return (
    <section class="panel" aria-labelledby="domain-title">
      <h2 id="domain-title">Publisher domain</h2>
      <p>Publishing needs a domain your organisation proves it controls with a DNS TXT record. The directory shows
        it next to your platforms.</p>
      <ErrorText error={d.error} />
      {d.data === undefined ? !d.error && <p role="status">Loading…</p> : <ol class="domain-steps">
        <li aria-current={mark(1)}>
          <h3>Claim a domain</h3>
          {claim && <p>Claimed: <strong class="mono">{claim.domain}</strong> on {when(claim.claimed_at)}.
            {p.manage && ' Claiming another replaces it and unpublishes your platforms until it is verified.'}</p>}
          {p.manage ? (
            <form class="row wrap" onSubmit={submitClaim}>
              <label for="domain-name">Domain</label>
              <input id="domain-name" value={name} spellcheck={false} placeholder="acme.com" size={30}
                onInput={(e) => setName((e.target as HTMLInputElement).value)} />
              <button type="submit" disabled={busy}>{claim ? 'Claim this domain instead' : 'Claim domain'}</button>
            </form>
          ) : !claim && <p>Not claimed. An owner or admin claims it.</p>}
        </li>
        <li aria-current={mark(2)}>
          <h3>Publish the TXT record</h3>
          {claim ? (
            <>
              <p>At your DNS provider, add a TXT record:</p>
              <div class="secret">
                <label for="record-name">Record name</label>
                <input id="record-name" readOnly value={claim.record_name} class="mono" spellcheck={false} />
                <CopyButton text={claim.record_name} label="Copy the record name" fallbackId="record-name" />
              </div>
              <div class="secret">
                <label for="record-text">Record text</label>
                <input id="record-text" readOnly value={claim.record_text} class="mono" spellcheck={false} />
                <CopyButton text={claim.record_text} label="Copy the record text" fallbackId="record-text" />
              </div>
            </>
          ) : <p class="hint">After the claim.</p>}
        </li>
        <li aria-current={mark(3)}>
          <h3>Verify</h3>
          {claim && p.manage && <button type="button" class="primary" disabled={busy} onClick={verify}>Verify
            now</button>}
          {claim && !p.manage && <p>An owner or admin verifies it.</p>}
          {!claim && <p class="hint">After the record is published.</p>}
        </li>
        <li aria-current={mark(4)}>
          <h3>State</h3>
          {claim ? <p data-domain-state={claim.state}><span class={`badge ${claim.state === 'verified' ? 'approved'
            : claim.state === 'lapsed' ? 'revoked' : 'pending'}`}>{claim.state}</span> {stateText(claim)}</p>
            : <p>No domain claimed.</p>}
          {claim?.last_outcome && claim.last_outcome !== 'verified' && claim.state !== 'lapsed' && !error
            && <p class="hint">Last check: {outcomeText(claim.last_outcome, claim.record_name)}</p>}
          <p class="hint">The sidecar checks a verified domain again every day; if the record is gone the
            verification lapses and your platforms are unpublished.</p>
        </li>
      </ol>}
      <ErrorText error={error} />
      <StatusText>{status}</StatusText>
    </section>
  );
}
