/**
 * The decision log on stdout (SIDECAR_DECISION_LOG=stdout) of a sidecar
 * child process, as an operator's log shipper reads it: every stdout line is
 * one whole JSON object (decision lines never interleave with the service's
 * own log lines, told apart by `type`), one decision line per verify call with
 * exactly the fields docs/audit.md documents, in order; a `constraint_denied`
 * decision names its constraint; masked context members; a refusal; and the
 * lines counter.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { REPO, exitWithin, spawnSidecar } from '../ops/helpers.js';
import type { ChildSidecar } from '../ops/helpers.js';
import { present, remoteSidecar, specFlow, startMailSink } from '../../helpers/sidecar.js';
import type { MailSink } from '../../helpers/sidecar.js';

const FIELDS = ['type', 'request_id', 'time', 'platform_id', 'connection_id', 'agent_id', 'cert_id', 'scope', 'decision', 'reason', 'constraint', 'context', 'latency_ms', 'audit_event_id',
  'decision_id', 'mode'];

/** The field names of the "Decision log" table of docs/audit.md, in order. */
function documentedFields(): string[] {
  const doc = fs.readFileSync(path.join(REPO, 'docs/audit.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Decision log'), doc.indexOf('## Push export'));
  return section.split('\n').filter((l) => /^\| `/.test(l)).flatMap((l) => [...l.split('|')[1]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!));
}

let sc: ChildSidecar;
let mail: MailSink;

t.teardown(async () => {
  if (sc) {
    sc.child.kill('SIGTERM');
    if (!(await exitWithin(sc, 15_000))) sc.kill();
  }
  await mail?.close();
});

t.test('decision lines on stdout, beside the service log', async (t) => {
  t.same(documentedFields(), FIELDS, 'docs/audit.md documents exactly these fields, in this order');
  mail = await startMailSink();
  sc = await spawnSidecar({
    env: {
      SIDECAR_SMTP_URL: mail.url, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_CRYPTO_WORKERS: '1', SIDECAR_LOG_LEVEL: 'info',
      SIDECAR_DECISION_LOG: 'stdout', SIDECAR_DECISION_LOG_MASK: 'client_ip',
    },
  });
  const f = await specFlow(remoteSidecar(sc.url, mail), 'stdout-dlog@example.com', { approve: ['data:read'], constraints: { methods: ['GET'] } });
  const ctx = { method: 'GET', path: '/orders', client_ip: '203.0.113.9', tenant: 'acme' };
  const verify = async (context: Record<string, string>, requestId: string) =>
    f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read', context }, { headers: { 'x-request-id': requestId } });
  const allow = await verify(ctx, 'req-stdout-allow');
  const denied = await verify({ ...ctx, method: 'POST' }, 'req-stdout-constraint');
  const refused = await f.platform.post('/v1/service/verify', { proof_bundle: {}, required_scope: 'data:read' }, { apiKey: 'aak_wrongwrongwr.nothing', headers: { 'x-request-id': 'req-stdout-refused' } });
  t.same([allow.body.decision, denied.body.decision, denied.body.decision_reason, denied.body.constraint, refused.status], ['allow', 'deny', 'constraint_denied', 'methods', 401]);

  const decisionLines = (): Record<string, unknown>[] =>
    sc.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.type === 'agent_authz.decision');
  const end = Date.now() + 10_000;
  while (decisionLines().length < 3 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));

  const parsed = sc.lines.map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return null; } });
  t.equal(parsed.filter((l) => l === null).length, 0, `all ${sc.lines.length} stdout lines are whole JSON objects`);
  const service = parsed.filter((l) => l !== null && l.type !== 'agent_authz.decision');
  t.ok(service.length > 0 && service.every((l) => typeof l!.msg === 'string' && typeof l!.level === 'number'), 'the service log shares stdout, told apart by type');
  const lines = decisionLines();
  t.equal(lines.length, 3, 'one decision line per verify call');
  for (const l of lines) t.same(Object.keys(l), FIELDS, `${String(l.request_id)}: the documented fields, in order`);
  const [a, d, r] = lines as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
  t.match(a, {
    request_id: 'req-stdout-allow', platform_id: f.reg.platform_id, connection_id: f.reg.connection_id, agent_id: f.agentId, cert_id: f.certId,
    scope: 'data:read', decision: 'allow', reason: 'authorized', constraint: null, audit_event_id: allow.body.audit_event_id,
  });
  t.same(a.context, { method: 'GET', path: '/orders', client_ip: '[masked]', tenant: 'acme' }, 'client_ip masked');
  t.match(d, {
    request_id: 'req-stdout-constraint', decision: 'deny', reason: 'constraint_denied', constraint: 'methods', cert_id: f.certId,
    audit_event_id: denied.body.audit_event_id, context: { method: 'POST', client_ip: '[masked]' },
  });
  t.match(r, { request_id: 'req-stdout-refused', decision: 'refused', reason: 'invalid_api_key', constraint: null, platform_id: null, agent_id: null, audit_event_id: null });
  for (const l of lines) {
    t.ok(typeof l.latency_ms === 'number' && l.latency_ms >= 0, 'latency_ms is a number');
    t.match(l.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'time is ISO 8601 UTC');
  }
  const m = await fetch(`${sc.url}/metrics`).then((x) => x.text());
  t.match(m, /^agent_authz_decision_log_lines_total 3$/m, 'the lines are counted');
});
