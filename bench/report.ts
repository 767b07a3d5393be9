/**
 * Results of a benchmark run: their shape, the targets (met / not met), the
 * one printed table (Markdown) and the SVG chart.
 */
import type { LoadResult } from './load.ts';
import type { ProfileSummary } from './profile.ts';
import type { Backend } from './plan.ts';

/** The gateway comparison's variants: `stub` is the agent-authz gateway in front of bench/servers.ts's stand-in sidecar (reference only). */
export type GatewayVariant = 'gateway' | 'stub' | 'plain' | 'jose' | 'direct';

/** Everything measured for one ML-DSA backend (one sidecar runtime). */
export interface BackendResults {
  ceiling?: {
    node: string; verifyPerSec: number; verifyUs: number; signPerSec: number; signUs: number;
    /** CPU time per operation, and CPU time ÷ wall time of the loop (well below 1 = the machine was busy). */
    verifyCpuUs: number; signCpuUs: number; cpuShare: number;
  };
  present?: LoadResult[];
  verify?: LoadResult[];
  /** GET /healthz at c=1 on the same sidecar: the HTTP round-trip baseline. */
  healthzC1?: LoadResult;
  cpuMsPerVerify?: number;
  bytesPerVerify?: number | undefined;
  bytesPerPresent?: number | undefined;
  rssMb?: number;
  gateway?: Partial<Record<GatewayVariant, {
    c50: LoadResult; c1: LoadResult;
    /** CPU ms per request at c=50 of the serving process (gateway / proxy / upstream), the upstream, and the sidecar (gateway: the real one; stub: the stand-in). */
    cpuMsPerReq?: { server: number; upstream: number; sidecar?: number };
  }>>;
  profiles?: { verify?: ProfileSummary; present?: ProfileSummary; gateway?: ProfileSummary };
}

/** A whole run. */
export interface Results {
  meta: {
    date: string; smoke: boolean; full: boolean; scale: number; command: string; sections: string[]; backends: Backend[];
    machine: { nproc: number; cpuModel: string; memGb: number; loadAvg: number[] };
    node: { loadGenerator: string; native?: string; noble?: string };
    durationS: number;
  };
  backends: Partial<Record<Backend, BackendResults>>;
  scaling?: {
    backend: Backend;
    rows: { small: number; big: number; certs: number };
    counts: Record<string, unknown>;
    seedSeconds: { small: number; big: number; certs: number };
    verify: { small: LoadResult; big: LoadResult; certs: LoadResult };
    auditRead: { small: LoadResult; big: LoadResult };
  };
  webhooks?: { backend: Backend; enqueued: number; delivered: number; perSec: number; startupS: number; allDeliveredAfterReadyS: number | undefined };
  targets?: Target[];
}

/** One target of the issue, evaluated. */
export interface Target { id: string; label: string; backend: Backend; value: string; limit: string; met: boolean | undefined }

const int = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en-US'));
const fix = (n: number | undefined, d = 2): string => (n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(d));
const lat = (r: LoadResult | undefined): string => (r ? `${int(r.rps)}/s · ${int(r.p50)} / ${int(r.p99)} / ${int(r.p999)} µs` : '—');
const pow10 = (n: number): string => {
  const e = Math.log10(n);
  return Number.isInteger(e) && e >= 3 ? `10^${e}` : int(n);
};

/** Best throughput over the levels (saturation). */
export function bestRps(rs: LoadResult[] | undefined): number | undefined {
  if (!rs?.length) return undefined;
  return Math.max(...rs.map((r) => r.rps));
}

/** Verify server time estimate: verify p50 at c=1 minus the /healthz p50 at c=1 (µs). */
export function verifyServerUs(b: BackendResults): number | undefined {
  const c1 = b.verify?.find((r) => r.concurrency === 1);
  if (!c1 || !b.healthzC1) return undefined;
  return Math.max(0, c1.p50 - b.healthzC1.p50);
}

/** Evaluates the issue's targets on `backend` (scaling on whichever backend ran it). */
export function evaluateTargets(res: Results, backend: Backend): Target[] {
  const b = res.backends[backend] ?? {};
  const out: Target[] = [];
  const add = (id: string, label: string, value: number | undefined, shown: string, limit: string, ok: (v: number) => boolean, on: Backend = backend): void => {
    out.push({ id, label, backend: on, value: shown, limit, met: value === undefined || !Number.isFinite(value) ? undefined : ok(value) });
  };
  add('cpu', 'Server CPU per verify (c=64)', b.cpuMsPerVerify, `${fix(b.cpuMsPerVerify, 3)} ms`, '≤ 0.45 ms', (v) => v <= 0.45);
  const vr = bestRps(b.verify) !== undefined && b.ceiling ? bestRps(b.verify)! / b.ceiling.verifyPerSec : undefined;
  add('verify-ratio', 'Verify throughput ÷ crypto ceiling', vr, fix(vr), '≥ 0.60', (v) => v >= 0.6);
  add('present', 'Present throughput (best level)', bestRps(b.present), `${int(bestRps(b.present))}/s`, '≥ 800/s', (v) => v >= 800);
  const g = b.gateway;
  const gp = g?.gateway && g.plain ? g.gateway.c50.rps / g.plain.c50.rps : undefined;
  const gj = g?.gateway && g.jose ? g.gateway.c50.rps / g.jose.c50.rps : undefined;
  add('gw-plain', 'Gateway ÷ plain proxy (c=50 req/s)', gp, fix(gp), '≥ 0.35', (v) => v >= 0.35);
  add('gw-jose', 'Gateway ÷ jose JWT proxy (c=50 req/s)', gj, fix(gj), '≥ 0.60', (v) => v >= 0.6);
  const p99 = g?.gateway ? g.gateway.c50.p99 / 1000 : undefined;
  add('gw-p99', 'Gateway p99 at c=50', p99, `${fix(p99)} ms`, '≤ 40 ms', (v) => v <= 40);
  const added = g?.gateway && g.plain ? (g.gateway.c1.p50 - g.plain.c1.p50) : undefined;
  const server = verifyServerUs(b);
  const budget = server === undefined ? undefined : server + 500;
  add('gw-latency', 'Gateway c=1 p50 added over plain proxy', added === undefined || budget === undefined ? undefined : added - budget,
    `${int(added)} µs`, `≤ verify server time + 0.5 ms = ${int(budget)} µs`, (v) => v <= 0);
  const s = res.scaling;
  const sr = s ? s.verify.big.p50 / s.verify.small.p50 : undefined;
  add('scaling', `Verify p50 at ${s ? pow10(s.rows.big) : '10^6'} ÷ at ${s ? pow10(s.rows.small) : '10^3'} audit rows`, sr, fix(sr, 3), '≤ 1.10', (v) => v <= 1.1, s?.backend ?? backend);
  return out;
}

const status = (t: Target | undefined): string => (t === undefined || t.met === undefined ? 'n/a' : t.met ? 'met' : '**NOT MET**');

/** The one table (Markdown), with every figure and each target. */
export function renderTable(res: Results): string {
  const bks: Backend[] = ['native', 'noble'];
  const targets = res.targets ?? [];
  const tgt = (id: string): Target | undefined => targets.find((t) => t.id === id);
  const rows: string[][] = [];
  const head = ['Figure', 'native', 'noble', 'Target', 'Status'];
  const per = (label: string, f: (b: BackendResults) => string, id?: string): void => {
    const t = id ? tgt(id) : undefined;
    rows.push([label, ...bks.map((k) => (res.backends[k] ? f(res.backends[k]!) : '—')), t ? `${t.limit}${t.backend === 'noble' && bks.includes('native') && !res.backends.native ? ' (noble)' : ''}` : '', t ? status(t) : '']);
  };
  const one = (label: string, on: Backend | undefined, value: string, id?: string): void => {
    const t = id ? tgt(id) : undefined;
    rows.push([label, ...bks.map((k) => (k === on ? value : '—')), t?.limit ?? '', t ? status(t) : '']);
  };
  const section = (s: string): void => { rows.push([`**${s}**`, '', '', '', '']); };

  if (Object.values(res.backends).some((b) => b?.ceiling)) {
    section('Crypto ceiling (in-process loop, 1 core)');
    per('Node version of the sidecar', (b) => b.ceiling?.node ?? '—');
    per('Hybrid verify per second (µs each)', (b) => (b.ceiling ? `${int(b.ceiling.verifyPerSec)}/s (${int(b.ceiling.verifyUs)} µs)` : '—'));
    per('Hybrid sign per second (µs each)', (b) => (b.ceiling ? `${int(b.ceiling.signPerSec)}/s (${int(b.ceiling.signUs)} µs)` : '—'));
    per('Ceiling loop CPU ÷ wall time (< 0.95: busy machine)', (b) => fix(b.ceiling?.cpuShare));
  }
  if (Object.values(res.backends).some((b) => b?.verify)) {
    section('Verify — req/s · p50 / p99 / p99.9');
    for (const c of [1, 16, 64]) per(`Verify c=${c}`, (b) => lat(b.verify?.find((r) => r.concurrency === c)));
    per('Verify throughput ÷ crypto ceiling', (b) => {
      const v = bestRps(b.verify);
      return v !== undefined && b.ceiling ? fix(v / b.ceiling.verifyPerSec) : '—';
    }, 'verify-ratio');
    per('Server CPU per verify at c=64', (b) => `${fix(b.cpuMsPerVerify, 3)} ms`, 'cpu');
    per('  of which the hybrid verify itself (ceiling CPU)', (b) => (b.ceiling ? `${fix(b.ceiling.verifyCpuUs / 1000, 3)} ms` : '—'));
    per('Verify server time (c=1 p50 − /healthz p50)', (b) => `${int(verifyServerUs(b))} µs`);
    per('DB bytes per verify (file + WAL, after checkpoint)', (b) => int(b.bytesPerVerify));
    per('DB bytes per challenge + present', (b) => int(b.bytesPerPresent));
    per('Sidecar RSS after the verify steps', (b) => (b.rssMb ? `${int(b.rssMb)} MiB` : '—'));
  }
  if (Object.values(res.backends).some((b) => b?.present)) {
    section('Present — req/s · p50 / p99 / p99.9');
    for (const c of [1, 16, 64]) per(`Present c=${c}`, (b) => lat(b.present?.find((r) => r.concurrency === c)));
    per('Present throughput (best level)', (b) => `${int(bestRps(b.present))}/s`, 'present');
  }
  if (Object.values(res.backends).some((b) => b?.gateway)) {
    section('Gateway comparison — c=50: req/s · p99; c=1: p50 (interleaved rounds)');
    const names: [GatewayVariant, string][] = [['direct', 'Upstream directly'], ['plain', 'Plain @fastify/http-proxy'], ['jose', 'Proxy + jose EdDSA JWT verify'], ['gateway', 'agent-authz gateway + sidecar'], ['stub', 'Reference: agent-authz gateway + stub sidecar (allow, no work)']];
    for (const [v, label] of names) {
      per(label, (b) => {
        const x = b.gateway?.[v];
        return x ? `${int(x.c50.rps)}/s · ${fix(x.c50.p99 / 1000)} ms; c=1 ${int(x.c1.p50)} µs` : '—';
      });
    }
    per('CPU per request at c=50: proxy / gateway + sidecar', (b) => {
      const g = b.gateway;
      const ms = (x: number | undefined): string => fix(x, 2);
      if (!g?.gateway?.cpuMsPerReq) return '—';
      const stubbed = g.stub?.cpuMsPerReq ? `; with the stub: gateway ${ms(g.stub.cpuMsPerReq.server)} + stub ${ms(g.stub.cpuMsPerReq.sidecar)}` : '';
      return `plain ${ms(g.plain?.cpuMsPerReq?.server)}, jose ${ms(g.jose?.cpuMsPerReq?.server)}, gateway ${ms(g.gateway.cpuMsPerReq.server)} + sidecar ${ms(g.gateway.cpuMsPerReq.sidecar)}${stubbed} ms`;
    });
    per('Gateway ÷ plain proxy (c=50 req/s)', (b) => (b.gateway?.gateway && b.gateway.plain ? fix(b.gateway.gateway.c50.rps / b.gateway.plain.c50.rps) : '—'), 'gw-plain');
    per('Gateway ÷ jose JWT proxy (c=50 req/s)', (b) => (b.gateway?.gateway && b.gateway.jose ? fix(b.gateway.gateway.c50.rps / b.gateway.jose.c50.rps) : '—'), 'gw-jose');
    per('Gateway p99 at c=50', (b) => (b.gateway?.gateway ? `${fix(b.gateway.gateway.c50.p99 / 1000)} ms` : '—'), 'gw-p99');
    per('Gateway c=1 p50 added over plain proxy', (b) => {
      const g = b.gateway;
      const s = verifyServerUs(b);
      return g?.gateway && g.plain ? `${int(g.gateway.c1.p50 - g.plain.c1.p50)} µs (budget ${int(s === undefined ? undefined : s + 500)} µs)` : '—';
    }, 'gw-latency');
  }
  const s = res.scaling;
  if (s) {
    section(`Scaling — verify at c=1, store on the ${s.backend} sidecar`);
    one(`Verify p50 at ${pow10(s.rows.small)} audit rows`, s.backend, `${int(s.verify.small.p50)} µs (p99 ${int(s.verify.small.p99)})`);
    one(`Verify p50 at ${pow10(s.rows.big)} audit rows`, s.backend, `${int(s.verify.big.p50)} µs (p99 ${int(s.verify.big.p99)})`);
    one(`Ratio ${pow10(s.rows.big)} ÷ ${pow10(s.rows.small)}`, s.backend, fix(s.verify.big.p50 / s.verify.small.p50, 3), 'scaling');
    one(`Verify p50 with ${pow10(s.rows.certs)} certificates + agents`, s.backend, `${int(s.verify.certs.p50)} µs (÷ small: ${fix(s.verify.certs.p50 / s.verify.small.p50, 3)})`);
    one(`Audit read (limit=25) p50 / p99 at ${pow10(s.rows.big)} rows`, s.backend, `${int(s.auditRead.big.p50)} / ${int(s.auditRead.big.p99)} µs`);
    one(`Audit read (limit=25) p50 / p99 at ${pow10(s.rows.small)} rows`, s.backend, `${int(s.auditRead.small.p50)} / ${int(s.auditRead.small.p99)} µs`);
    one(`Seeding time ${pow10(s.rows.big)} audit rows / ${pow10(s.rows.certs)} certs`, s.backend, `${fix(s.seedSeconds.big, 1)} s / ${fix(s.seedSeconds.certs, 1)} s`);
  }
  const w = res.webhooks;
  if (w) {
    section('Webhooks');
    one('Outbox drain to a local receiver', w.backend, `${int(w.perSec)} events/s (${int(w.delivered)}/${int(w.enqueued)} delivered)`);
  }
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => `| ${r.map((c, i) => c.padEnd(width[i]!)).join(' | ')} |`;
  const m = res.meta;
  const title = `agent-authz benchmark${m.smoke ? ' (SMOKE: tiny counts, not a measurement)' : ''}${m.scale !== 1 ? ` (shortened: --scale=${m.scale})` : ''} — ${m.date} — ${m.machine.nproc} cores ${m.machine.cpuModel}, `
    + `load generator Node ${m.node.loadGenerator}, load avg at start ${m.machine.loadAvg.join(' ')} — ${fix(m.durationS, 1)} s`;
  return [title, '', line(head), `|${width.map((n) => '-'.repeat(n + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** The results without latency samples (for the JSON file). */
export function stripSamples(res: Results): unknown {
  return JSON.parse(JSON.stringify(res, (k, v: unknown) => (k === 'samples' ? undefined : v)));
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

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
  const variants: [GatewayVariant, string][] = [['direct', 'upstream'], ['plain', 'plain proxy'], ['jose', 'jose proxy'], ['gateway', 'agent-authz'], ['stub', 'stub (ref.)']];
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
      out.push(`<text x="${(x + (bw - 3) / 2).toFixed(1)}" y="${(yLin(r) - 4).toFixed(1)}" text-anchor="middle" font-size="10">${Math.round(r).toLocaleString('en-US')}</text>`);
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
  out.push(`<text x="${W / 2}" y="${H - 12}" text-anchor="middle" fill="#666" font-size="11">stub (ref.): the agent-authz gateway in front of a stand-in sidecar that answers allow without any work (a reference, not a target).</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
