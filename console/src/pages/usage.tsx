/**
 * Usage: the balance and counters (GET /v1/service/usage/personal) and a
 * chart of the last 14 days — verify calls, allows and denies per day, from
 * the audit trail's decisions, and the credit balance at the end of each day,
 * worked back from today's balance at the price per call. A table under the
 * chart gives the same numbers.
 */
import type { JSX } from 'preact';
import { api } from '../api.js';
import { ErrorText, PageTitle, useLoad } from '../ui/common.js';
import { dollars } from '../ui/format.js';
import type { AuditEvent, Usage } from '../types.js';

/** Days shown, and audit pages read at most (200 events each). */
export const USAGE_DAYS = 14;
const MAX_PAGES = 20;

/** One day of the chart. */
export interface DayUsage { day: string; calls: number; allows: number; denies: number; creditsMicros: number }

function dayKey(t: Date): string {
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${t.getFullYear()}-${p(t.getMonth() + 1)}-${p(t.getDate())}`;
}

/** Buckets verify decisions by local day; credits at each day's end = balance now + price × calls after that day. */
export function usageByDay(events: AuditEvent[], balanceMicros: number, priceMicros: number, now: Date, days = USAGE_DAYS): DayUsage[] {
  const out: DayUsage[] = [];
  const start = new Date(now.getFullYear(), now.getMonth(), now.getDate() - (days - 1));
  for (let i = 0; i < days; i++) {
    const d = new Date(start.getFullYear(), start.getMonth(), start.getDate() + i);
    out.push({ day: dayKey(d), calls: 0, allows: 0, denies: 0, creditsMicros: 0 });
  }
  const byDay = new Map(out.map((d) => [d.day, d]));
  for (const e of events) {
    // Only decisions: not presents, approvals or administrative events (docs/audit.md).
    if (typeof e.details?.decision !== 'string') continue;
    const b = byDay.get(dayKey(new Date(e.occurred_at)));
    if (!b) continue;
    b.calls += 1;
    if (e.details?.decision === 'allow') b.allows += 1; else b.denies += 1;
  }
  let after = 0;
  for (let i = out.length - 1; i >= 0; i--) {
    out[i]!.creditsMicros = balanceMicros + after * priceMicros;
    after += out[i]!.calls;
  }
  return out;
}

function Chart(p: { days: DayUsage[] }): JSX.Element {
  const W = 720; const H = 240; const L = 40; const R = 64; const T = 16; const B = 28;
  const maxCalls = Math.max(1, ...p.days.map((d) => d.calls));
  const maxCredits = Math.max(1, ...p.days.map((d) => d.creditsMicros));
  const slot = (W - L - R) / p.days.length;
  const y = (v: number): number => T + (H - T - B) * (1 - v / maxCalls);
  const yc = (v: number): number => T + (H - T - B) * (1 - v / maxCredits);
  const line = p.days.map((d, i) => `${i ? 'L' : 'M'}${(L + slot * (i + 0.5)).toFixed(1)},${yc(d.creditsMicros).toFixed(1)}`).join(' ');
  return (
    <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby="chart-title chart-desc" class="chart">
      <title id="chart-title">Verify calls per day and credits</title>
      <desc id="chart-desc">Bars: allowed and denied calls per day for the last {p.days.length} days. Line: credit balance
        at the end of each day. The table below has the numbers.</desc>
      <line x1={L} y1={H - B} x2={W - R} y2={H - B} class="axis" />
      <text x={L - 6} y={y(maxCalls) + 4} class="tick" text-anchor="end">{maxCalls}</text>
      <text x={L - 6} y={H - B + 4} class="tick" text-anchor="end">0</text>
      <text x={W - R + 6} y={yc(maxCredits) + 4} class="tick">{dollars(maxCredits)}</text>
      {p.days.map((d, i) => {
        const x = L + slot * i + slot * 0.15;
        const w = slot * 0.35;
        return (
          <g key={d.day}>
            <rect x={x} y={y(d.allows)} width={w} height={H - B - y(d.allows)} class="bar allow" />
            <rect x={x + w} y={y(d.denies)} width={w} height={H - B - y(d.denies)} class="bar deny" />
            {i % 2 === 0 && <text x={L + slot * (i + 0.5)} y={H - 8} class="tick" text-anchor="middle">{d.day.slice(5)}</text>}
          </g>
        );
      })}
      <path d={line} class="credits" />
    </svg>
  );
}

/** The usage page. */
export function UsagePage(): JSX.Element {
  const d = useLoad(async () => {
    const usage = await api<Usage>('GET', '/v1/service/usage/personal');
    const since = Date.now() - USAGE_DAYS * 86_400_000;
    const events: AuditEvent[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < MAX_PAGES; i++) {
      const r: { events: AuditEvent[]; next_cursor: string | null } = await api(
        'GET', '/v1/service/audit/personal', undefined, { query: { limit: '200', cursor: cursor ?? undefined } });
      events.push(...r.events);
      cursor = r.next_cursor;
      const last = r.events[r.events.length - 1];
      if (!cursor || (last && Date.parse(last.occurred_at) < since)) { cursor = null; break; }
    }
    return { usage, days: usageByDay(events, usage.balance_micros, usage.price_per_verify_micros, new Date()), partial: cursor !== null };
  });
  const u = d.data?.usage;
  return (
    <section>
      <PageTitle>Usage</PageTitle>
      <ErrorText error={d.error} />
      {u && d.data && (
        <>
          <dl class="facts">
            <dt>Credits</dt><dd>{dollars(u.balance_micros)} ({u.remaining_verify_calls} verify calls at {dollars(u.price_per_verify_micros)} each)</dd>
            <dt>Verify calls</dt><dd>{u.verify_calls}</dd>
            <dt>Allowed</dt><dd>{u.allows}</dd>
            <dt>Denied</dt><dd>{u.denies}</dd>
          </dl>
          <figure>
            <Chart days={d.data.days} />
            <figcaption>
              <span class="key allow">allowed</span> <span class="key deny">denied</span> <span class="key credits">credits</span>
              {' '}Daily figures come from the audit trail's decisions
              {d.data.partial ? ' (the oldest days may be incomplete: only the newest 4000 events were read)' : ''}.
              The totals above also count billed calls refused before a decision.
            </figcaption>
          </figure>
          <table>
            <caption>Per day (your time zone)</caption>
            <thead><tr><th scope="col">Day</th><th scope="col">Calls</th><th scope="col">Allowed</th>
              <th scope="col">Denied</th><th scope="col">Credits at end of day</th></tr></thead>
            <tbody>
              {[...d.data.days].reverse().map((x) => (
                <tr key={x.day}><th scope="row">{x.day}</th><td>{x.calls}</td><td>{x.allows}</td><td>{x.denies}</td><td>{dollars(x.creditsMicros)}</td></tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
