/**
 * The retention job (`runRetention`, run hourly by the server) against the
 * test clock: spent or expired challenges go once they are older than
 * `SIDECAR_CHALLENGE_RETENTION_HOURS`; audit rows stay forever by default and
 * go after `SIDECAR_AUDIT_RETENTION_DAYS` when that is set.
 */
import t from 'tap';
import { login, present, specFlow, startSidecar } from '../../helpers/sidecar.js';
import type { Flow, TestSidecar } from '../../helpers/sidecar.js';
import { runRetention } from '../../../sidecar/server.js';

const HOUR = 3600_000;

async function verify(f: Flow, scope = 'data:read'): Promise<string> {
  const r = await f.platform.post('/v1/service/verify', { proof_bundle: await present(f), required_scope: scope });
  if (r.status !== 200) throw new Error(`verify: ${r.status} ${r.text}`);
  return r.body.decision as string;
}

async function auditCount(sc: TestSidecar, email: string): Promise<number> {
  const c = await login(sc, email);
  const r = await c.get('/v1/service/audit/personal?limit=100');
  if (r.status !== 200) throw new Error(`audit: ${r.status} ${r.text}`);
  return (r.body.events as unknown[]).length;
}

t.test('challenges are purged after the retention window; audit is kept by default', async (t) => {
  const sc = await startSidecar();
  t.teardown(() => sc.close());
  t.equal(sc.config.auditRetentionDays, 0, 'default: keep audit forever');
  t.equal(sc.config.challengeRetentionHours, 24, 'default: 24 h');
  const f = await specFlow(sc, 'retention@example.com');
  t.equal(await verify(f), 'allow', 'one consumed challenge');
  t.equal((await f.platform.post('/v1/service/challenge')).status, 200, 'one unused challenge');
  const ch = await f.platform.post('/v1/service/challenge');
  t.equal((await f.platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge })).status, 200, 'one presented, never verified');
  const audit = await auditCount(sc, 'retention@example.com');
  t.ok(audit >= 3, 'presented + verified events recorded');

  t.same(await runRetention(sc.app.ctx), { challenges: 0, audit: 0 }, 'nothing old yet');
  sc.clock.advance(23 * HOUR);
  t.same(await runRetention(sc.app.ctx), { challenges: 0, audit: 0 }, 'still inside 24 h');
  sc.clock.advance(2 * HOUR);
  t.same(await runRetention(sc.app.ctx), { challenges: 3, audit: 0 }, 'spent and expired challenges purged after 24 h');
  t.same(await runRetention(sc.app.ctx), { challenges: 0, audit: 0 }, 'idempotent');
  t.equal(await auditCount(sc, 'retention@example.com'), audit, 'audit untouched');

  // Fresh activity still works after the purge and is kept.
  t.equal(await verify(f), 'allow');
  t.same(await runRetention(sc.app.ctx), { challenges: 0, audit: 0 }, 'the new consumed challenge is young');
});

t.test('audit retention, when configured, purges only old rows', async (t) => {
  const sc = await startSidecar({ auditRetentionDays: 1, challengeRetentionHours: 1 });
  t.teardown(() => sc.close());
  const f = await specFlow(sc, 'audit-retention@example.com');
  t.equal(await verify(f), 'allow');
  const old = await auditCount(sc, 'audit-retention@example.com');
  t.ok(old >= 2);

  sc.clock.advance(2 * HOUR);
  const r1 = await runRetention(sc.app.ctx);
  t.equal(r1.audit, 0, 'audit younger than a day is kept');
  t.equal(r1.challenges, 1, 'the consumed challenge is older than 1 h');

  sc.clock.advance(23 * HOUR);
  t.equal(await verify(f), 'allow', 'new activity a day later');
  const r2 = await runRetention(sc.app.ctx);
  t.equal(r2.audit, old, 'exactly the day-old rows are purged');
  t.equal(await auditCount(sc, 'audit-retention@example.com'), 2, 'the new presented + verified rows remain');
});
