/**
 * The decision log on a real sidecar: one JSON line per verify call in the
 * file named by SIDECAR_DECISION_LOG, with the documented field names, masked
 * context members, refusals as `refused` with the error code, and the audit
 * event id of each decision. Also the audit settings' validation.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import { ConfigError, loadConfig } from '../../../sidecar/config/index.js';
import { MASKED } from '../../../sidecar/audit/decision-log.js';

const FIELDS = ['type', 'request_id', 'time', 'platform_id', 'connection_id', 'agent_id', 'cert_id', 'scope', 'decision', 'reason', 'constraint', 'context', 'latency_ms', 'audit_event_id',
  'decision_id', 'mode'];

t.test('one line per verify call, with masking', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-dlog-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'logs', 'decisions.ndjson');
  const audit = { ...loadConfig({}).audit, decisionLog: { file }, decisionLogMask: ['client_ip', 'tenant'] };
  const sc = await startSidecar({ audit });
  let closed = false;
  t.teardown(() => (closed ? undefined : sc.close()));
  const f = await specFlow(sc, 'dlog@example.com', { approve: ['data:read'] });
  const ctx = { method: 'GET', path: '/orders', client_ip: '203.0.113.9', tenant: 'acme' };
  const allow = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read', context: ctx }, { headers: { 'x-request-id': 'req-allow-1' } });
  const deny = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:write' });
  const refused = await f.platform.post('/v1/service/verify', { proof_bundle: { nope: 1 }, required_scope: 'data:read' }, { apiKey: 'aak_wrongwrongwr.nothing' });
  t.same([allow.status, deny.status, refused.status], [200, 200, 401]);
  await sc.close();
  closed = true;

  const lines = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.equal(lines.length, 3, 'one line per call');
  for (const l of lines) t.same(Object.keys(l), FIELDS, 'the documented fields, in order');
  const [a, d, r] = lines as Record<string, unknown>[];
  t.match(a, {
    type: 'agent_authz.decision', request_id: 'req-allow-1', platform_id: f.reg.platform_id, connection_id: f.reg.connection_id, agent_id: f.agentId,
    cert_id: f.certId, scope: 'data:read', decision: 'allow', reason: 'authorized', constraint: null, audit_event_id: allow.body.audit_event_id,
  });
  t.same(a!.context, { method: 'GET', path: '/orders', client_ip: MASKED, tenant: MASKED }, 'masked members');
  t.ok(typeof a!.latency_ms === 'number' && (a!.latency_ms as number) > 0);
  t.ok(!Number.isNaN(Date.parse(a!.time as string)));
  t.match(d, { decision: 'deny', reason: 'not_delegated', scope: 'data:write', context: null, audit_event_id: deny.body.audit_event_id });
  t.match(r, { decision: 'refused', reason: 'invalid_api_key', platform_id: null, agent_id: null, audit_event_id: null });
});

t.test('audit settings are validated', async (t) => {
  const bad = (env: Record<string, string>, re: RegExp): void => { t.throws(() => loadConfig(env), { name: ConfigError.name, message: re }, JSON.stringify(env)); };
  bad({ SIDECAR_AUDIT_CHAIN: 'maybe' }, /^SIDECAR_AUDIT_CHAIN: on or off/);
  bad({ SIDECAR_AUDIT_CHECKPOINT_ROWS: '0' }, /^SIDECAR_AUDIT_CHECKPOINT_ROWS: must be between 1/);
  bad({ SIDECAR_AUDIT_CHECKPOINT_SECONDS: 'x' }, /^SIDECAR_AUDIT_CHECKPOINT_SECONDS: expected an integer/);
  bad({ SIDECAR_DECISION_LOG: 'logs/d.ndjson' }, /^SIDECAR_DECISION_LOG: off, stdout or an absolute file path/);
  bad({ SIDECAR_DECISION_LOG_MASK: 'client_ip,password' }, /^SIDECAR_DECISION_LOG_MASK: unknown context member "password"/);
  bad({ SIDECAR_AUDIT_EXPORT_URL: 'https://siem.example/in' }, /^SIDECAR_AUDIT_EXPORT_SECRET: required/);
  bad({ SIDECAR_AUDIT_EXPORT_URL: 'ftp://x/', SIDECAR_AUDIT_EXPORT_SECRET: 's'.repeat(32) }, /^SIDECAR_AUDIT_EXPORT_URL: scheme must be http: or https:/);
  bad({ SIDECAR_AUDIT_EXPORT_URL: 'https://x/', SIDECAR_AUDIT_EXPORT_SECRET: 'short' }, /^SIDECAR_AUDIT_EXPORT_SECRET: 32 to 256 characters/);
  bad({ SIDECAR_AUDIT_EXPORT_SECRET: 's'.repeat(32) }, /set without SIDECAR_AUDIT_EXPORT_URL/);
  bad({ SIDECAR_AUDIT_OTLP_HEADERS: 'a=b' }, /^SIDECAR_AUDIT_OTLP_HEADERS: set without SIDECAR_AUDIT_OTLP_URL/);
  bad({ SIDECAR_AUDIT_OTLP_URL: 'http://127.0.0.1:4318/v1/logs', SIDECAR_AUDIT_OTLP_HEADERS: 'novalue' }, /^SIDECAR_AUDIT_OTLP_HEADERS: expected name=value/);
  bad({ SIDECAR_AUDIT_EXPORT_BATCH: '20000' }, /^SIDECAR_AUDIT_EXPORT_BATCH: must be between 1 and 10000/);
  const c = loadConfig({
    SIDECAR_AUDIT_CHAIN: 'off', SIDECAR_DECISION_LOG: 'stdout', SIDECAR_DECISION_LOG_MASK: '*',
    SIDECAR_AUDIT_EXPORT_URL: 'http://127.0.0.1:9000/in', SIDECAR_AUDIT_EXPORT_SECRET: 'x'.repeat(40),
    SIDECAR_AUDIT_OTLP_URL: 'http://127.0.0.1:4318/v1/logs', SIDECAR_AUDIT_OTLP_HEADERS: 'Authorization=Bearer%20abc, x-tenant = t1',
  }).audit;
  t.same(c, {
    chain: false, checkpointRows: 1000, checkpointSeconds: 60, decisionLog: 'stdout', decisionLogMask: ['*'],
    export: { url: 'http://127.0.0.1:9000/in', secret: 'x'.repeat(40) },
    otlp: { url: 'http://127.0.0.1:4318/v1/logs', headers: { authorization: 'Bearer abc', 'x-tenant': 't1' } },
    exportBatch: 500, exportMaxBacklog: 100_000, exportFlushMs: 1000,
  });
  t.same(loadConfig({}).audit.export, null, 'exports are off by default');
});
