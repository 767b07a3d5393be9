/**
 * Step-up approvals (docs/api.md, Approvals): the actions agents are waiting
 * to do, each in human terms (who, what, how much, where, until when), with
 * approve and deny (an optional note, checked by the API's text rule before
 * sending), and the recently decided ones. New requests arrive by
 * themselves: the page polls every few seconds while the tab is visible.
 * A decision the API refuses (no longer pending: decided elsewhere, used or
 * expired) is said plainly and the list is read again.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { CANONICAL_SCOPES, isCanonicalScope, isSensitiveScope } from '../../../src/scopes.js';
import { checkText } from '../../../src/text.js';
import { ApiError, api, describeError } from '../api.js';
import { APPROVALS_POLL_MS, NOTE_RULE } from '../constants.js';
import { ConfirmDialog, ErrorText, PageTitle, StatusText } from '../ui/common.js';
import { useApp } from '../app.js';
import { allows } from '../session.js';
import { plural, shortId, when } from '../ui/format.js';
import type { ActionApproval, Agent } from '../types.js';

interface Data { pending: ActionApproval[]; recent: ActionApproval[] }
type List = { approvals: ActionApproval[]; next_cursor: string | null };

async function fetchApprovals(): Promise<Data> {
  const [p, r] = await Promise.all([
    api<List>('GET', '/v1/service/approvals', undefined, { query: { state: 'pending', limit: '200' } }),
    api<List>('GET', '/v1/service/approvals', undefined, { query: { limit: '25' } }),
  ]);
  // The one that runs out first comes first.
  const pending = [...p.approvals].sort((a, b) => (a.expires_at ?? '').localeCompare(b.expires_at ?? ''));
  return { pending, recent: r.approvals.filter((a) => a.state !== 'pending') };
}

/** What the action does: `POST /v1/payments` or `tool send_payment`. */
function target(a: ActionApproval): string {
  if (a.action.tool !== null) return `tool ${a.action.tool}`;
  return `${a.action.method ?? '(no method)'} ${a.action.path ?? '(no path)'}`;
}
const money = (a: ActionApproval): string | null => (a.action.amount === null ? null : `${a.action.amount}${a.action.currency ? ` ${a.action.currency}` : ''}`);
const scopeWords = (s: string): string => (isCanonicalScope(s) ? CANONICAL_SCOPES[s].description.replace(/\.$/, '') : s);

/** `in 9 min`, `in less than a minute`, `now`. */
function inTime(iso: string | null, now: number): string {
  if (!iso) return '';
  const ms = Date.parse(iso) - now;
  if (ms <= 0) return 'now';
  return ms < 60_000 ? 'in less than a minute' : `in ${Math.floor(ms / 60_000)} min`;
}

/** Why a decision was refused, in plain words. */
function refusal(err: unknown): string {
  if (err instanceof ApiError && err.code === 'approval_not_pending') {
    const state = typeof err.details.state === 'string' ? err.details.state : 'decided';
    const why: Record<string, string> = {
      expired: 'it expired before it was decided; the agent has to ask again',
      granted: 'it was already approved',
      denied: 'it was already denied',
      used: 'it was approved and the agent has used it',
    };
    return `This request can no longer be decided: ${why[state] ?? `it is ${state}`} (approval_not_pending). The list below is up to date.`;
  }
  if (err instanceof ApiError && err.code === 'approval_not_found') return 'This approval does not exist, or is not yours (approval_not_found).';
  return describeError(err);
}

function PendingCard(p: {
  a: ActionApproval; agent: string; fresh: boolean; busy: boolean; now: number; onApprove: () => void; onDeny: () => void;
  /** The session's role may decide (`approvals_decide`); otherwise no buttons. */
  decide: boolean;
}): JSX.Element {
  const { a } = p;
  const m = money(a);
  const title = `ap-${a.approval_id}`;
  return (
    <article class={`panel approval${p.fresh ? ' fresh' : ''}`} aria-labelledby={title}>
      <h3 id={title}>{p.agent}: {scopeWords(a.scope)}{m ? `, ${m}` : ''}</h3>
      <dl class="facts">
        <dt>Amount</dt><dd>{m ?? 'none given'}</dd>
        <dt>Action</dt><dd><code>{target(a)}</code>{a.action.tenant !== null && <> for tenant <code>{a.action.tenant}</code></>}</dd>
        <dt>Scope</dt><dd><code>{a.scope}</code>{isSensitiveScope(a.scope) && <span class="badge warn">sensitive</span>}</dd>
        <dt>Agent</dt><dd>{p.agent} <span class="mono">{shortId(a.agent_id)}</span>, certificate <span class="mono">{shortId(a.cert_id)}</span></dd>
        <dt>Proof</dt><dd>{a.action.bound ? 'bound to exactly this request' : 'not bound to the request; the approval still covers only these details'}</dd>
        <dt>Asked</dt><dd>{when(a.created_at)}</dd>
        <dt>Expires</dt><dd>{when(a.expires_at)} ({inTime(a.expires_at, p.now)})</dd>
      </dl>
      <p class="hint">{a.summary}</p>
      {p.decide && <div class="actions">
        <button type="button" class="primary approve" disabled={p.busy} onClick={p.onApprove}>Approve<span class="sr-only"> {a.summary}</span></button>
        <button type="button" class="danger deny" disabled={p.busy} onClick={p.onDeny}>Deny…<span class="sr-only"> {a.summary}</span></button>
      </div>}
    </article>
  );
}

function RecentTable(p: { rows: ActionApproval[]; name: (id: string) => string }): JSX.Element {
  if (p.rows.length === 0) return <p>Nothing decided yet.</p>;
  return (
    <table class="approvals">
      <caption>The latest decided, used and expired approvals, newest first</caption>
      <thead><tr><th scope="col">State</th><th scope="col">Action</th><th scope="col">Agent</th>
        <th scope="col">Asked</th><th scope="col">Settled</th><th scope="col">Note</th></tr></thead>
      <tbody>
        {p.rows.map((a) => (
          <tr key={a.approval_id}>
            <td><span class={`badge ${a.state}`}>{a.state}</span></td>
            <td>{a.summary}</td>
            <td>{p.name(a.agent_id)}</td>
            <td class="nowrap">{when(a.created_at)}</td>
            <td><span class="nowrap">{when(a.settled_at ?? a.decided_at)}</span>
              {a.state === 'granted' && a.expires_at ? ` (usable until ${when(a.expires_at)})` : ''}</td>
            <td>{a.note ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The approvals page. */
export function ApprovalsPage(): JSX.Element {
  const { session } = useApp();
  const decide = allows(session, 'approvals_decide');
  const [data, setData] = useState<Data | null>(null);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  const [busy, setBusy] = useState<string | null>(null);
  const [denyTarget, setDenyTarget] = useState<ActionApproval | null>(null);
  const [note, setNote] = useState('');
  const [polls, setPolls] = useState(0);
  const known = useRef<Set<string> | null>(null);
  const denied = useRef(false);
  const waiting = useRef<HTMLHeadingElement>(null);

  const refresh = async (): Promise<void> => {
    try {
      const d = await fetchApprovals();
      const ids = new Set(d.pending.map((a) => a.approval_id));
      if (known.current) {
        const added = d.pending.filter((a) => !known.current!.has(a.approval_id));
        if (added.length) {
          setFresh(new Set(added.map((a) => a.approval_id)));
          setStatus(`${plural(added.length, 'new request')} for your approval arrived.`);
        }
      }
      known.current = ids;
      if ([...d.pending, ...d.recent].some((a) => !agents.some((x) => x.agent_id === a.agent_id))) {
        setAgents((await api<{ agents: Agent[] }>('GET', '/v1/service/agents')).agents);
      }
      setData(d);
      setLoadError(null);
    } catch (err) { setLoadError(err); }
  };

  useEffect(() => { void refresh(); }, []); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => {
    if (!data && !loadError) return undefined;
    const timer = setTimeout(async () => {
      if (document.visibilityState === 'visible') await refresh();
      setPolls((n) => n + 1);
    }, APPROVALS_POLL_MS);
    return () => clearTimeout(timer);
  }, [polls, data === null && loadError === null]); // eslint-disable-line react-hooks/exhaustive-deps

  const name = (id: string): string => agents.find((a) => a.agent_id === id)?.name ?? shortId(id);
  /** After a decision the card is gone: the focus goes to the list's heading. */
  const refocus = (): void => waiting.current?.focus();

  const approve = async (a: ActionApproval): Promise<void> => {
    setError(null); setStatus(''); setBusy(a.approval_id);
    try {
      const r = await api<ActionApproval>('POST', `/v1/service/approvals/${encodeURIComponent(a.approval_id)}/approve`);
      setStatus(`Approved: ${r.summary}. The agent may now do exactly this once, until ${when(r.expires_at)}.`);
    } catch (err) { setError(refusal(err)); }
    setBusy(null);
    await refresh();
    refocus();
  };

  const deny = async (): Promise<void> => {
    const a = denyTarget!;
    const checked = checkText(note, NOTE_RULE);
    if (!checked.ok) throw new Error(`The note ${checked.reason}.`);
    setError(null); setStatus('');
    try {
      const r = await api<ActionApproval>(
        'POST', `/v1/service/approvals/${encodeURIComponent(a.approval_id)}/deny`, checked.value ? { note: checked.value } : {});
      setStatus(`Denied: ${r.summary}. The agent is refused this action (approval_denied)${r.note ? ' and sees your note' : ''}.`);
    } catch (err) {
      if (!(err instanceof ApiError) || (err.code !== 'approval_not_pending' && err.code !== 'approval_not_found')) throw err;
      setError(refusal(err));
    }
    denied.current = true;
    await refresh();
  };

  const now = Date.now();
  return (
    <section>
      <PageTitle>Approvals</PageTitle>
      <p class="hint">Actions your certificates’ approval rules hold back until you decide. New requests appear here by themselves.</p>
      {!decide && <p class="notice">Your role ({session.workspace?.role}) reads the approvals; approving and
        denying need an approver or owner.</p>}
      <ErrorText error={loadError ?? error} />
      <StatusText>{status}</StatusText>
      <h2 tabIndex={-1} ref={waiting}>Waiting for you{data ? ` (${data.pending.length})` : ''}</h2>
      {!data ? (!loadError && <p role="status">Loading…</p>) : data.pending.length === 0 ? <p>Nothing is waiting for your approval.</p> : (
        data.pending.map((a) => (
          <PendingCard key={a.approval_id} a={a} agent={name(a.agent_id)} fresh={fresh.has(a.approval_id)}
            busy={busy === a.approval_id} now={now} decide={decide}
            onApprove={() => { void approve(a); }} onDeny={() => { setNote(''); setDenyTarget(a); }} />
        ))
      )}
      <h2>Decided</h2>
      {data && <RecentTable rows={data.recent} name={name} />}
      <ConfirmDialog open={denyTarget !== null} title="Deny this action?" confirmLabel="Deny action" danger onClose={() => setDenyTarget(null)} onConfirm={deny}
        onClosed={() => { if (denied.current) { denied.current = false; refocus(); } }}>
        {denyTarget && <p>{name(denyTarget.agent_id)} is refused <strong>{denyTarget.summary}</strong> and told that you denied it.</p>}
        <label for="deny-note">Note to the agent (optional, at most {NOTE_RULE.max} characters)</label>
        <textarea id="deny-note" rows={2} value={note} onInput={(e) => setNote((e.target as HTMLTextAreaElement).value)} />
      </ConfirmDialog>
    </section>
  );
}
