/**
 * The audit trail (GET /v1/service/audit/personal): filters by event type and
 * agent (sent to the API) and by decision and time (applied here, scanning a
 * bounded number of pages per step), cursor pagination ("Load older"), and
 * new events arriving by themselves: the newest page is polled every few
 * seconds while the tab is visible. The filters live in the address, so a
 * reload or a return from sign-in shows the same view. "Load older" keeps the
 * keyboard focus: the button stays focusable while it loads (aria-disabled,
 * not disabled, which would drop the focus), and when nothing older is left
 * and it goes, the focus moves to the first row it added. Each decision
 * event (one with `details.decision_id`) has a "Why?" button that opens its
 * explanation (explanation.tsx) in a row below it, and closes it again.
 */
import { Fragment } from 'preact';
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { AUDIT_POLL_MS } from '../constants.js';
import { navigate } from '../router.js';
import type { Route } from '../router.js';
import { ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { fromLocalInput, plural, shortId, when } from '../ui/format.js';
import type { Agent, AuditEvent } from '../types.js';
import { Explanation } from './explanation.js';

/** Matching events shown per step, and API pages scanned at most per step. */
const PAGE = 25;
const MAX_SCAN = 10;
/** The event types to filter on: decisions, then administrative events (docs/audit.md). */
const TYPES = ['proof.presented', 'proof.verified', 'proof.rejected', 'approval.requested', 'approval.granted',
  'approval.denied', 'approval.expired',
  'organization.created', 'member.invited', 'member.joined', 'member.role_changed', 'member.removed', 'member.left',
  'invitation.revoked', 'workspace.switched', 'platform.created', 'platform.updated', 'platform.published',
  'platform.unpublished', 'domain.claimed', 'domain.verified', 'domain.lapsed', 'connection.created',
  'connection.removed', 'connection.key_rotated'];
const DECISIONS = ['allow', 'deny', 'indeterminate'];

interface Filters { event_type: string; agent_id: string; decision: string; from: string; to: string }

function filtersOf(q: URLSearchParams): Filters {
  return { event_type: q.get('event_type') ?? '', agent_id: q.get('agent_id') ?? '', decision: q.get('decision') ?? '',
    from: q.get('from') ?? '', to: q.get('to') ?? '' };
}

/** The API's event_type for the filters: the explicit one, else the one a decision implies. */
function serverType(f: Filters): string | undefined {
  if (f.event_type) return f.event_type;
  if (f.decision === 'allow') return 'proof.verified';
  if (f.decision) return 'proof.rejected';
  return undefined;
}

/** The decision id of a decision event (verify or grant check), or null. */
function decisionId(e: AuditEvent): string | null {
  return typeof e.details?.decision_id === 'string' ? e.details.decision_id : null;
}

function matches(e: AuditEvent, f: Filters): boolean {
  if (f.decision && e.details?.decision !== f.decision) return false;
  const t = Date.parse(e.occurred_at);
  const from = fromLocalInput(f.from);
  const to = fromLocalInput(f.to);
  if (from && t < Date.parse(from)) return false;
  if (to && t > Date.parse(to)) return false;
  return true;
}

async function scan(f: Filters, cursor: string | null): Promise<{ events: AuditEvent[]; next: string | null }> {
  const out: AuditEvent[] = [];
  const from = fromLocalInput(f.from);
  let cur = cursor;
  for (let i = 0; i < MAX_SCAN; i++) {
    const r = await api<{ events: AuditEvent[]; next_cursor: string | null }>('GET', '/v1/service/audit/personal', undefined,
      { query: { limit: '100', cursor: cur ?? undefined, event_type: serverType(f), agent_id: f.agent_id || undefined } });
    out.push(...r.events.filter((e) => matches(e, f)));
    const last = r.events[r.events.length - 1];
    // Newest first: past the "from" bound nothing older can match.
    if (from && last && Date.parse(last.occurred_at) < Date.parse(from)) return { events: out, next: null };
    cur = r.next_cursor;
    if (!cur || out.length >= PAGE) break;
  }
  return { events: out, next: cur };
}

/** The audit page. */
export function AuditPage(p: { route: Route }): JSX.Element {
  const applied = filtersOf(p.route.query);
  const key = JSON.stringify(applied);
  const [form, setForm] = useState<Filters>(applied);
  const [events, setEvents] = useState<AuditEvent[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(true);
  const [live, setLive] = useState(true);
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  const [status, setStatus] = useState('');
  const [polls, setPolls] = useState(0);
  const seen = useRef(new Set<string>());
  const [focusRow, setFocusRow] = useState<string | null>(null);
  const [open, setOpen] = useState<Set<string>>(new Set());
  const toggle = (id: string): void => setOpen((o) => {
    const n = new Set(o);
    if (!n.delete(id)) n.add(id);
    return n;
  });
  const agents = useLoad(() => api<{ agents: Agent[] }>('GET', '/v1/service/agents'));
  const agentName = (id: string | null): string => (id ? agents.data?.agents.find((a) => a.agent_id === id)?.name ?? shortId(id) : '—');

  useEffect(() => {
    let on = true;
    setBusy(true); setError(null); setForm(applied);
    scan(applied, null).then((r) => {
      if (!on) return;
      seen.current = new Set(r.events.map((e) => e.event_id));
      setEvents(r.events); setNext(r.next); setFresh(new Set()); setBusy(false);
      setStatus(`${plural(r.events.length, 'event')} shown.`);
    }, (err: unknown) => { if (on) { setError(err); setBusy(false); } });
    return () => { on = false; };
  }, [key]); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => {
    if (!live || busy) return undefined;
    const to = fromLocalInput(applied.to);
    if (to && Date.parse(to) < Date.now()) return undefined;
    const timer = setTimeout(async () => {
      if (document.visibilityState !== 'visible') { setPolls((n) => n + 1); return; }
      try {
        const r = await api<{ events: AuditEvent[] }>('GET', '/v1/service/audit/personal', undefined,
          { query: { limit: '50', event_type: serverType(applied), agent_id: applied.agent_id || undefined } });
        const added = r.events.filter((e) => !seen.current.has(e.event_id) && matches(e, applied));
        for (const e of r.events) seen.current.add(e.event_id);
        if (added.length) {
          setEvents((old) => [...added, ...old]);
          setStatus(`${plural(added.length, 'new event')} arrived.`);
        }
        if (added.length) setFresh(new Set(added.map((e) => e.event_id)));
        setPolls((n) => n + 1);
      } catch (err) { setError(err); setLive(false); }
    }, AUDIT_POLL_MS);
    return () => clearTimeout(timer);
  }, [live, busy, polls, key]); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => {
    if (!focusRow) return;
    document.getElementById(`ev-${focusRow}`)?.focus();
    setFocusRow(null);
  }, [focusRow]);

  const apply = (e: Event): void => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) if (v) q.set(k, v);
    navigate(`/audit${q.size ? `?${q}` : ''}`);
  };
  const older = async (): Promise<void> => {
    if (busy) return;
    setBusy(true);
    try {
      const r = await scan(applied, next);
      for (const e of r.events) seen.current.add(e.event_id);
      setEvents((old) => [...old, ...r.events]); setNext(r.next);
      setStatus(`${plural(r.events.length, 'older event')} added.`);
      // The button goes when nothing older is left: the focus goes to the first added row (or the last row).
      if (!r.next) setFocusRow(r.events[0]?.event_id ?? events[events.length - 1]?.event_id ?? null);
    } catch (err) { setError(err); } finally { setBusy(false); }
  };
  const set = (k: keyof Filters) => (e: Event): void => setForm({ ...form, [k]: (e.target as HTMLInputElement).value });

  return (
    <section>
      <PageTitle>Audit</PageTitle>
      <form class="panel filters" onSubmit={apply} noValidate aria-label="Audit filters">
        <label>Event type
          <select value={form.event_type} onChange={set('event_type')}><option
            value="">all</option>{TYPES.map((t) => <option key={t} value={t}>{t}</option>)}</select></label>
        <label>Agent
          <select value={form.agent_id} onChange={set('agent_id')}><option value="">all</option>
            {agents.data?.agents.map((a) => <option key={a.agent_id} value={a.agent_id}>{a.name}</option>)}</select></label>
        <label>Decision
          <select value={form.decision} onChange={set('decision')}><option
            value="">any</option>{DECISIONS.map((t) => <option key={t} value={t}>{t}</option>)}</select></label>
        <label>From <input type="datetime-local" value={form.from} onInput={set('from')} /></label>
        <label>To <input type="datetime-local" value={form.to} onInput={set('to')} /></label>
        <button type="submit" class="primary">Apply filters</button>
        <label class="inline"><input type="checkbox" checked={live}
          onChange={(e) => setLive((e.target as HTMLInputElement).checked)} /> Show new events as they arrive</label>
      </form>
      <ErrorText error={error} />
      <StatusText>{status}</StatusText>
      {events.length === 0 && !busy ? <p>No events match.</p> : (
        <table class="audit">
          <caption>Audit events, newest first</caption>
          <thead><tr><th scope="col">Time</th><th scope="col">Event</th><th scope="col">Decision</th>
            <th scope="col">Reason</th><th scope="col">Scope</th><th scope="col">Agent</th>
            <th scope="col">Certificate</th><th scope="col">Explanation</th></tr></thead>
          <tbody>
            {events.map((e) => {
              const why = decisionId(e);
              return (<Fragment key={e.event_id}><tr id={`ev-${e.event_id}`} tabIndex={-1}
                class={fresh.has(e.event_id) ? 'fresh' : undefined}>
                <td title={e.occurred_at} id={`at-${e.event_id}`}>{when(e.occurred_at)}</td>
                <td>{e.event_type}</td>
                <td>{typeof e.details?.decision === 'string' ? <span class={`badge ${e.details.decision}`}>{e.details.decision}</span> : '—'}</td>
                <td>{typeof e.details?.decision_reason === 'string'
                  ? `${e.details.decision_reason}${typeof e.details.constraint === 'string' ? ` (${e.details.constraint})` : ''}`
                  : typeof e.details?.note === 'string' ? `note: “${e.details.note}”` : '—'}</td>
                <td>{e.required_scope ?? '—'}</td>
                <td>{agentName(e.agent_id)}</td>
                <td class="mono" title={e.cert_id ?? ''}>{shortId(e.cert_id)}</td>
                <td>{why ? <button type="button" class="link" aria-expanded={open.has(why)}
                  aria-controls={open.has(why) ? `why-row-${why}` : undefined} aria-describedby={`at-${e.event_id}`}
                  onClick={() => toggle(why)}>Why?</button> : '—'}</td>
              </tr>
              {why && open.has(why) && (
                <tr class="explain" id={`why-row-${why}`}><td colSpan={8}>
                  <Explanation decisionId={why} agentName={agentName} /></td></tr>
              )}</Fragment>);
            })}
          </tbody>
        </table>
      )}
      {next && <button type="button" onClick={() => { void older(); }} aria-disabled={busy}>Load older events</button>}
    </section>
  );
}
