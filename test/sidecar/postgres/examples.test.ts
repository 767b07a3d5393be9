/**
 * The PostgreSQL deployment examples: examples/compose.postgres.yaml (two
 * sidecar replicas on one PostgreSQL, the gateway in front) and the
 * kustomize overlay examples/kubernetes-postgres/ (the base pod scaled to two,
 * its sidecars on a shared database, no SQLite volume). Each sidecar's
 * environment passes the real configuration check; the overlay is rendered
 * with `kubectl kustomize` when kubectl is installed, and read file by file
 * otherwise.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../../sidecar/config/index.js';
import { resolveConfig } from '../../../gateway-plugin/standalone/config.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const read = (p: string): string => fs.readFileSync(path.join(ROOT, p), 'utf8');
/** Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}` with `vars`. */
const interpolate = (v: string, vars: Record<string, string>): string =>
  v.replace(/\$\{([A-Z_]+)(?::([-?])([^}]*))?\}/g, (_m, name: string, op?: string, rest?: string) => vars[name] ?? (op === '-' ? rest ?? '' : ''));

t.test('compose: two sidecars on PostgreSQL and the gateway', async (t) => {
  type Service = { deploy?: { replicas?: number }; environment?: Record<string, string>; depends_on?: Record<string, unknown>; image?: string; volumes?: string[] };
  const c = parseYaml(read('examples/compose.postgres.yaml')) as { services: Record<string, Service> };
  t.ok(c.services.postgres && c.services.sidecar && c.services.gateway && c.services.upstream, 'postgres, sidecar, gateway, upstream');
  t.match(c.services.postgres!.image, /^postgres:1[5-9]/, 'PostgreSQL 15 or later');
  t.equal(c.services.sidecar!.deploy?.replicas, 2, 'two sidecar replicas');
  t.ok(c.services.sidecar!.depends_on?.postgres, 'the sidecars wait for the database');
  const vars = { SIDECAR_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'), POSTGRES_PASSWORD: 'a1b2c3', GATEWAY_API_KEY: `aak_0123456789ab_${'k'.repeat(43)}` };
  const env = Object.fromEntries(Object.entries(c.services.sidecar!.environment!).map(([k, v]) => [k, interpolate(String(v), vars)]).filter(([, v]) => v !== ''));
  const config = loadConfig(env);
  t.equal(config.database?.url, 'postgres://authz:a1b2c3@postgres:5432/authz?sslmode=disable', 'the URL names the postgres service and its database');
  t.equal(c.services.postgres!.environment!.POSTGRES_USER, 'authz');
  t.equal(c.services.postgres!.environment!.POSTGRES_DB, 'authz');
  t.ok(c.services.gateway!.volumes?.some((v) => v.startsWith('./gateway.yaml:')), 'the gateway config of the compose example');
  const gw = resolveConfig(parseYaml(read('examples/gateway.yaml')), vars);
  t.equal(gw.plugin.sidecarUrl, 'http://sidecar:8700/', 'the gateway calls the sidecar service (both replicas)');
});

t.test('kubernetes: the overlay scales the pod to two on a shared database', async (t) => {
  const dir = 'examples/kubernetes-postgres';
  const kust = parseYaml(read(`${dir}/kustomization.yaml`)) as { resources: string[]; patches: { path?: string; patch?: string }[] };
  t.ok(kust.resources.includes('../kubernetes'), 'the base is examples/kubernetes');
  for (const r of kust.resources.filter((x) => x.endsWith('.yaml'))) t.ok(fs.existsSync(path.join(ROOT, dir, r)), `${r} exists`);
  const rendered = spawnSync('kubectl', ['kustomize', dir], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  type Doc = { kind: string; metadata: { name: string }; spec?: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  let docs: Doc[];
  if (rendered.status === 0) {
    docs = parseAllDocuments(rendered.stdout).map((d) => d.toJSON() as Doc);
    t.equal(docs.filter((d) => d.kind === 'PersistentVolumeClaim').length, 0, 'rendered: no SQLite volume claim');
  } else {
    t.comment(`kubectl kustomize unavailable (${rendered.error?.message ?? rendered.stderr.trim()}); checking the patch itself`);
    docs = parseAllDocuments(read(`${dir}/deployment-patch.yaml`)).map((d) => d.toJSON() as Doc);
    t.ok(kust.patches.some((p) => /\$patch: delete[\s\S]*PersistentVolumeClaim/.test(p.patch ?? '')), 'the volume claim is deleted');
  }
  const dep = docs.find((d) => d.kind === 'Deployment')!;
  t.equal(dep.spec.replicas, 2, 'two pods');
  const sidecar = (dep.spec.template.spec.containers as { name: string; env: { name: string; valueFrom?: { secretKeyRef?: { name: string } } }[] }[]).find((c) => c.name === 'sidecar')!;
  t.equal(sidecar.env.find((e) => e.name === 'SIDECAR_DATABASE_URL')?.valueFrom?.secretKeyRef?.name, 'agent-authz-database', 'the database URL from a Secret');
  const secret = parseYaml(read(`${dir}/secret-database.yaml`)) as { stringData: Record<string, string> };
  const config = loadConfig({ SIDECAR_DATABASE_URL: secret.stringData.SIDECAR_DATABASE_URL!, SIDECAR_MASTER_KEY: Buffer.alloc(32, 2).toString('base64') });
  t.match(config.database?.url, /@agent-authz-postgres:5432\/authz/, 'the URL passes the configuration check and names the example database service');
  const pgDocs = parseAllDocuments(read(`${dir}/postgres.yaml`)).map((d) => d.toJSON() as Doc);
  t.same(pgDocs.map((d) => d.kind).sort(), ['Service', 'StatefulSet'], 'an example PostgreSQL');
});
