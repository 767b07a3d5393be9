/**
 * Approving a delegation request: checkboxes limited to the requested scopes
 * (none ticked at first: you give what you choose), an optional expiry, the
 * constraints editor (over a platform's proposed constraints, which are
 * kept unless a part of the editor replaces them), and deny with an optional reason. Before sending, the
 * form checks what the API would refuse with the API's own messages (the
 * error table of src/errors.ts and the validator of src/constraints.ts); what
 * the API still refuses is shown as it says it.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ERRORS } from '../../../src/errors.js';
import { isSensitiveScope } from '../../../src/scopes.js';
import { api } from '../api.js';
import { ConfirmDialog, ErrorText } from '../ui/common.js';
import { fromLocalInput, when } from '../ui/format.js';
import { proposedConstraints } from '../types.js';
import type { DelegationRequest } from '../types.js';
import { ConstraintsEditor, buildConstraints, emptyConstraints } from '../constraints/editor.js';
import type { ConstraintsState } from '../constraints/editor.js';
import { describeConstraints } from '../constraints/kinds.js';

/** The approve/deny form of a pending request. */
export function ApproveForm(p: { request: DelegationRequest; onDecided: (message: string) => void }): JSX.Element {
  const r = p.request;
  const [scopes, setScopes] = useState<string[]>([]);
  const [expires, setExpires] = useState('');
  const [constraints, setConstraints] = useState<ConstraintsState>(emptyConstraints);
  const [error, setError] = useState<unknown>(null);
  const [cError, setCError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [denyOpen, setDenyOpen] = useState(false);
  const [reason, setReason] = useState('');

  // A platform's proposal (docs/organisations.md): kept as it is when the editor is empty; what the
  // editor sets replaces the proposal's member of the same kind (the API refuses a looser one).
  const proposed = proposedConstraints(r);
  const approve = async (e: Event): Promise<void> => {
    e.preventDefault();
    setError(null); setCError(null);
    if (scopes.length === 0) { setError(ERRORS.empty_scope.message); return; }
    const c = buildConstraints(constraints);
    if (c.error) { setCError(c.error); return; }
    const expiresAt = fromLocalInput(expires);
    if (expires && !expiresAt) { setError(ERRORS.invalid_expiry.message); return; }
    setBusy(true);
    try {
      const res = await api<{ cert_id: string; approved_scope: string[]; expires_at: string | null; constraints: Record<string, unknown> | null }>(
        'POST', `/v1/service/delegations/requests/${r.request_id}/approve`,
        {
          approved_scope: r.requested_scope.filter((s) => scopes.includes(s)),
          ...(expiresAt ? { expires_at: expiresAt } : {}),
          ...(c.value ? { constraints: proposed ? { ...proposed, ...c.value } : c.value } : {}),
        });
      p.onDecided(`Approved: certificate ${res.cert_id} for ${res.approved_scope.join(', ')}; `
        + `constraints: ${describeConstraints(res.constraints)}; `
        + `expires ${res.expires_at ? when(res.expires_at) : 'never (until revoked)'}.`);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'invalid_constraints') setCError((err as Error).message); else setError(err);
    } finally { setBusy(false); }
  };

  return (
    <>
      <form class="panel" onSubmit={approve} noValidate aria-labelledby="approve-title">
        <h2 id="approve-title">Approve</h2>
        <fieldset>
          <legend>Scopes to give (only those requested)</legend>
          {r.requested_scope.map((s) => (
            <label key={s} class="inline block">
              <input type="checkbox" name="scope" value={s} checked={scopes.includes(s)}
                onChange={(e) => setScopes((e.target as HTMLInputElement).checked ? [...scopes, s] : scopes.filter((x) => x !== s))} />
              {' '}<code>{s}</code>{isSensitiveScope(s) && <span class="badge warn">sensitive</span>}
            </label>
          ))}
        </fieldset>
        <label for="expires">Expires (your local time; empty = until you revoke it)</label>
        <input id="expires" type="datetime-local" value={expires} onInput={(e) => setExpires((e.target as HTMLInputElement).value)} />
        {proposed && <p class="notice" id="proposed-constraints">The platform proposed: {describeConstraints(proposed)}.
          Those are kept; a part you fill in below replaces the proposed one of its kind and must be as strict or
          stricter, and a part the proposal leaves out is added.</p>}
        <ConstraintsEditor state={constraints} onChange={setConstraints} errorId="constraints-error" error={cError} scopes={r.requested_scope} />
        <ErrorText error={error} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>Approve selected scopes</button>
          <button type="button" class="danger" onClick={() => setDenyOpen(true)}>Deny…</button>
        </div>
      </form>
      <ConfirmDialog open={denyOpen} title="Deny this request?" confirmLabel="Deny request" danger onClose={() => setDenyOpen(false)}
        onConfirm={async () => {
          await api('POST', `/v1/service/delegations/requests/${r.request_id}/deny`, reason.trim() ? { reason: reason.trim() } : {});
          p.onDecided('Denied. The platform is told by webhook.');
        }}>
        <label for="deny-reason">Reason (optional, sent to the platform)</label>
        <textarea id="deny-reason" rows={2} maxLength={500} value={reason} onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)} />
      </ConfirmDialog>
    </>
  );
}
