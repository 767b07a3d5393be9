/**
 * The audit read's new filters and the NDJSON export over real HTTP: the
 * export of a time range verifies offline with the pinned service key, the
 * last event is covered by a checkpoint made for the export, and an edited
 * export file fails the verifier. Bad filter values are 400 invalid_request
 * naming the field.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { present, specFlow, startSidecar, expectError } from '../../helpers/sidecar.js';
import type { Flow } from '../../helpers/sidecar.js';
import { verifyCli } from './helpers.js';

async function verify(f: Flow, scope: string): Promise<{ decision: string; audit_event_id: string }> {
  const r = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: scope });
  if (r.status !== 200) throw new Error(`verify: ${r.status} ${r.text}`);
  return r.body as { decision: string; audit_event_id: string };
}

t.test('filters, export, offline verification of the export', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'export@example.com', { approve: ['data:read'] });
  const t0 = sc.clock.now();
  const allow1 = await verify(f, 'data:read');
  sc.clock.advance(1000);
  const deny = await verify(f, 'data:write');
  sc.clock.advance(1000);
  const allow2 = await verify(f, 'data:read');
  t.same([allow1.decision, deny.decision, allow2.decision], ['allow', 'deny', 'allow']);

  const ids = async (q: string): Promise<string[]> => {
    const r = await f.user.get(`/v1/service/audit/personal?${q}`);
    t.equal(r.status, 200, q);
    return (r.body.events as { event_id: string }[]).map((e) => e.event_id);
  };
  t.same(await ids('decision=deny'), [deny.audit_event_id], 'decision');
  t.same(await ids('reason=not_delegated'), [deny.audit_event_id], 'reason');
  t.same(await ids('scope=data:read&event_type=proof.verified'), [allow2.audit_event_id, allow1.audit_event_id], 'scope and type');
  t.same(await ids(`cert_id=${f.certId}&decision=allow&limit=1`), [allow2.audit_event_id], 'certificate, with limit');
  const iso = (ms: number): string => new Date(ms).toISOString();
  t.same(await ids(`from=${iso(t0 + 500)}&to=${iso(t0 + 1500)}&event_type=proof.rejected`), [deny.audit_event_id], 'time range');
  for (const [q, field] of [['decision=maybe', 'decision'], ['reason=nope', 'reason'], ['from=yesterday', 'from'], [`from=${iso(t0)}&to=${iso(t0)}`, 'from'], ['to=2026-13-01T00:00:00Z', 'to']]) {
    const r = await f.user.get(`/v1/service/audit/personal?${q}`);
    expectError(t, r, 400, 'invalid_request', q);
    t.equal(r.body.error.field, `querystring.${field}`, `${q}: names the field`);
  }

  const r = await f.user.get('/v1/service/audit/personal/export');
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^application\/x-ndjson/);
  const lines = r.text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.equal(lines[0]!.type, 'audit.export');
  t.same((lines[0]!.service_keys as { key_id: string }[]).map((k) => k.key_id), [sc.app.ctx.audit.signer.keyId], 'the header names the service key');
  const events = lines.filter((l) => l.type === 'audit.event');
  const cps = lines.filter((l) => l.type === 'audit.checkpoint');
  t.ok(events.length >= 6, 'presents and verifies');
  t.same(events.map((e) => e.position), events.map((_, i) => i + 1), 'chain order from position 1');
  t.equal(cps.at(-1)!.position, events.at(-1)!.position, 'a checkpoint covers the last event');
  t.same(lines.at(-1), { type: 'audit.export.end', events: events.length, checkpoints: cps.length });
  t.equal(events.find((e) => e.event_id === deny.audit_event_id)!.details && (events.find((e) => e.event_id === deny.audit_event_id)!.details as { decision_reason: string }).decision_reason, 'not_delegated');

  const file = path.join(sc.dataDir, 'export.ndjson');
  fs.writeFileSync(file, r.text);
  const ok = await verifyCli(['--export', file, '--key-id', sc.app.ctx.audit.signer.keyId]);
  t.equal(ok.code, 0, ok.stdout + ok.stderr);
  t.match(ok.stdout, /0 row\(s\) after the last checkpoint/);
  const edited = path.join(sc.dataDir, 'edited.ndjson');
  fs.writeFileSync(edited, r.text.replace(`"event_id":"${deny.audit_event_id}","account_id"`, `"event_id":"${deny.audit_event_id}","account_id"`).replace('"decision":"deny"', '"decision":"allow"'));
  const bad = await verifyCli(['--export', edited]);
  t.equal(bad.code, 1, 'an edited export is broken');
  t.match(bad.stdout, /row_changed/);
  const cut = path.join(sc.dataDir, 'cut.ndjson');
  fs.writeFileSync(cut, r.text.split('\n').slice(0, -2).join('\n') + '\n');
  t.equal((await verifyCli(['--export', cut])).code, 3, 'a truncated export cannot be verified');

  // A range in the middle: the chain starts mid-way and still verifies.
  const mid = await f.user.get(`/v1/service/audit/personal/export?from=${iso(t0 + 500)}&to=${iso(t0 + 1500)}`);
  const midLines = mid.text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const midEvents = midLines.filter((l) => l.type === 'audit.event');
  t.ok(midEvents.length >= 1 && (midEvents[0]!.position as number) > 1, 'starts mid-chain');
  const midFile = path.join(sc.dataDir, 'mid.ndjson');
  fs.writeFileSync(midFile, mid.text);
  t.equal((await verifyCli(['--export', midFile, '--key-id', sc.app.ctx.audit.signer.keyId])).code, 0, 'a partial export verifies');
  const empty = await f.user.get(`/v1/service/audit/personal/export?from=${iso(t0 - 100_000)}&to=${iso(t0 - 50_000)}`);
  t.equal(empty.status, 200);
  t.same(empty.text.trim().split('\n').map((l) => (JSON.parse(l) as { type: string }).type), ['audit.export', 'audit.export.end'], 'an empty range');
  expectError(t, await f.user.get('/v1/service/audit/personal/export?from=x'), 400, 'invalid_request');
  expectError(t, await f.platform.get('/v1/service/audit/personal/export'), 401, 'auth_required');
});
