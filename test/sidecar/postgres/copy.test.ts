/**
 * Moving up: a populated SQLite store is copied into an empty PostgreSQL
 * database with `agent-authz-sidecar copy-to-postgres` (a real process), and
 * a sidecar process on PostgreSQL carries on where the SQLite one stopped:
 * sessions, API keys and agents work; proofs made before the move and new
 * proofs from the existing certificate verify; the revoked certificate stays
 * revoked; the balance, the audit trail and the pending webhook deliveries
 * (same ids, attempts counted on) continue. The counts printed match the
 * source, and a second copy into the now populated database is refused.
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import Database from 'better-sqlite3';
import { startPostgres } from '../../helpers/postgres.js';
import { delegateAgent, specFlow, startMailSink, startSidecar } from '../../helpers/sidecar.js';
import { DB_FILE_NAME } from '../../../sidecar/store/index.js';
import { COPY_TABLES } from '../../../sidecar/store/copy.js';
import { VERIFY_PRICE_MICROS } from '../../../sidecar/decide/billing.js';
import { startHookReceiver } from '../webhooks/fixtures/hooks.js';
import { auditAll, bundleFor, expectDecision, expectError, usage, verify } from '../decide/helpers.js';
import type { AuditEvent, Bundle, Usage } from '../decide/helpers.js';
import { platformOn, sameSession, startReplica } from './replicas.js';
import { compiledSidecarMain } from '../../helpers/compiled-sidecar.js';

/**
 * The sidecar compiled from the current sources (test/helpers/compiled-sidecar.ts:
 * it starts for less CPU than tsx).
 */
const SIDECAR_MAIN = await compiledSidecarMain();

const ROOT = path.resolve(import.meta.dirname, '../../..');

function copyCommand(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [SIDECAR_MAIN, 'copy-to-postgres'], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((r) => child.once('exit', (code) => { clearTimeout(killer); r({ code, stdout, stderr }); }));
}

t.setTimeout(180_000);
const pg = await startPostgres(t);
if (pg) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-copy-'));
  const rx = await startHookReceiver();
  rx.status = 500;
  t.teardown(async () => { await rx.close(); fs.rmSync(dir, { recursive: true, force: true }); });
  const key = crypto.randomBytes(32);

  // (Everything awaited at the top level comes before the first subtest: tap ends the root test
  // when a subtest finishes and no other is queued.)
  const url = await pg.createDatabase();
  const otherUrl = await pg.createDatabase();
  const env = { SIDECAR_DATA_DIR: dir, SIDECAR_DATABASE_URL: url, SIDECAR_MASTER_KEY: key.toString('base64') };

  // A SQLite sidecar with a real history.
  const sc = await startSidecar({ dataDir: dir, masterKey: new Uint8Array(key) });
  const f = await specFlow(sc, 'mover@example.com', { callbackUrl: rx.url });
  const revoked = await delegateAgent(f, 'agent-2', { approve: ['data:read'] });
  const revokedBundle = await bundleFor(revoked);
  let kept: Bundle = {};
  let before: Usage | undefined;
  let auditBefore: AuditEvent[] = [];
  const sourceCounts: Record<string, number> = {};
  let pending: { id: string; attempts: number }[] = [];

  await t.test('a SQLite store with a history', async (t) => {
    t.equal((await f.user.post(`/v1/service/delegations/${revoked.certId}/revoke`, { reason: 'before the move' })).status, 200);
    for (let i = 0; i < 3; i++) expectDecision(t, await verify(f.platform, await bundleFor(f), 'data:read'), 'allow', 'authorized', undefined, 'an allow on SQLite');
    // An organisation with a pending invitation (memberships, invitations, a session's workspace).
    const org = await f.user.post('/v1/service/organizations', { name: 'Movers Ltd' });
    t.equal(org.status, 200, 'an organisation');
    t.equal((await f.user.post('/v1/auth/session/workspace', { workspace_id: org.body.organization_id })).status, 200);
    t.equal((await f.user.post('/v1/service/organization/invitations', { email: 'helper@example.com', role: 'auditor' })).status, 200);
    const me = (await f.user.get('/v1/auth/session')).body.account_id as string;
    t.equal((await f.user.post('/v1/auth/session/workspace', { workspace_id: me })).status, 200, 'back in the personal workspace');
    kept = await bundleFor(f);
    before = await usage(f.user);
    auditBefore = await auditAll(f.user);
    const deadline = Date.now() + 10_000;
    while (rx.hits.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await sc.app.close();
    await sc.mail.close();
    const src = new Database(path.join(dir, DB_FILE_NAME), { readonly: true });
    for (const tb of COPY_TABLES) sourceCounts[tb.name] = (src.prepare(`SELECT COUNT(*) AS n FROM ${tb.name}`).get() as { n: number }).n;
    pending = src.prepare("SELECT id, attempts FROM outbox WHERE state = 'pending'").all() as { id: string; attempts: number }[];
    src.close();
    t.ok(pending.length >= 3 && pending.every((p) => p.attempts >= 1), `${pending.length} deliveries pending after failed attempts`);
  });


  await t.test('the copy command copies, verifies and prints the counts; a second copy is refused', async (t) => {
    const r = await copyCommand(env);
    t.equal(r.code, 0, `exit 0 (${r.stderr.trim()})`);
    const printed = JSON.parse(r.stdout) as { copied: Record<string, number>; verified: boolean };
    t.same(printed.copied, sourceCounts, 'the counts of every table, as in the SQLite file');
    t.equal(printed.verified, true);
    t.ok(printed.copied.audit_events! > 0 && printed.copied.certificates! >= 2 && printed.copied.outbox! >= 3, 'a populated store');
    const again = await copyCommand(env);
    t.equal(again.code, 1, 'into a populated database: exit 1');
    t.match(again.stderr, /the target database is not empty/);
    const wrongKey = await copyCommand({ ...env, SIDECAR_DATABASE_URL: otherUrl, SIDECAR_MASTER_KEY: crypto.randomBytes(32).toString('base64') });
    t.equal(wrongKey.code, 1, 'with another master key: exit 1');
    t.match(wrongKey.stderr, /the master key cannot open this database's secrets/);
  });

  await t.test('a sidecar on PostgreSQL carries on', async (t) => {
    rx.status = 204;
    const mail = await startMailSink();
    t.teardown(() => mail.close());
    const r = await startReplica(t, { dbUrl: url, masterKey: key.toString('base64'), mail }, 'moved');
    const user = sameSession(f.user, r);
    t.equal((await user.get('/v1/auth/session')).body?.email, 'mover@example.com', 'the session works');
    const platform = platformOn(r, f.reg.api_key);
    const agents = await platform.get(`/v1/service/connections/${f.reg.connection_id}/agents`);
    t.same((agents.body.agents as { agent_id: string }[]).map((a) => a.agent_id).sort(), [f.agentId, revoked.agentId].sort(), 'the API key and the agents work');
    expectDecision(t, await verify(platform, kept, 'data:read'), 'allow', 'authorized', undefined, 'a proof made before the move');
    const ch = await platform.post('/v1/service/challenge');
    const pr = await platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${f.agentId}/present`, { challenge: ch.body.challenge });
    expectDecision(t, await verify(platform, pr.body.proof_bundle, 'data:read'), 'allow', 'authorized', undefined, 'a new proof from the existing certificate');
    expectDecision(t, await verify(platform, revokedBundle, 'data:read'), 'deny', 'delegation_revoked', undefined, 'the revoked certificate stays revoked');
    const ch2 = await platform.post('/v1/service/challenge');
    expectError(t, await platform.post(`/v1/service/connections/${f.reg.connection_id}/agents/${revoked.agentId}/present`, { challenge: ch2.body.challenge }), 404, 'no_active_delegation', 'present for the revoked agent');
    const after = await usage(user);
    t.equal(after.balance_micros, before!.balance_micros - 3 * VERIFY_PRICE_MICROS, 'the balance carried on (three more calls)');
    t.equal(after.verify_calls, before!.verify_calls + 3);
    const auditAfter = await auditAll(user);
    const ids = new Set(auditAfter.map((e) => e.event_id));
    t.ok(auditBefore.every((e) => ids.has(e.event_id)), 'every audit event from before the move');
    t.equal(auditAfter.length, auditBefore.length + 3 + 1, 'and the new ones (two allows, a deny, a presentation)');
    const wait = Date.now() + 20_000;
    const delivered = () => new Set(rx.answered().map((h) => String(h.headers['x-service-delivery-id'])));
    while (!pending.every((p) => delivered().has(p.id)) && Date.now() < wait) await new Promise((res) => setTimeout(res, 100));
    t.ok(pending.every((p) => delivered().has(p.id)), 'the pending deliveries went out from PostgreSQL with their ids');
    const attempts = await pg.admin<{ id: string; attempts: number }>("SELECT id, attempts FROM outbox WHERE state = 'delivered' AND id = ANY($1)", [pending.map((p) => p.id)], url.split('/').pop());
    t.ok(attempts.length === pending.length && attempts.every((a) => a.attempts > pending.find((p) => p.id === a.id)!.attempts), 'their attempt counts carried on');
  });
}
