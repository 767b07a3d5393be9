/**
 * Formatting for the console: times (local, with the exact UTC time in a
 * title), short ids, money in micro-dollars, and plural nouns.
 */

/** A time for display in the reader's zone (`2026-05-01 14:03:07`); '—' for null. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** The first characters of an id, enough to tell ids apart on one screen. */
export function shortId(id: string | null | undefined): string {
  if (!id) return '—';
  const core = id.startsWith('cert-') ? id.slice(5) : id;
  return (id.startsWith('cert-') ? 'cert-' : '') + core.slice(0, 8);
}

/** Dollars from micro-dollars, exact (integer arithmetic), with 2–6 decimals. */
export function dollars(micros: number): string {
  const neg = micros < 0;
  const m = Math.abs(Math.trunc(micros));
  const whole = Math.floor(m / 1_000_000);
  const frac = String(m % 1_000_000).padStart(6, '0').replace(/0{1,4}$/, '');
  return `${neg ? '-' : ''}$${whole}.${frac.padEnd(2, '0')}`;
}

/** `1 event`, `3 events`. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** An ISO time from a `datetime-local` value (the reader's zone), or null when empty or invalid. */
export function fromLocalInput(v: string): string | null {
  if (!v) return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}
