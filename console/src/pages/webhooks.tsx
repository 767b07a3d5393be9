/**
 * Webhook deliveries (GET /v1/service/webhooks/deliveries): state, attempts
 * and the last error, filtered by state, with cursor pagination; a delivery's
 * attempt history on demand; and redelivery (same delivery id and body).
 */
import type { JSX } from 'preact';
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorText, PageTitle, StatusText, useLoad } from '../ui/common.js';
import { useApp } from '../app.js';
import { allows } from '../session.js';
import { shortId, when } from '../ui/format.js';
import type { Delivery } from '../types.js';

const STATES = ['pending', 'delivered', 'dead', 'disabled'];

function Attempts(p: { id: string }): JSX.Element {
  const d = useLoad(() => api<Delivery>('GET', `/v1/service/webhooks/deliveries/${p.id}`), [p.id]);
  if (d.error) return <ErrorText error={d.error} />;
  if (!d.data) return <p role="status">Loading attempts…</p>;
  const h = d.data.attempt_history ?? [];
  if (h.length === 0) return <p>No attempt yet.</p>;
  return (
    <table class="inner">
      <caption>Attempts of {shortId(p.id)}</caption>
      <thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">HTTP status</th>
        <th scope="col">Error</th><th scope="col">Duration</th></tr></thead>
      <tbody>{h.map((a) => <tr key={a.attempt}><td>{a.attempt}</td><td>{when(a.attempted_at)}</td>
        <td>{a.status ?? '—'}</td><td>{a.error ?? '—'}</td>
        <td>{a.duration_ms === null ? '—' : `${a.duration_ms} ms`}</td></tr>)}</tbody>
    </table>
  );
}

/** The webhooks page. */
export function WebhooksPage(): JSX.Element {
  const { session } = useApp();
  const manage = allows(session, 'platforms_manage');
  const [state, setState] = useState('');
  const [pages, setPages] = useState<string[]>([]);
  const [open, setOpen] = useState<string | null>(null);
  const [status, setStatus] = useState('');
  const [error, setError] = useState<unknown>(null);
  const cursor = pages[pages.length - 1];
  const d = useLoad(() => api<{ deliveries: Delivery[]; next_cursor: string | null }>('GET', '/v1/service/webhooks/deliveries', undefined,
    { query: { state: state || undefined, cursor, limit: '25' } }), [state, cursor]);

  const redeliver = async (id: string): Promise<void> => {
    setError(null);
    try {
      await api('POST', `/v1/service/webhooks/deliveries/${id}/redeliver`);
      setStatus(`Delivery ${shortId(id)} is queued again.`);
      d.reload();
    } catch (err) { setError(err); }
  };

  return (
    <section>
      <PageTitle>Webhooks</PageTitle>
      {!manage && <p class="notice">Your role ({session.workspace?.role}) reads the deliveries; redelivering needs
        an owner or admin.</p>}
      <div class="panel row wrap">
        <label for="wh-state">State</label>
        <select id="wh-state" value={state} onChange={(e) => { setState((e.target as HTMLSelectElement).value); setPages([]); }}>
          <option value="">all</option>{STATES.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
        <button type="button" onClick={d.reload}>Refresh</button>
      </div>
      <ErrorText error={d.error ?? error} />
      <StatusText>{status}</StatusText>
      {d.data && (d.data.deliveries.length === 0 ? <p>No deliveries{state ? ` in state ${state}` : ''}.</p> : (
        <table>
          <caption>Webhook deliveries, newest first</caption>
          <thead><tr><th scope="col">Event</th><th scope="col">State</th><th scope="col">Attempts</th>
            <th scope="col">Last result</th><th scope="col">Next attempt</th><th scope="col">Created</th>
            <th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {d.data.deliveries.map((x) => (
              <Fragment key={x.delivery_id}>
                <tr>
                  <td>{x.event}</td>
                  <td><span class={`badge ${x.state}`}>{x.state}</span></td>
                  <td>{x.attempts}</td>
                  <td>{x.last_status ?? ''}{x.last_error ? ` ${x.last_error}` : x.last_status === null ? '—' : ''}</td>
                  <td>{when(x.next_attempt_at)}</td>
                  <td>{when(x.created_at)}</td>
                  <td class="actions">
                    <button type="button" aria-expanded={open === x.delivery_id} onClick={() => setOpen(open === x.delivery_id ? null : x.delivery_id)}>
                      Attempts<span class="sr-only"> of {x.event} {shortId(x.delivery_id)}</span></button>
                    {manage && <button type="button" onClick={() => { void redeliver(x.delivery_id); }}>Redeliver<span
                      class="sr-only"> {x.event} {shortId(x.delivery_id)}</span></button>}
                  </td>
                </tr>
                {open === x.delivery_id && <tr><td colSpan={7}><Attempts id={x.delivery_id} /></td></tr>}
              </Fragment>
            ))}
          </tbody>
        </table>
      ))}
      <div class="actions">
        {pages.length > 0 && <button type="button" onClick={() => setPages(pages.slice(0, -1))}>Newer</button>}
        {d.data?.next_cursor && <button type="button" onClick={() => setPages([...pages, d.data!.next_cursor!])}>Older</button>}
      </div>
    </section>
  );
}
