/**
 * The operations files that are not code: config/sidecar.example.env lists
 * every SIDECAR_* variable and loads as a valid configuration;
 * config/grafana-dashboard.json is an importable dashboard whose every query
 * references metrics (and labels) the sidecar or the gateway really export;
 * the deployment examples reference the real health paths and ports.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import type { Registry } from 'prom-client';
import { DEFAULTS, ENV_VARS, loadConfig } from '../../../sidecar/config/index.js';
import { createMetrics } from '../../../sidecar/metrics.js';
import { createGatewayMetrics } from '../../../gateway-plugin/metrics.js';
import { resolveConfig } from '../../../gateway-plugin/standalone/config.js';
import { REPO } from './helpers.js';

const read = (p: string) => fs.readFileSync(path.join(REPO, p), 'utf8');

t.test('config/sidecar.example.env', async (t) => {
  const text = read('config/sidecar.example.env');
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
  }
  t.same(Object.keys(env).sort(), [...ENV_VARS].sort(), 'every SIDECAR_* variable, nothing else');
  const c = loadConfig(env);
  t.equal(c.port, DEFAULTS.port);
  t.equal(c.logLevel, DEFAULTS.logLevel);
  t.equal(c.shutdownTimeoutMs, DEFAULTS.shutdownTimeoutMs);
  t.equal(c.challengeRetentionHours, DEFAULTS.challengeRetentionHours);
  t.equal(c.auditRetentionDays, DEFAULTS.auditRetentionDays);
  t.equal(c.bodyLimitBytes, DEFAULTS.bodyLimitBytes);
  t.equal(c.challengeTtlSeconds, DEFAULTS.challengeTtlSeconds);
});

/** name → label names of every series the sidecar and the gateway export. */
function knownSeries(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (registry: Registry) => {
    for (const m of registry.getMetricsAsArray() as unknown as { name: string; labelNames?: string[]; constructor: { name: string } }[]) {
      const labels = new Set(m.labelNames ?? []);
      const kind = m.constructor.name;
      if (kind === 'Histogram') {
        out.set(`${m.name}_bucket`, new Set([...labels, 'le']));
        out.set(`${m.name}_sum`, labels);
        out.set(`${m.name}_count`, labels);
      } else out.set(m.name, labels);
    }
  };
  add(createMetrics().registry);
  add(createGatewayMetrics().registry);
  return out;
}

const PROMQL_WORDS = new Set([
  'sum', 'min', 'max', 'avg', 'count', 'by', 'without', 'rate', 'irate', 'increase', 'histogram_quantile', 'bottomk', 'topk',
  'label_values', 'le', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'clamp_min', 'abs', 'vector',
]);

t.test('config/grafana-dashboard.json', async (t) => {
  const dash = JSON.parse(read('config/grafana-dashboard.json')) as {
    title: string; uid: string; schemaVersion: number; panels: { id: number; type: string; title: string; gridPos: object; datasource?: unknown; targets?: { expr: string; refId: string }[] }[];
    templating: { list: { name: string; type: string; query?: unknown }[] };
  };
  t.ok(dash.title && dash.uid, 'title and uid');
  t.ok(Number.isInteger(dash.schemaVersion) && dash.schemaVersion >= 30, 'schemaVersion');
  t.ok(dash.templating.list.some((v) => v.type === 'datasource' && v.query === 'prometheus'), 'a Prometheus datasource variable');
  const ids = dash.panels.map((p) => p.id);
  t.equal(new Set(ids).size, ids.length, 'unique panel ids');

  const known = knownSeries();
  const exprs: { panel: string; expr: string }[] = [];
  for (const p of dash.panels) {
    t.ok(p.gridPos, `${p.title}: gridPos`);
    if (p.type === 'row') continue;
    t.same(p.datasource, { type: 'prometheus', uid: '${datasource}' }, `${p.title}: Prometheus datasource`);
    t.ok(p.targets && p.targets.length > 0, `${p.title}: has targets`);
    for (const target of p.targets ?? []) exprs.push({ panel: p.title, expr: target.expr });
  }
  for (const v of dash.templating.list) {
    const q = (v.query as { query?: string } | undefined)?.query;
    if (typeof q === 'string') exprs.push({ panel: `variable ${v.name}`, expr: q });
  }
  const titles = dash.panels.map((p) => p.title.toLowerCase()).join(' | ');
  for (const want of ['decisions per second', 'verify latency p50 / p99', '503 causes', 'outbox', 'credits']) t.match(titles, want, `a panel for ${want}`);

  for (const { panel, expr } of exprs) {
    // Strip strings and [ranges] so only identifiers remain.
    const bare = expr.replace(/"[^"]*"/g, '""').replace(/\[[^\]]*\]/g, '').replace(/label_values\(([^,()]+),\s*\w+\)/g, 'label_values($1)');
    const metrics = [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?/g)]
      .filter((m) => !PROMQL_WORDS.has(m[1]!) && !/^\d/.test(m[1]!) && !/^\$/.test(m[1]!))
      .filter((m) => {
        // Skip label names inside by (...) and selectors: keep names followed by a selector, ')' , ',' or end.
        const before = bare.slice(0, m.index);
        const open = before.lastIndexOf('(');
        const close = before.lastIndexOf(')');
        const inBy = /\b(by|without)\s*\($/.test(before.slice(0, open + 1)) && open > close;
        const inSelector = before.lastIndexOf('{') > before.lastIndexOf('}');
        return !inBy && !inSelector;
      });
    t.ok(metrics.length > 0, `${panel}: references a metric (${expr})`);
    for (const m of metrics) {
      const name = m[1]!;
      const labels = known.get(name);
      t.ok(labels, `${panel}: ${name} is exported`);
      if (!labels) continue;
      for (const sel of [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)/g)]) {
        const label = sel[1]!;
        t.ok(label === 'job' || label === 'instance' || labels.has(label), `${panel}: ${name} has label ${label}`);
      }
    }
    for (const by of [...bare.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)]) {
      for (const label of by[1]!.split(',').map((s) => s.trim()).filter(Boolean)) {
        t.ok(label === 'job' || label === 'instance' || [...known.values()].some((ls) => ls.has(label)), `${panel}: label ${label} exists`);
      }
    }
  }
});

t.test('deployment examples', async (t) => {
  const compose = parseYaml(read('examples/compose.yaml')) as { services: Record<string, { healthcheck?: unknown; build?: unknown; image?: string }> };
  t.ok(compose.services.sidecar && compose.services.gateway && compose.services.upstream && compose.services.prometheus, 'compose: sidecar, gateway, upstream, prometheus');
  const prom = parseYaml(read('examples/prometheus.yml')) as { scrape_configs: { job_name: string; metrics_path?: string; static_configs: { targets: string[] }[] }[] };
  const jobs = Object.fromEntries(prom.scrape_configs.map((s) => [s.job_name, s]));
  t.ok(jobs['agent-authz-sidecar'] && jobs['agent-authz-gateway'], 'prometheus scrapes both');
  t.match(jobs['agent-authz-sidecar']!.static_configs[0]!.targets[0], /:8700$/);

  const gatewayEnv = { GATEWAY_API_KEY: `aak_0123456789ab_${'k'.repeat(43)}` };
  const composeGateway = resolveConfig(parseYaml(read('examples/gateway.yaml')), gatewayEnv);
  t.equal(composeGateway.listen.port, 8080, 'compose gateway config is valid');
  t.ok(composeGateway.metrics && composeGateway.metrics.port === 9464 && composeGateway.metrics.host === '0.0.0.0', 'its metrics listener is reachable by Prometheus');
  t.match(jobs['agent-authz-gateway']!.static_configs[0]!.targets[0], /:9464$/);

  const dir = path.join(REPO, 'examples/kubernetes');
  const docs = fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).flatMap((f) => parseAllDocuments(fs.readFileSync(path.join(dir, f), 'utf8')).map((d) => d.toJSON() as { kind: string; spec?: any })); // eslint-disable-line @typescript-eslint/no-explicit-any
  const kinds = docs.map((d) => d.kind);
  for (const k of ['Deployment', 'Service', 'Secret', 'ConfigMap']) t.ok(kinds.includes(k), `kubernetes: a ${k}`);
  const dep = docs.find((d) => d.kind === 'Deployment')!;
  const containers = dep.spec.template.spec.containers as { name: string; readinessProbe?: { httpGet?: { path: string; port: number } }; livenessProbe?: { httpGet?: { path: string } }; env?: { name: string; valueFrom?: { secretKeyRef?: unknown } }[] }[];
  t.same(containers.map((c) => c.name).sort(), ['app', 'gateway', 'sidecar']);
  const sidecar = containers.find((c) => c.name === 'sidecar')!;
  t.equal(sidecar.livenessProbe?.httpGet?.path, '/healthz');
  t.equal(sidecar.readinessProbe?.httpGet?.path, '/readyz');
  t.ok(sidecar.env?.some((e) => e.name === 'SIDECAR_MASTER_KEY' && e.valueFrom?.secretKeyRef), 'master key from a Secret');
  const gateway = containers.find((c) => c.name === 'gateway')!;
  t.equal(gateway.livenessProbe?.httpGet?.path, '/healthz');
  t.equal(gateway.readinessProbe?.httpGet?.path, '/readyz');
  t.ok(gateway.env?.some((e) => e.valueFrom?.secretKeyRef), 'gateway API key from a Secret');

  const cm = docs.find((d) => d.kind === 'ConfigMap') as unknown as { data: Record<string, string> };
  const podGateway = resolveConfig(parseYaml(cm.data['gateway.yaml']!), gatewayEnv);
  t.equal(podGateway.plugin.sidecarUrl, 'http://127.0.0.1:8700/', 'in the pod the gateway reaches the sidecar on localhost');

  const dockerfile = read('Dockerfile');
  t.match(dockerfile, /FROM node:24-bookworm-slim AS build/);
  t.match(dockerfile, /AS sidecar/);
  t.match(dockerfile, /AS gateway/);
  t.match(dockerfile, /npm prune --omit=dev/);
  t.match(dockerfile, /HEALTHCHECK/);
  t.match(dockerfile, /USER node|USER \d+/);
});
