/**
 * The push export against a real HTTP collector on loopback: signed NDJSON
 * batches; an outage (error answers, then the collector down) followed by
 * recovery loses no event, and events sent twice (an answer that came too
 * late) carry the same event id and content; the backlog bound and retention
 * are counted, never silent. OTLP/HTTP JSON is checked on the wire by a
 * receiver that parses it, with the same outage and recovery. Last, a real
 * sidecar configured with SIDECAR_AUDIT_EXPORT_* exports its decisions.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DB_FILE_NAME, openSqliteStore } from '../../../sidecar/store/index.js';
import type { SqliteStore } from '../../../sidecar/store/index.js';
import { AuditExporter } from '../../../sidecar/audit/export.js';
import type { ExporterOptions } from '../../../sidecar/audit/export.js';
import { httpSink, otlpSink } from '../../../sidecar/audit/sinks.js';
import type { ExportSink } from '../../../sidecar/audit/sinks.js';
import { verifyWebhookSignature } from '../../../src/webhooks.js';
import { loadConfig } from '../../../sidecar/config/index.js';
import { NOW, seed } from '../store/contract-fixtures.js';
import type { Seeded } from '../store/contract-fixtures.js';
import { checkpoint, decideOnce } from '../store/contract-audit.js';
import { present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import { startCollector } from './collector.js';
import type { Collector } from './collector.js';

const SECRET = 's3cret-'.repeat(6);
const quiet = { warn: () => undefined, error: () => undefined, info: () => undefined, debug: () => undefined };

async function tempStore(t: Tap): Promise<SqliteStore> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-push-'));
  const s = openSqliteStore({ file: path.join(dir, DB_FILE_NAME) });
  t.teardown(async () => { await s.close(); fs.rmSync(dir, { recursive: true, force: true }); });
  return s;
}
type Tap = { teardown(fn: () => unknown): void };

function exporter(store: SqliteStore, sink: ExportSink, o: Partial<ExporterOptions> = {}) {
  const counts = { delivered: 0, skipped: 0, pruned: 0, failures: 0 };
  const e = new AuditExporter({
    store: store.audit, sink, clock: Date.now, batch: 10, maxBacklog: 100_000, flushMs: 20, leaseMs: 60_000, log: quiet, random: () => 0,
    onEvents: (r, n) => { counts[r] += n; }, onFailure: () => { counts.failures++; }, ...o,
  });
  return { e, counts };
}

/** Every event id the collector got, with each line as received. */
function linesOf(c: Collector): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const r of c.received) {
    for (const line of r.body.split('\n').filter(Boolean)) {
      const id = (JSON.parse(line) as { event_id: string }).event_id;
      m.set(id, [...(m.get(id) ?? []), line]);
    }
  }
  return m;
}

async function allIds(s: SqliteStore, xs: Seeded[]): Promise<string[]> {
  return (await Promise.all(xs.map((x) => s.audit.readChain(x.accountId, 0, 10_000)))).flat().map((r) => r.id).sort();
}

t.test('http: outage and recovery lose nothing; duplicates keep their event id', async (t) => {
  const s = await tempStore(t);
  const col = await startCollector();
  t.teardown(() => col.close());
  const xs = [await seed(s, { credits: 1e9 }), await seed(s, { credits: 1e9 })];
  for (let i = 0; i < 15; i++) for (const x of xs) await decideOnce(s, x, { createdAt: NOW + i });
  col.mode = 503;
  const { e, counts } = exporter(s, httpSink({ url: `${col.url}/ingest`, secret: SECRET, timeoutMs: 300, clock: Date.now, log: quiet }));
  e.start();
  t.teardown(() => e.stop());
  t.ok(await col.until(() => counts.failures >= 3), 'the outage answers 503: failures counted');
  await col.pause();
  for (let i = 0; i < 5; i++) for (const x of xs) await decideOnce(s, x, { createdAt: NOW + 100 + i });
  e.nudge();
  await new Promise((r) => setTimeout(r, 200));
  t.equal(col.received.length, 0, 'nothing received during the outage');
  col.mode = 'slow';
  await col.resume();
  e.nudge();
  t.ok(await col.until(() => col.received.length >= 1), 'a batch arrives, its answer comes too late');
  col.mode = 'ok';
  e.nudge();
  const ids = await allIds(s, xs);
  t.equal(ids.length, 40);
  t.ok(await col.until(() => linesOf(col).size === 40 && counts.delivered >= 40, 15_000), 'every event arrived after the recovery');
  const lines = linesOf(col);
  t.same([...lines.keys()].sort(), ids, 'exactly the events of the trail: none lost, none invented');
  const dups = [...lines.values()].filter((l) => l.length > 1);
  t.ok(dups.length >= 1, 'the late-answered batch was sent again');
  t.ok(dups.every((l) => l.every((x) => x === l[0])), 'a duplicate is the same line, with the same event_id');
  for (const r of col.received) {
    const h = r.headers;
    t.ok(verifyWebhookSignature(SECRET, String(h['x-service-timestamp']), r.body, String(h['x-service-signature'])), 'signed like a webhook');
    t.equal(h['content-type'], 'application/x-ndjson');
    t.match(String(h['x-service-delivery-id']), /^audit-batch-[0-9a-f]{32}$/);
    t.ok(r.body.split('\n').filter(Boolean).length <= 10, 'at most the batch size per request');
  }
  const line = JSON.parse(lines.get(ids[0]!)![0]!) as Record<string, unknown>;
  t.same(Object.keys(line), ['type', 'event_id', 'account_id', 'event_type', 'occurred_at', 'connection_id', 'agent_id', 'cert_id', 'required_scope', 'details', 'position', 'prev_hash', 'hash']);
  t.equal(await s.audit.exportBacklog('http'), 0, 'no backlog left');
});

t.test('the backlog bound and retention are counted', async (t) => {
  const s = await tempStore(t);
  const col = await startCollector();
  t.teardown(() => col.close());
  const x = await seed(s, { credits: 1e9 });
  for (let i = 0; i < 12; i++) await decideOnce(s, x);
  const { e, counts } = exporter(s, httpSink({ url: col.url, secret: SECRET, timeoutMs: 1000, clock: Date.now, log: quiet }), { maxBacklog: 5 });
  t.teardown(() => e.stop());
  const r = await e.tick();
  t.match(r, { skipped: 7, delivered: 5, failed: false });
  t.same([...linesOf(col).values()].map((l) => (JSON.parse(l[0]!) as { position: number }).position), [8, 9, 10, 11, 12], 'the newest rows within the bound');
  for (let i = 0; i < 4; i++) await decideOnce(s, x);
  const rows = await s.audit.readChain(x.accountId, 12, 10);
  t.equal(await s.audit.pruneTo(checkpoint(x.accountId, 14, rows[1]!.hash, { kind: 'anchor' })), 14);
  t.match(await e.tick(), { pruned: 2, delivered: 2 }, 'rows 13-14 were removed by retention before export');
  t.same(counts, { delivered: 7, skipped: 7, pruned: 2, failures: 0 });
});

t.test('otlp: the wire format, outage and recovery', async (t) => {
  const s = await tempStore(t);
  const col = await startCollector();
  t.teardown(() => col.close());
  const x = await seed(s, { credits: 1e9 });
  await decideOnce(s, x, { decision: 'deny', audit: { id: 'evt-deny', accountId: x.accountId, eventType: 'proof.rejected', connectionId: x.c.id, agentId: x.agentId, certId: 'cert-1', requiredScope: 'data:write', details: { decision: 'deny', decision_reason: 'not_delegated' }, createdAt: NOW + 1234 } });
  for (let i = 0; i < 4; i++) await decideOnce(s, x);
  const { e, counts } = exporter(s, otlpSink({ url: `${col.url}/v1/logs`, headers: { authorization: 'Bearer t0ken' }, timeoutMs: 500, clock: () => NOW + 9999, serviceVersion: '9.9.9' }));
  t.teardown(() => e.stop());
  col.mode = 503;
  t.match(await e.tick(), { failed: true, delivered: 0 });
  col.mode = 'slow';
  t.match(await e.tick(), { failed: true }, 'answered too late: fails, will be sent again');
  col.mode = 'ok';
  t.match(await e.tick(), { failed: false, delivered: 5 });
  t.equal(counts.failures, 2);
  t.equal(col.received.length, 2, 'the late one and the retry');
  const r = col.received[1]!;
  t.equal(r.path, '/v1/logs');
  t.match(String(r.headers['content-type']), /^application\/json/);
  t.equal(r.headers.authorization, 'Bearer t0ken');
  const body = JSON.parse(r.body) as { resourceLogs: { resource: { attributes: Attr[] }; scopeLogs: { scope: { name: string }; logRecords: Rec[] }[] }[] };
  type Attr = { key: string; value: { stringValue?: string; intValue?: string | number } };
  type Rec = { timeUnixNano: string | number; observedTimeUnixNano: string | number; severityNumber: number; severityText: string; body: { stringValue: string }; eventName?: string; attributes: Attr[] };
  const attrs = (a: Attr[]): Record<string, unknown> => Object.fromEntries(a.map((x) => [x.key, x.value.stringValue ?? Number(x.value.intValue)]));
  t.match(attrs(body.resourceLogs[0]!.resource.attributes), { 'service.name': 'agent-authz-sidecar', 'service.version': '9.9.9' });
  const scope = body.resourceLogs[0]!.scopeLogs[0]!;
  t.equal(scope.scope.name, 'agent-authz.audit');
  t.equal(scope.logRecords.length, 5);
  const deny = scope.logRecords[0]!;
  t.equal(String(deny.timeUnixNano), String(BigInt(NOW + 1234) * 1_000_000n), 'the event time in ns');
  t.equal(String(deny.observedTimeUnixNano), String(BigInt(NOW + 9999) * 1_000_000n));
  t.same([deny.severityNumber, deny.severityText, deny.body.stringValue, deny.eventName], [13, 'WARN', 'proof.rejected deny not_delegated', 'proof.rejected']);
  t.match(attrs(deny.attributes), {
    'log.record.uid': 'evt-deny', 'agent_authz.event_type': 'proof.rejected', 'agent_authz.account_id': x.accountId, 'agent_authz.agent_id': x.agentId,
    'agent_authz.cert_id': 'cert-1', 'agent_authz.scope': 'data:write', 'agent_authz.decision': 'deny', 'agent_authz.reason': 'not_delegated', 'agent_authz.chain.position': 1,
  });
  t.equal(scope.logRecords[1]!.severityNumber, 9, 'INFO for the others');
  const uids = (b: string): string[] => (JSON.parse(b) as typeof body).resourceLogs[0]!.scopeLogs[0]!.logRecords.map((l) => String(attrs(l.attributes)['log.record.uid']));
  t.same(uids(col.received[0]!.body), uids(r.body), 'the duplicate carries the same log.record.uid');
  t.equal(await s.audit.exportBacklog('otlp'), 0);
});

t.test('a sidecar with SIDECAR_AUDIT_EXPORT_* exports its decisions', async (t) => {
  const col = await startCollector();
  t.teardown(() => col.close());
  const audit = { ...loadConfig({}).audit, export: { url: `${col.url}/siem`, secret: SECRET }, exportFlushMs: 20 };
  const sc = await startSidecar({ audit });
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'push@example.com', { approve: ['data:read'] });
  const v = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: 'data:read' });
  t.equal(v.status, 200);
  t.ok(await col.until(() => linesOf(col).has(v.body.audit_event_id as string)), 'the decision reached the collector');
  const m = await fetch(`${sc.url}/metrics`).then((r) => r.text());
  t.match(m, /agent_authz_audit_export_events_total\{sink="http",result="delivered"\} [1-9]/);
  t.match(m, /agent_authz_audit_export_backlog\{sink="http"\} \d+/);
});
