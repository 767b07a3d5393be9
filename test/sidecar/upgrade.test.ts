/**
 * Upgrade (issue 32, "a database written by the current release opens, migrates and keeps
 * working"): a SQLite database written by the release before organisations
 * (test/sidecar/fixtures/release-0.2.0, made by that release's own code) is opened by this one,
 * which migrates it; the personal account, its platform, connection and key, its certificates
 * (the verified one allows, the revoked one stays revoked) and its audit chain all verify
 * afterwards, and the new features work on the old data. (PostgreSQL runs the same shared
 * migrations: test/sidecar/store/schema.test.ts, and the contract on both engines.)
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { Client, login, startSidecar } from '../helpers/sidecar.js';
import { runAuditCommand } from '../../sidecar/audit/verify-command.js';
import { MIGRATIONS } from '../../sidecar/store/sqlite/migrations.js';

const FIXTURE = path.join(import.meta.dirname, 'fixtures', 'release-0.2.0');
const m = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'manifest.json'), 'utf8')) as {
  master_key: string; email: string; api_key: string; connection_id: string; platform_id: string; agent_id: string;
  cert_id: string; revoked_agent_id: string; revoked_cert_id: string; written_at: number;
};

t.test('a database of release 0.2.0 opens, migrates and keeps working', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authz-upgrade-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'agent-authz.sqlite'), zlib.gunzipSync(fs.readFileSync(path.join(FIXTURE, 'agent-authz.sqlite.gz'))));
  const sc = await startSidecar({ dataDir: dir, masterKey: new Uint8Array(Buffer.from(m.master_key, 'base64')) });
  t.teardown(() => sc.close());
  sc.clock.t = m.written_at + 60_000;

  const ping = await sc.app.ctx.store.ping();
  t.equal(ping.schemaVersion, MIGRATIONS[MIGRATIONS.length - 1]!.version, 'migrated to the newest schema');

  // The old key, agent and certificates.
  const platform = new Client(sc.url);
  platform.apiKey = m.api_key;
  const verify = async (agentId: string, scope: string) => {
    const ch = await platform.post('/v1/service/challenge');
    const pr = await platform.post(`/v1/service/connections/${m.connection_id}/agents/${agentId}/present`, { challenge: ch.body.challenge });
    if (pr.status !== 200) return `present ${pr.status} ${pr.body?.error?.code}`;
    const v = await platform.post('/v1/service/verify', { proof_bundle: pr.body.proof_bundle, required_scope: scope });
    return `${v.body?.decision} ${v.body?.decision_reason}`;
  };
  t.equal(await verify(m.agent_id, 'data:read'), 'allow authorized', 'the old certificate still allows');
  const other = await verify(m.agent_id, 'data:write');
  t.equal(other, 'deny not_delegated', `and only what it granted (${other})`);
  t.equal(await verify(m.revoked_agent_id, 'data:read'), 'present 404 no_active_delegation', 'the revoked one stays revoked');

  // The old person signs in to their personal workspace, with their platform and history.
  const user = await login(sc, m.email);
  const session = await user.get('/v1/auth/session');
  t.match(session.body, { email: m.email, account_type: 'individual', onboarding_step: 'complete',
    workspace: { kind: 'personal', role: 'owner' } });
  t.same((await user.get('/v1/service/platforms')).body.platforms.map((p: { platform_id: string }) => p.platform_id), [m.platform_id]);
  const usage = await user.get(`/v1/service/delegations/${m.cert_id}/usage`);
  t.equal(usage.status, 200, 'the certificate\'s usage reads');
  const events = (await user.get('/v1/service/audit/personal?limit=200')).body.events as { event_type: string }[];
  t.ok(events.filter((e) => e.event_type === 'proof.verified').length >= 4, 'the old verifies and the new one, in one trail');

  // The new features on the old data: an organisation beside the personal workspace.
  const org = await user.post('/v1/service/organizations', { name: 'Upgraded Ltd' });
  t.equal(org.status, 200);
  t.equal((await user.get('/v1/service/workspaces')).body.workspaces.length, 2);

  // The audit chain written by both releases verifies offline.
  await sc.app.close();
  const out: string[] = [];
  const code = await runAuditCommand(['verify', '--json', '--db', path.join(dir, 'agent-authz.sqlite')],
    { stdout: (s: string) => { out.push(s); }, stderr: (s: string) => { out.push(s); } }, {});
  t.equal(code, 0, `audit verify: ${out.join('').slice(0, 300)}`);
});
