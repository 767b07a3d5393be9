/**
 * The benchmark's chart (SVG): verify latency (p50 and p99) against
 * concurrency for each backend, and gateway throughput at c=50 against the
 * baselines (upstream, plain proxy, jose proxy) and the stub and hop references.
 */
import type { Backend } from './plan.js';
import type { GatewayVariant, Results } from './report.js';
import { escapeXml as esc } from './svg.js';

/** The chart: verify latency (p50/p99) against concurrency, and gateway throughput against the baselines. */
export function renderSvg(res: Results): string {
  const W = 960;
  const H = 400;
  const colors: Record<Backend, string> = { native: '#1f6fb4', noble: '#e07b14' };
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  const m = res.meta;
  out.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">agent-authz benchmark${m.smoke ? ' (smoke run, not a measurement)' : ''}${m.scale !== 1 ? ` (shortened run, --scale=${m.scale})` : ''}</text>`);
  out.push(`<text x="${W / 2}" y="37" text-anchor="middle" fill="#555">${esc(`${m.date.slice(0, 16)}Z · ${m.machine.nproc} cores ${m.machine.cpuModel} · sidecar Node ${[m.node.native, m.node.noble].filter(Boolean).join(' / ')}`)}</text>`);

  // Panel 1: verify latency vs concurrency (log scale).
  const p1 = { x: 70, y: 60, w: 360, h: 270 };
  const levels = [1, 16, 64];
  const series: { name: string; color: string; dash: string; pts: [number, number][] }[] = [];
  for (const b of ['native', 'noble'] as Backend[]) {
    const v = res.backends[b]?.verify;
    if (!v) continue;
    for (const [q, dash] of [['p50', ''], ['p99', '6,4']] as const) {
      const pts = levels.map((c, i) => [i, v.find((r) => r.concurrency === c)?.[q]] as [number, number | undefined]).filter((p): p is [number, number] => p[1] !== undefined && Number.isFinite(p[1]));
      series.push({ name: `${b} ${q}`, color: colors[b], dash, pts });
    }
  }
  const vals = series.flatMap((s) => s.pts.map((p) => p[1]));
  const lo = vals.length ? 10 ** Math.floor(Math.log10(Math.min(...vals))) : 100;
  const hi = vals.length ? 10 ** Math.ceil(Math.log10(Math.max(...vals))) : 100_000;
  const yLog = (v: number): number => p1.y + p1.h - ((Math.log10(v) - Math.log10(lo)) / Math.max(1e-9, Math.log10(hi) - Math.log10(lo))) * p1.h;
  const xCat = (i: number): number => p1.x + 30 + (i * (p1.w - 60)) / (levels.length - 1);
  out.push(`<text x="${p1.x + p1.w / 2}" y="${p1.y - 6}" text-anchor="middle" font-weight="bold">Verify latency vs concurrency</text>`);
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    for (const k of [1, 2, 5]) {
      const v = d * k;
      if (v > hi * 1.0001) break;
      const y = yLog(v);
      out.push(`<line x1="${p1.x}" y1="${y.toFixed(1)}" x2="${p1.x + p1.w}" y2="${y.toFixed(1)}" stroke="${k === 1 ? '#ccc' : '#eee'}"/>`);
      out.push(`<text x="${p1.x - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#444">${v >= 1000 ? `${v / 1000} ms` : `${v} µs`}</text>`);
    }
  }
  out.push(`<rect x="${p1.x}" y="${p1.y}" width="${p1.w}" height="${p1.h}" fill="none" stroke="#888"/>`);
  levels.forEach((c, i) => out.push(`<text x="${xCat(i)}" y="${p1.y + p1.h + 16}" text-anchor="middle">${c}</text>`));
  out.push(`<text x="${p1.x + p1.w / 2}" y="${p1.y + p1.h + 32}" text-anchor="middle" fill="#444">concurrent clients</text>`);
  for (const s of series) {
    if (!s.pts.length) continue;
    out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" ${s.dash ? `stroke-dasharray="${s.dash}"` : ''} points="${s.pts.map(([i, v]) => `${xCat(i).toFixed(1)},${yLog(v).toFixed(1)}`).join(' ')}"/>`);
    for (const [i, v] of s.pts) out.push(`<circle cx="${xCat(i).toFixed(1)}" cy="${yLog(v).toFixed(1)}" r="3" fill="${s.color}"><title>${esc(`${s.name} c=${levels[i]}: ${Math.round(v)} µs`)}</title></circle>`);
  }
  series.forEach((s, i) => {
    const y = p1.y + 14 + i * 16;
    out.push(`<line x1="${p1.x + 10}" y1="${y - 4}" x2="${p1.x + 34}" y2="${y - 4}" stroke="${s.color}" stroke-width="2" ${s.dash ? `stroke-dasharray="${s.dash}"` : ''}/>`);
    out.push(`<text x="${p1.x + 40}" y="${y}">${esc(s.name)}</text>`);
  });

  // Panel 2: gateway throughput at c=50 against the baselines.
  const p2 = { x: 540, y: 60, w: 390, h: 270 };
  const variants: [GatewayVariant, string][] = [['direct', 'upstream'], ['plain', 'plain proxy'], ['jose', 'jose proxy'], ['gateway', 'agent-authz'], ['stub', 'stub (ref.)'], ['hop', 'hop (ref.)']];
  const bks = (['native', 'noble'] as Backend[]).filter((b) => res.backends[b]?.gateway);
  const tp = bks.flatMap((b) => variants.map(([v]) => res.backends[b]!.gateway![v]?.c50.rps ?? 0));
  const max = tp.length ? Math.max(...tp) * 1.15 : 1;
  const step = 10 ** Math.floor(Math.log10(max / 2));
  const tick = [1, 2, 5].map((k) => k * step).find((t) => max / t <= 6) ?? step * 10;
  const yLin = (v: number): number => p2.y + p2.h - (v / max) * p2.h;
  out.push(`<text x="${p2.x + p2.w / 2}" y="${p2.y - 6}" text-anchor="middle" font-weight="bold">Throughput at 50 concurrent clients (req/s)</text>`);
  for (let v = 0; v <= max; v += tick) {
    out.push(`<line x1="${p2.x}" y1="${yLin(v).toFixed(1)}" x2="${p2.x + p2.w}" y2="${yLin(v).toFixed(1)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${p2.x - 6}" y="${(yLin(v) + 4).toFixed(1)}" text-anchor="end" fill="#444">${v.toLocaleString('en-US')}</text>`);
  }
  out.push(`<rect x="${p2.x}" y="${p2.y}" width="${p2.w}" height="${p2.h}" fill="none" stroke="#888"/>`);
  const gw = p2.w / variants.length;
  const bw = Math.min(36, (gw - 16) / Math.max(1, bks.length));
  variants.forEach(([v, label], i) => {
    const gx = p2.x + i * gw + (gw - bw * bks.length) / 2;
    bks.forEach((b, j) => {
      const r = res.backends[b]!.gateway![v]?.c50.rps ?? 0;
      const x = gx + j * bw;
      out.push(`<rect x="${x.toFixed(1)}" y="${yLin(r).toFixed(1)}" width="${(bw - 3).toFixed(1)}" height="${(p2.y + p2.h - yLin(r)).toFixed(1)}" fill="${colors[b]}"><title>${esc(`${label} (${b} sidecar): ${Math.round(r)} req/s`)}</title></rect>`);
      const shown = r >= 10_000 ? `${(r / 1000).toFixed(1)}k` : Math.round(r).toLocaleString('en-US');
      out.push(`<text x="${(x + (bw - 3) / 2).toFixed(1)}" y="${(yLin(r) - 4).toFixed(1)}" text-anchor="middle" font-size="9">${shown}</text>`);
    });
    out.push(`<text x="${(p2.x + i * gw + gw / 2).toFixed(1)}" y="${p2.y + p2.h + 16}" text-anchor="middle" font-size="11">${esc(label)}</text>`);
  });
  bks.forEach((b, j) => {
    const x = p2.x + p2.w - 160;
    const y = p2.y + 40 + j * 16;
    out.push(`<rect x="${x}" y="${y - 10}" width="12" height="12" fill="${colors[b]}"/>`);
    out.push(`<text x="${x + 18}" y="${y}">${b === 'native' ? 'native ML-DSA sidecar' : 'noble ML-DSA sidecar'}</text>`);
  });
  if (!bks.length) out.push(`<text x="${p2.x + p2.w / 2}" y="${p2.y + p2.h / 2}" text-anchor="middle" fill="#888">gateway not run</text>`);
  out.push(`<text x="${W / 2}" y="${H - 26}" text-anchor="middle" fill="#666" font-size="11">Right: each backend's bars come from its own run; the baselines do not use the sidecar and run in the same interleaved rounds as the gateway.</text>`);
  out.push(`<text x="${W / 2}" y="${H - 12}" text-anchor="middle" fill="#666" font-size="11">References, not targets. stub: this gateway + a sidecar doing no work; hop: the plain proxy + one call to a do-nothing verify service.</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
