/**
 * Both push exports of a RUNNING sidecar (a child process, `node --import tsx
 * sidecar/main.ts`, configured only through its environment:
 * SIDECAR_AUDIT_EXPORT_URL/_SECRET to a real NDJSON collector and
 * SIDECAR_AUDIT_OTLP_URL to a real receiver that parses OTLP/HTTP JSON, both
 * on loopback) through outages while decisions keep coming: the collectors
 * refuse connections or answer 503, then read a batch and cut the connection
 * without answering (so the sidecar must send it again), then recover. Every
 * audit event of the account (read back from its own export) arrives at each
 * sink, none is invented, and a duplicate carries the same event id and the
 * same content. Every wait is bounded.
 */
import t from 'tap';
import type { Test } from 'tap';
import { spawnSidecar, exitWithin } from '../ops/helpers.js';
import type { ChildSidecar } from '../ops/helpers.js';
import { present, remoteSidecar, specFlow, startMailSink } from '../../helpers/sidecar.js';
import type { Flow, MailSink } from '../../helpers/sidecar.js';
import { verifyWebhookSignature } from '../../../src/webhooks.js';
import { startCollector } from './collector.js';
import type { Collector } from './collector.js';

const SECRET = 'running-export-secret-'.repeat(2);
const WAIT_MS = 40_000;

type Attr = { key: string; value: { stringValue?: string; intValue?: string | number } };
type OtlpBody = { resourceLogs: { scopeLogs: { logRecords: { attributes: Attr[]; eventName?: string }[] }[] }[] };

/** NDJSON sink: every line received, by event id. */
function httpLines(c: Collector): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const r of c.received) {
    for (const line of r.body.split('\n').filter(Boolean)) {
      const id = (JSON.parse(line) as { event_id: string }).event_id;
      m.set(id, [...(m.get(id) ?? []), line]);
    }
  }
  return m;
}

/** OTLP sink: every log record received, by `log.record.uid`, reduced to what must not change between sends. */
function otlpRecords(c: Collector): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const r of c.received) {
    const body = JSON.parse(r.body) as OtlpBody;
    for (const rl of body.resourceLogs) {
      for (const sl of rl.scopeLogs) {
        for (const rec of sl.logRecords) {
          const a = Object.fromEntries(rec.attributes.map((x) => [x.key, x.value.stringValue ?? String(x.value.intValue)]));
          const id = a['log.record.uid']!;
          const stable = JSON.stringify([rec.eventName, a['agent_authz.event_type'], a['agent_authz.chain.position'], a['agent_authz.chain.hash'], a['agent_authz.details']]);
          m.set(id, [...(m.get(id) ?? []), stable]);
        }
      }
    }
  }
  return m;
}

let sc: ChildSidecar;
let mail: MailSink;
let http: Collector;
let otlp: Collector;
let f: Flow;

t.before(async () => {
  [http, otlp, mail] = await Promise.all([startCollector(), startCollector(), startMailSink()]);
  sc = await spawnSidecar({
    env: {
      SIDECAR_SMTP_URL: mail.url, SIDECAR_INSECURE_COOKIES: '1', SIDECAR_CRYPTO_WORKERS: '1', SIDECAR_LOG_LEVEL: 'warn',
      SIDECAR_AUDIT_EXPORT_URL: `${http.url}/siem`, SIDECAR_AUDIT_EXPORT_SECRET: SECRET,
      SIDECAR_AUDIT_OTLP_URL: `${otlp.url}/v1/logs`, SIDECAR_AUDIT_OTLP_HEADERS: 'authorization=Bearer%20otlp-token',
      SIDECAR_AUDIT_EXPORT_FLUSH_MS: '50', SIDECAR_AUDIT_EXPORT_BATCH: '4',
    },
  });
  f = await specFlow(remoteSidecar(sc.url, mail), 'running-push@example.com', { approve: ['data:read'] });
});
t.teardown(async () => {
  if (sc) {
    sc.child.kill('SIGTERM');
    if (!(await exitWithin(sc, 15_000))) sc.kill();
  }
  await Promise.all([http?.close(), otlp?.close(), mail?.close()]);
});

/** Verify calls (allow and deny alternate). */
async function decide(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: i % 2 ? 'data:write' : 'data:read' });
    if (r.status !== 200) throw new Error(`verify: ${r.status} ${r.text}`);
  }
}

/** The account's audit event ids, from its own export. */
async function auditIds(): Promise<string[]> {
  const r = await f.user.get('/v1/service/audit/personal/export');
  if (r.status !== 200) throw new Error(`export: ${r.status} ${r.text}`);
  return r.text.trim().split('\n').map((l) => JSON.parse(l) as { type: string; event_id?: string }).filter((l) => l.type === 'audit.event').map((l) => l.event_id!).sort();
}

/** A metric sample of the child's /metrics (0 when the series does not exist yet: a counter never incremented). */
async function metric(name: string, sink: string): Promise<number> {
  const m = await fetch(`${sc.url}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text());
  return Number(new RegExp(`^${name}\\{sink="${sink}"\\} (\\S+)$`, 'm').exec(m)?.[1] ?? 0);
}

/** Every id of `ids` received, none invented, duplicates identical; returns how many ids came more than once. */
function allArrived(t: Test, name: string, got: Map<string, string[]>, ids: string[]): number {
  t.same([...got.keys()].sort(), ids, `${name}: exactly the account's ${ids.length} events, none lost, none invented`);
  const dups = [...got.values()].filter((v) => v.length > 1);
  t.ok(dups.every((v) => v.every((x) => x === v[0])), `${name}: every duplicate carries the same event id and content`);
  return dups.length;
}

t.test('outage and recovery of both collectors while decisions are made: every event arrives', async (t) => {
  await decide(2);
  let ids = await auditIds();
  t.ok(await http.until(() => httpLines(http).size === ids.length, WAIT_MS), 'http: the first events arrived');
  t.ok(await otlp.until(() => otlpRecords(otlp).size === ids.length, WAIT_MS), 'otlp: the first events arrived');

  // Outage 1: the NDJSON collector refuses connections, the OTLP receiver answers 503.
  await http.pause();
  otlp.mode = 503;
  const before = { http: await metric('agent_authz_audit_export_failures_total', 'http'), otlp: otlp.attempts };
  await decide(3);
  t.ok(await waitFor(async () => (await metric('agent_authz_audit_export_failures_total', 'http')) >= before.http + 2), 'http: refused sends are counted as failures');
  t.ok(await otlp.until(() => otlp.attempts >= before.otlp + 2, WAIT_MS), 'otlp: sends answered 503');
  const sizes = { http: httpLines(http).size, otlp: otlpRecords(otlp).size };
  t.equal(sizes.http, ids.length, 'http: nothing new arrived during the outage');

  // Outage 2: both read the batch, then cut the connection without an answer.
  http.mode = 'drop';
  otlp.mode = 'drop';
  await http.resume();
  t.ok(await http.until(() => httpLines(http).size > sizes.http, WAIT_MS), 'http: a batch read and cut');
  t.ok(await otlp.until(() => otlpRecords(otlp).size > sizes.otlp, WAIT_MS), 'otlp: a batch read and cut');
  await decide(1);

  // Recovery.
  http.mode = 'ok';
  otlp.mode = 'ok';
  await decide(1);
  ids = await auditIds();
  t.equal(ids.length, 2 + 2 * 7, 'the registration\'s two administrative events, seven presents and seven verifies');
  t.ok(await http.until(() => httpLines(http).size >= ids.length, WAIT_MS), 'http: caught up after the recovery');
  t.ok(await otlp.until(() => otlpRecords(otlp).size >= ids.length, WAIT_MS), 'otlp: caught up after the recovery');
  t.ok(allArrived(t, 'http', httpLines(http), ids) >= 1, 'http: the cut batch was sent again');
  t.ok(allArrived(t, 'otlp', otlpRecords(otlp), ids) >= 1, 'otlp: the cut batch was sent again');
  t.ok(await waitFor(async () => (await metric('agent_authz_audit_export_backlog', 'http')) === 0 && (await metric('agent_authz_audit_export_backlog', 'otlp')) === 0), 'no backlog left on either sink');

  t.ok(http.received.every((r) => r.path === '/siem'), 'http: to the configured path');
  t.ok(http.received.every((r) => verifyWebhookSignature(SECRET, String(r.headers['x-service-timestamp']), r.body, String(r.headers['x-service-signature']))), 'http: every batch signed');
  t.ok(http.received.every((r) => r.body.split('\n').filter(Boolean).length <= 4), 'http: at most SIDECAR_AUDIT_EXPORT_BATCH events per request');
  t.ok(otlp.received.every((r) => r.path === '/v1/logs' && /^application\/json/.test(String(r.headers['content-type']))), 'otlp: JSON to the configured path');
  t.ok(otlp.received.every((r) => r.headers.authorization === 'Bearer otlp-token'), 'otlp: SIDECAR_AUDIT_OTLP_HEADERS sent');
});

/** Polls `pred` every 100 ms for at most WAIT_MS. */
async function waitFor(pred: () => Promise<boolean>): Promise<boolean> {
  const end = Date.now() + WAIT_MS;
  while (Date.now() < end) {
    if (await pred().catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
